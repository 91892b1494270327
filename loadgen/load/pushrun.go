package load

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
)

// pushConfigID is the ID of the push configuration every task gets.
const pushConfigID = "loadgen"

// pushRun is a run's push workload (Config.PushURL) and receiver
// (Config.PushReceiver).
type pushRun struct {
	url    string
	config a2a.PushConfig // what each SendMessage carries
	book   *pushBook      // nil without a receiver
	recv   *pushReceiver
	stop   context.CancelFunc // ends the down cycle
	cycle  sync.WaitGroup
	errs   io.Writer // the cycle's error, if any (Config.Progress)
}

// startPush starts the receiver, counting its deliveries in counter, and
// its down cycle; nil when the run has no push workload.
func startPush(cfg *Config, seed uint64, counter *prometheus.CounterVec) (*pushRun, error) {
	if cfg.PushReceiver == "" && cfg.PushURL == "" {
		return nil, nil
	}
	p := &pushRun{url: cfg.PushURL, errs: cfg.Progress}
	if cfg.PushReceiver != "" {
		p.book = newPushBook(fmt.Sprintf("loadgen-%d", seed), counter)
		recv, err := listenPush(cfg.PushReceiver, p.book, time.Now)
		if err != nil {
			return nil, err
		}
		p.recv = recv
		if p.url == "" {
			p.url = recv.URL()
		}
	}
	p.config = a2a.PushConfig{ID: pushConfigID, URL: p.url}
	if p.book != nil {
		p.config.Token = p.book.token
	}
	p.startCycle(cfg.PushDown, cfg.PushEvery)
	return p, nil
}

// startCycle runs the receiver's down windows, if any.
func (p *pushRun) startCycle(down, every time.Duration) {
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	if p.recv == nil || down <= 0 {
		return
	}
	p.cycle.Go(func() {
		err := p.recv.cycle(ctx, down, every, time.After)
		if err != nil && p.errs != nil {
			fmt.Fprintln(p.errs, "\nloadgen:", err)
		}
	})
}

// sendConfig is the SendMessage configuration of a new task; nil without
// a push workload.
func (p *pushRun) sendConfig() *a2a.SendMessageConfig {
	if p == nil {
		return nil
	}
	c := p.config
	return &a2a.SendMessageConfig{PushConfig: &c}
}

// saw records a task state loadgen read from the server.
func (p *pushRun) saw(t *a2a.Task) {
	if p != nil && p.book != nil && t != nil {
		p.book.sawState(t.ID, t.Status.State)
	}
}

// finish ends the down cycle, listens again, waits up to grace for the
// terminal events still owed and returns what the receiver saw.
func (p *pushRun) finish(ctx context.Context, grace time.Duration) *PushStats {
	p.stop()
	p.cycle.Wait()
	if p.recv == nil {
		return &PushStats{URL: p.url}
	}
	if err := p.recv.up(); err != nil && p.errs != nil {
		fmt.Fprintln(p.errs, "loadgen:", err)
	}
	p.book.await(ctx, grace, time.After)
	s := p.book.stats()
	s.URL, s.Receiver, s.GraceSec = p.url, p.recv.URL(), max(grace, 0).Seconds()
	n, down := p.recv.windows()
	s.DownWindows, s.DownSec = n, down.Seconds()
	return &s
}

// close stops the receiver.
func (p *pushRun) close() {
	if p == nil {
		return
	}
	p.stop()
	p.cycle.Wait()
	if p.recv != nil {
		p.recv.close()
	}
}

// deliveries is the count for the progress line.
func (p *pushRun) deliveries() int64 {
	if p == nil || p.book == nil {
		return 0
	}
	p.book.mu.Lock()
	defer p.book.mu.Unlock()
	return p.book.mu.stats.Deliveries
}

// isLoopback reports whether addr's host is a loopback address or
// "localhost".
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
