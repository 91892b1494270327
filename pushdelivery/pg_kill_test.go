package pushdelivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// killer is a pgx query tracer that, once armed, terminates the backend
// of the connection that has just run the at-th statement (0: none), so
// that the statement after it, on that connection, fails: a kill between
// two statements of a claim, a commit, a release or a reopen.
type killer struct {
	admin *pgxpool.Pool
	at    int
	armed atomic.Bool
	mu    struct {
		sync.Mutex
		n      int
		stmts  []string // the first line of each statement run since armed
		killed string   // the statement after which the backend was killed
		err    error
	}
}

func (k *killer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if k.armed.Load() {
		k.mu.Lock()
		k.mu.stmts = append(k.mu.stmts, strings.TrimSpace(strings.SplitN(d.SQL, "\n", 2)[0]))
		k.mu.Unlock()
	}
	return ctx
}

func (k *killer) TraceQueryEnd(_ context.Context, c *pgx.Conn, _ pgx.TraceQueryEndData) {
	if !k.armed.Load() {
		return
	}
	k.mu.Lock()
	k.mu.n++
	kill := k.mu.n == k.at
	if kill && len(k.mu.stmts) > 0 { // armed while the statement ran: its start not seen
		k.mu.killed = k.mu.stmts[len(k.mu.stmts)-1]
	}
	k.mu.Unlock()
	if !kill {
		return
	}
	var ok bool
	err := k.admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, c.PgConn().PID()).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("backend %d not terminated", c.PgConn().PID())
	}
	k.mu.Lock()
	k.mu.err = err
	k.mu.Unlock()
}

// statements returns the statements run since armed.
func (k *killer) statements() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.mu.stmts)
}

// killRun is the outcome of one delivery run under a killer.
type killRun struct {
	revs   []int64  // the revisions the webhook acknowledged, in arrival order
	lost   float64  // leases lost (a2astore_push_lease_lost_total)
	stmts  []string // the outbox's statements until the run was over
	killed string   // the statement after which the connection died ("": none)
}

// deliverKilled delivers revisions 1 to 3 of a task to a webhook that
// acknowledges every post, by a worker (one delivery at a time) over a
// PostgreSQL outbox whose pool holds one connection, killed after its
// at-th statement; it returns once the record has delivered revision 3
// and holds no lease.
func deliverKilled(t *testing.T, dsn string, admin *pgxpool.Pool, at int) killRun {
	t.Helper()
	ctx := context.Background()
	schema := pgtest.Schema(t, dsn)
	s, err := pgstore.New(ctx, newPool(t, dsn, "store"), pgstore.Options{Schema: schema, Log: true})
	if err != nil {
		t.Fatal(err)
	}
	newTask(t, s, "t1")
	for range 2 {
		r, err := s.Get(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		ev := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: r.Task.ContextID, Status: r.Task.Status}
		if _, err := s.Replace(engine.WithEvent(ctx, ev), r.Task, r.Revision); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var revs []int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rev, _ := strconv.ParseInt(r.Header.Get(pushdelivery.HeaderRevision), 10, 64)
		mu.Lock()
		revs = append(revs, rev)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	k := &killer{admin: admin, at: at}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every statement of the outbox on one connection, in order
	cfg.ConnConfig.RuntimeParams["application_name"] = "outbox"
	cfg.ConnConfig.Tracer = k
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o, err := pushdelivery.NewPG(ctx, pool, pushdelivery.PGOptions{Schema: schema, Lease: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{TaskID: "t1", ID: "c", URL: hook.URL},
		Dest: hook.URL, Created: now, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := pushdelivery.NewMetrics(reg, nil)
	k.armed.Store(true)
	w := pushdelivery.Start(ctx, pushdelivery.Options{Outbox: o, Store: s, Workers: 1, Poll: 20 * time.Millisecond,
		ClaimBudget: time.Second, Client: pushdelivery.NewClient(pushdelivery.ClientOptions{AllowPrivate: true}),
		Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	done := func() bool {
		var delivered int64
		var leased bool
		q := fmt.Sprintf(`SELECT delivered, lease_token IS NOT NULL FROM %s.a2a_push_configs WHERE task_id = 't1'`, schema)
		if err := admin.QueryRow(ctx, q).Scan(&delivered, &leased); err != nil {
			t.Fatal(err)
		}
		return delivered == 3 && !leased
	}
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("revision 3 not committed delivered within a minute; statements %q", k.statements())
		}
		<-tick.C
	}
	run := killRun{stmts: k.statements()}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	run.killed = k.mu.killed
	if k.mu.err != nil {
		t.Fatalf("terminating the outbox's connection: %v", k.mu.err)
	}
	k.mu.Unlock()
	mu.Lock()
	run.revs = slices.Clone(revs)
	mu.Unlock()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "a2astore_push_lease_lost_total" {
			for _, m := range mf.GetMetric() {
				run.lost += m.GetCounter().GetValue()
			}
		}
	}
	return run
}

// TestPGKilledBetweenStatements (SPEC N2; STYLE "prove it between
// statements"): the outbox's connection is killed after its k-th
// statement, for every k of a delivery (the first claim's rescan, the
// claim, the commit, in their READ COMMITTED transactions, and the
// claims after it), one kill per run. Each run delivers revisions 1 to 3
// in order, none lost; and none is posted twice unless a lease was lost
// (N2's exception, counted): a claim that dies is claimed again, a
// commit that dies is retried on a new connection before its lease ends.
func TestPGKilledBetweenStatements(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := newPool(t, dsn, "admin")
	clean := deliverKilled(t, dsn, admin, 0)
	if !slices.Equal(clean.revs, []int64{1, 2, 3}) {
		t.Fatalf("without a kill: revisions %v, want [1 2 3]", clean.revs)
	}
	// Every statement up to the delivery's commit, and two claims after.
	n := slices.IndexFunc(clean.stmts, func(s string) bool { return strings.Contains(s, "SET delivered") })
	if n < 0 {
		t.Fatalf("no commit among the statements %q", clean.stmts)
	}
	n = min(n+1+6, len(clean.stmts))
	t.Logf("a delivery without a kill: statements %q", clean.stmts[:n])
	for k := 1; k <= n; k++ {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			r := deliverKilled(t, dsn, admin, k)
			if !slices.Equal(dedupe(r.revs), []int64{1, 2, 3}) {
				t.Fatalf("killed after %q: revisions %v, want 1, 2, 3 in order", r.killed, r.revs)
			}
			if len(r.revs) > 3 && r.lost == 0 {
				t.Fatalf("killed after %q: revisions %v posted again with no lease lost", r.killed, r.revs)
			}
			t.Logf("killed after %q: revisions %v, leases lost %v", r.killed, r.revs, r.lost)
		})
	}
}

// dedupe is revs without repeats, in order of first arrival.
func dedupe(revs []int64) []int64 {
	var out []int64
	for _, r := range revs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// TestPGReleaseKilled (SPEC N2): a Release whose connection is killed
// after its k-th statement (its BEGIN, its UPDATE, its COMMIT) either
// released the record or left its lease to expire: the record is claimed
// again, by one claimer, at the latest when the lease ends; never lost.
func TestPGReleaseKilled(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := newPool(t, dsn, "admin")
	ctx := context.Background()
	for k := 1; k <= 3; k++ {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			schema := pgtest.Schema(t, dsn)
			s, err := pgstore.New(ctx, newPool(t, dsn, "store"), pgstore.Options{Schema: schema, Log: true})
			if err != nil {
				t.Fatal(err)
			}
			newTask(t, s, "t1")
			kl := &killer{admin: admin, at: k}
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			cfg.ConnConfig.Tracer = kl
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			const lease = 10 * time.Second
			o, err := pushdelivery.NewPG(ctx, pool, pushdelivery.PGOptions{Schema: schema, Lease: lease, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}, NextAt: now}); err != nil {
				t.Fatal(err)
			}
			l, err := o.Claim(ctx, now, nil)
			if err != nil || l == nil {
				t.Fatalf("claim: %v, %v", l, err)
			}
			kl.armed.Store(true)
			l.Release(ctx)
			kl.armed.Store(false)
			kl.mu.Lock()
			killed, kerr := kl.mu.killed, kl.mu.err
			kl.mu.Unlock()
			if killed == "" || kerr != nil {
				t.Fatalf("no kill after statement %d of the release (%q): %v", k, kl.statements(), kerr)
			}
			claim := func(at time.Time) pushdelivery.Lease {
				for range 3 { // the first use of the killed connection may fail
					l, err := o.Claim(ctx, at, nil)
					if err == nil {
						return l
					}
				}
				t.Fatalf("claim at %v keeps failing", at)
				return nil
			}
			at := now
			again := claim(at)
			if again == nil {
				at = now.Add(lease + time.Second)
				if again = claim(at); again == nil {
					t.Fatalf("killed after %q: the record is not claimed again after its lease", killed)
				}
			}
			if l2 := claim(at); l2 != nil {
				t.Fatalf("killed after %q: claimed twice", killed)
			}
			t.Logf("killed after %q: claimed again %v after the release", killed, at.Sub(now))
		})
	}
}
