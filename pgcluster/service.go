package pgcluster

import (
	"context"
	"sync"
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
