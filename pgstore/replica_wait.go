package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Waiting for a standby to replay. PostgreSQL cannot wake a session when
// a standby's replay reaches a position (no LISTEN on a standby, no WAIT
// FOR LSN before PostgreSQL 19), so this polls — but once per standby,
// not once per waiting read: while any read waits for a standby, one
// goroutine asks it for its replay position every replayPoll and wakes
// the waiters; it stops when none is left. Polling per read made the
// polls themselves take the CPU the standby needed to replay, on a loaded
// machine (results/raw/standby-cost-*). The position it reports is a
// hint: a read still runs behind its gate.

// replayPoll is the poller's cadence while reads wait.
const replayPoll = time.Millisecond

// replayWatch is one standby's shared wait for replay.
type replayWatch struct {
	replay atomic.Int64 // the last replay position seen
	mu     struct {
		sync.Mutex
		waiters int
		polling bool
		changed chan struct{} // closed when replay is updated
	}
}

// waitReplay waits until sb has replayed up to lsn (true), or deadline or
// ctx ends (false).
func (r *replicas) waitReplay(ctx context.Context, sb *standby, lsn int64, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w := &sb.watch
	ch := w.join(sb.pool)
	defer w.leave()
	for w.replay.Load() < lsn {
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
		ch = w.current()
	}
	return true
}

// join registers a waiter, starting the poller if none runs, and returns
// the channel closed at the next update.
func (w *replayWatch) join(pool *pgxpool.Pool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.waiters++
	if w.mu.changed == nil {
		w.mu.changed = make(chan struct{})
	}
	if !w.mu.polling {
		w.mu.polling = true
		go w.poll(pool)
	}
	return w.mu.changed
}

func (w *replayWatch) leave() {
	w.mu.Lock()
	w.mu.waiters--
	w.mu.Unlock()
}

// current is the channel closed at the next update.
func (w *replayWatch) current() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.changed
}

// poll asks the standby for its replay position every replayPoll while
// anyone waits, publishing each answer.
func (w *replayWatch) poll(pool *pgxpool.Pool) {
	t := time.NewTicker(replayPoll)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var replay int64
		err := pool.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() - '0/0', 0)::bigint`).Scan(&replay)
		cancel()
		w.mu.Lock()
		if err == nil {
			w.replay.Store(replay)
			close(w.mu.changed)
			w.mu.changed = make(chan struct{})
		}
		if w.mu.waiters == 0 {
			w.mu.polling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		<-t.C
	}
}
