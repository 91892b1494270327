package pgcluster

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// service is the start/stop lifecycle every background service of the
// package shares (river's internal/maintenance/startstop is the model):
// Start runs the service's loop on its own goroutine with a context that
// Stop cancels; Stop waits until the loop has returned. Both are safe to
// call more than once; a stopped service does not start again.
type service struct {
	startOnce, stopOnce sync.Once
	ctx                 context.Context
	cancel              context.CancelFunc
	done                chan struct{}
}

func (s *service) init() {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.done = make(chan struct{})
}

// start runs loop once.
func (s *service) start(loop func(ctx context.Context)) {
	s.startOnce.Do(func() {
		go func() {
			defer close(s.done)
			loop(s.ctx)
		}()
	})
}

// Stop cancels the loop and waits for it.
func (s *service) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		started := true
		s.startOnce.Do(func() { started = false })
		if started {
			<-s.done
		}
	})
}

// every is the loop of a periodic service: pass every interval until ctx
// ends, logging a failed pass (what names it) and going on.
func every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, pass func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			log.Warn("pgcluster: "+what+" failed", "error", err)
		}
	}
}
