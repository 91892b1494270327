package load

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// pushReceiver serves a pushBook over HTTP on one address and can refuse
// connections for a while (Config.PushDown): down closes the listener and
// every open connection, up listens again on the same address.
type pushReceiver struct {
	book *pushBook
	addr string           // the bound address (a port 0 resolved), reused by up
	now  func() time.Time // the clock of the down windows
	wg   sync.WaitGroup   // Serve goroutines
	mu   struct {
		sync.Mutex
		srv       *http.Server // nil while down
		downSince time.Time
		windows   int
		downTotal time.Duration
	}
}

// listenPush starts a receiver of book on addr.
func listenPush(addr string, book *pushBook, now func() time.Time) (*pushReceiver, error) {
	p := &pushReceiver{book: book, addr: addr, now: now}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.serveLocked(); err != nil {
		return nil, err
	}
	return p, nil
}

// serveLocked listens on p.addr and serves the book there.
// REQUIRES: p.mu held.
func (p *pushReceiver) serveLocked() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("push receiver: %w", err)
	}
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: p.book, ReadHeaderTimeout: 10 * time.Second}
	p.wg.Go(func() { _ = srv.Serve(ln) })
	p.mu.srv = srv
	return nil
}

// URL is the webhook URL of the receiver.
func (p *pushReceiver) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.addr + "/"
}

// down closes the listener and every connection (requests in flight are
// cut) and opens a down window; no-op when down.
func (p *pushReceiver) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.srv == nil {
		return
	}
	_ = p.mu.srv.Close()
	p.mu.srv = nil
	p.mu.downSince = p.now()
	p.mu.windows++
}

// up listens again on the same address and closes the down window; no-op
// when up.
func (p *pushReceiver) up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.srv != nil {
		return nil
	}
	if err := p.serveLocked(); err != nil {
		return err
	}
	p.mu.downTotal += p.now().Sub(p.mu.downSince)
	return nil
}

// cycle is up for every-down, then down for down, until ctx ends; it
// returns up again (or the error of listening again).
func (p *pushReceiver) cycle(ctx context.Context, down, every time.Duration, after func(time.Duration) <-chan time.Time) error {
	for {
		select {
		case <-after(every - down):
		case <-ctx.Done():
			return nil
		}
		p.down()
		select {
		case <-after(down):
		case <-ctx.Done():
		}
		if err := p.up(); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// windows returns the down windows so far and their total length (an open
// window counted up to now).
func (p *pushReceiver) windows() (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := p.mu.downTotal
	if p.mu.srv == nil {
		total += p.now().Sub(p.mu.downSince)
	}
	return p.mu.windows, total
}

// close stops serving and waits for the Serve goroutines.
func (p *pushReceiver) close() {
	p.mu.Lock()
	if p.mu.srv != nil {
		_ = p.mu.srv.Close()
		p.mu.srv = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
}
