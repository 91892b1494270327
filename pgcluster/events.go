package pgcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// eventManager is the eventqueue.Manager: writers insert rows, readers
// read them in seq order, woken by the listener.
type eventManager struct {
	c  *Cluster
	mu struct {
		sync.Mutex
		readers map[a2a.TaskID]map[*reader]struct{}
	}
}

var _ eventqueue.Manager = (*eventManager)(nil)

func newEventManager(c *Cluster) *eventManager {
	m := &eventManager{c: c}
	m.mu.readers = make(map[a2a.TaskID]map[*reader]struct{})
	return m
}

// CreateReader implements eventqueue.Manager: the reader returns every
// event of the task written after this call, in order.
func (m *eventManager) CreateReader(ctx context.Context, taskID a2a.TaskID) (eventqueue.Reader, error) {
	r := &reader{m: m, taskID: taskID, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	// Registered before the cursor is read: a notification about an
	// event after the cursor cannot be missed.
	m.mu.Lock()
	set := m.mu.readers[taskID]
	if set == nil {
		set = make(map[*reader]struct{})
		m.mu.readers[taskID] = set
	}
	set[r] = struct{}{}
	m.mu.Unlock()
	if err := m.c.pool.QueryRow(ctx, m.c.sql.lastSeq, string(taskID)).Scan(&r.cursor); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("pgcluster: create reader: %w", err)
	}
	return r, nil
}

// CreateWriter implements eventqueue.Manager.
func (m *eventManager) CreateWriter(_ context.Context, taskID a2a.TaskID) (eventqueue.Writer, error) {
	return &writer{m: m, taskID: taskID}, nil
}

// Destroy implements eventqueue.Manager. Events stay for late readers; the
// cleaner drops them after the retention window.
func (m *eventManager) Destroy(context.Context, a2a.TaskID) error { return nil }

// wakeTask wakes the readers of taskID; "" wakes every reader.
func (m *eventManager) wakeTask(taskID a2a.TaskID, all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if all {
		for _, set := range m.mu.readers {
			for r := range set {
				r.notify()
			}
		}
		return
	}
	for r := range m.mu.readers[taskID] {
		r.notify()
	}
}

func (m *eventManager) remove(r *reader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.mu.readers[r.taskID]
	delete(set, r)
	if len(set) == 0 {
		delete(m.mu.readers, r.taskID)
	}
}

// ended reports whether ev ends its task for good (the cleaner's
// criterion): a terminal state, or a message (a task-less answer).
func ended(ev a2a.Event) bool {
	switch v := ev.(type) {
	case *a2a.Message:
		return true
	case *a2a.Task:
		return v.Status.State.Terminal()
	case *a2a.TaskStatusUpdateEvent:
		return v.Status.State.Terminal()
	}
	return false
}

// write appends ev to the task's events and notifies the listeners.
func (m *eventManager) write(ctx context.Context, taskID a2a.TaskID, ev a2a.Event, version taskstore.TaskVersion, protocol a2a.ProtocolVersion) error {
	body, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return fmt.Errorf("pgcluster: encode event: %w", err)
	}
	for {
		rows, err := m.c.pool.Query(ctx, m.c.sql.insertEvent, string(taskID), int64(version), string(protocol), ended(ev), body,
			channel(m.c.opts.Schema), notifyPayload('e', taskID))
		if err != nil {
			return fmt.Errorf("pgcluster: write event: %w", err)
		}
		inserted := rows.Next()
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgcluster: write event: %w", err)
		}
		if inserted {
			return nil
		}
		// A concurrent writer of the task took the seq: take the next.
	}
}

// writer is an eventqueue.Writer of one task.
type writer struct {
	m      *eventManager
	taskID a2a.TaskID
}

// Write implements eventqueue.Writer.
func (w *writer) Write(ctx context.Context, msg *eventqueue.Message) error {
	return w.m.write(ctx, w.taskID, msg.Event, msg.TaskVersion, msg.Protocol)
}

// Close implements eventqueue.Writer.
func (w *writer) Close() error { return nil }

// stored is an event read from the table and when it was inserted.
type stored struct {
	msg *eventqueue.Message
	at  time.Time
}

// reader is an eventqueue.Reader of one task.
type reader struct {
	m       *eventManager
	taskID  a2a.TaskID
	cursor  int64                 // last seq read
	version taskstore.TaskVersion // last version delivered
	buf     []stored
	wake    chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (r *reader) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Read implements eventqueue.Reader: the next event after the last one,
// waiting for it. Events are delivered in version order, not insert order:
// the store revision and the event insert are separate steps, so two
// writers of a task may insert their events in the reverse order of their
// revisions. An event whose version is ahead of the last delivered plus
// one is held, up to Options.GapTimeout, for the missing one; an event
// whose version is not above the last delivered one (a losing writer's
// duplicate, or one that came after its gap was given up) is skipped, so
// versions strictly increase per reader (K2).
func (r *reader) Read(ctx context.Context) (*eventqueue.Message, error) {
	var poll, gap *time.Timer
	defer func() {
		for _, t := range []*time.Timer{poll, gap} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	gapDue := false
	for {
		if s, ok, held := r.next(gapDue); ok {
			r.m.c.stats.Events.Add(1)
			if observe := r.m.c.opts.ObserveDelivery; observe != nil {
				observe(time.Since(s.at))
			}
			return s.msg, nil
		} else if held && gap == nil {
			r.m.c.stats.GapWaits.Add(1)
			gap = time.NewTimer(r.m.c.opts.GapTimeout)
			if r.m.c.onHold != nil {
				r.m.c.onHold(r.taskID)
			}
		}
		select {
		case <-r.closed:
			return nil, eventqueue.ErrQueueClosed
		case <-r.m.c.closed:
			return nil, eventqueue.ErrQueueClosed
		default:
		}
		n, err := r.fetch(ctx)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			continue
		}
		if poll == nil {
			poll = time.NewTimer(r.m.c.opts.PollInterval)
		} else {
			poll.Reset(r.m.c.opts.PollInterval)
		}
		var gapC <-chan time.Time
		if gap != nil {
			gapC = gap.C
		}
		if r.m.c.onIdle != nil {
			r.m.c.onIdle(r.taskID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.closed:
			return nil, eventqueue.ErrQueueClosed
		case <-r.m.c.closed:
			return nil, eventqueue.ErrQueueClosed
		case <-r.wake:
		case <-poll.C:
		case <-gapC:
			gapDue = true
		}
	}
}

// next takes the next event to deliver from buf: an unversioned event at
// the front as it comes, otherwise the lowest version above the last
// delivered one when it is the last plus one (or nothing was delivered
// yet, or force). held reports a lowest version further ahead, not taken.
func (r *reader) next(force bool) (s stored, ok, held bool) {
	keep := r.buf[:0]
	for _, s := range r.buf {
		if v := s.msg.TaskVersion; v == taskstore.TaskVersionMissing || v > r.version {
			keep = append(keep, s)
		}
	}
	clear(r.buf[len(keep):])
	r.buf = keep
	if len(r.buf) == 0 {
		return stored{}, false, false
	}
	i := 0
	if r.buf[0].msg.TaskVersion != taskstore.TaskVersionMissing {
		for j, s := range r.buf {
			if v := s.msg.TaskVersion; v != taskstore.TaskVersionMissing && v < r.buf[i].msg.TaskVersion {
				i = j
			}
		}
		v := r.buf[i].msg.TaskVersion
		if r.version != taskstore.TaskVersionMissing && v != r.version+1 {
			if !force {
				return stored{}, false, true
			}
			r.m.c.stats.GapsSkipped.Add(1)
			r.m.c.opts.Logger.Warn("pgcluster: event versions missing; delivering the next one",
				"task", r.taskID, "after", int64(r.version), "next", int64(v))
		}
		r.version = v
	}
	s = r.buf[i]
	r.buf = append(r.buf[:i], r.buf[i+1:]...)
	return s, true, false
}

// fetch reads the next rows after the cursor into buf.
func (r *reader) fetch(ctx context.Context) (int, error) {
	rows, err := r.m.c.pool.Query(ctx, r.m.c.sql.readEvents, string(r.taskID), r.cursor)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: read events: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			seq, version int64
			protocol     string
			body         []byte
			at           time.Time
		)
		if err := rows.Scan(&seq, &version, &protocol, &body, &at); err != nil {
			return n, fmt.Errorf("pgcluster: read events: %w", err)
		}
		r.cursor = seq
		var sr a2a.StreamResponse
		if err := json.Unmarshal(body, &sr); err != nil {
			return n, fmt.Errorf("pgcluster: decode event %d of task: %w", seq, err)
		}
		r.buf = append(r.buf, stored{
			msg: &eventqueue.Message{Event: sr.Event, TaskVersion: taskstore.TaskVersion(version), Protocol: a2a.ProtocolVersion(protocol)},
			at:  at,
		})
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("pgcluster: read events: %w", err)
	}
	return n, nil
}

// Close implements eventqueue.Reader.
func (r *reader) Close() error {
	r.once.Do(func() {
		close(r.closed)
		r.m.remove(r)
	})
	return nil
}
