package pgstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/pgstore"
)

// gatedServer is a fake PostgreSQL server on loopback that answers each
// simple query (a ping) only once gate has a value for it, and reports
// what it received on got: 'Q' a query, 'C' a cancel request.
type gatedServer struct {
	addr string
	gate chan struct{}
	got  chan byte
}

func newGatedServer(t *testing.T) *gatedServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	g := &gatedServer{addr: ln.Addr().String(), gate: make(chan struct{}, 8), got: make(chan byte, 8)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.serve(c)
		}
	}()
	return g
}

func (g *gatedServer) serve(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	for {
		m, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		if _, ok := m.(*pgproto3.SSLRequest); ok {
			if _, err := c.Write([]byte("N")); err != nil {
				return
			}
			continue
		}
		if _, ok := m.(*pgproto3.CancelRequest); ok {
			g.got <- 'C'
			return
		}
		break
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	for {
		if err := be.Flush(); err != nil {
			return
		}
		m, err := be.Receive()
		if err != nil {
			return
		}
		if _, ok := m.(*pgproto3.Query); !ok {
			return
		}
		g.got <- 'Q'
		<-g.gate
		be.Send(&pgproto3.EmptyQueryResponse{})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	}
}

// A connection closed after its caller gave up is never handed out: when
// an Acquire's context ends during its ping of an idle connection, pgxpool
// finishes the ping in the background and, the ping answered, puts the
// connection back — which the cancel handler closed, its deadline having
// passed during the ping. The next Acquire must get a live connection
// (PoolConfig's PrepareConn), not that one.
func TestPoolSkipsConnectionClosedAfterAbandonedPing(t *testing.T) {
	g := newGatedServer(t)
	cfg, err := pgstore.PoolConfig("postgres://u@" + g.addr + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	var ping atomic.Bool
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return ping.Load() }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(context.Background()) // the pool's connection
	if err != nil {
		t.Fatal(err)
	}
	c.Release()

	ping.Store(true)
	// Long enough for the Acquire below to send its ping on a loaded
	// machine (with 50 ms it could pass before, and the server would wait
	// for the ping forever); a cancel instead of a deadline makes pgxpool
	// wait a minute for the abandoned ping.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		done <- err
	}()
	select {
	case got := <-g.got:
		if got != 'Q' {
			t.Fatalf("server got %q, want the ping", got)
		}
	case <-ctx.Done():
		t.Fatal("no ping before the deadline: the machine is too slow for this test's second")
	}
	<-ctx.Done() // the deadline passes while the server holds the ping
	if err := <-done; err == nil {
		t.Fatal("Acquire succeeded past its deadline")
	}
	if got := <-g.got; got != 'C' { // the handler cancels the ping
		t.Fatalf("server got %q, want the cancel request", got)
	}
	g.gate <- struct{}{} // the ping is answered; pgxpool puts its connection back
	waitFor(t, "the pinged connection back in the pool", func() bool { return pool.Stat().IdleConns() == 1 })

	ping.Store(false)
	c, err = pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if c.Conn().IsClosed() {
		t.Fatal("the pool handed out the connection closed after the abandoned ping")
	}
}
