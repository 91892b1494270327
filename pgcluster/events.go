package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/tasklog"
)

// eventManager is the eventqueue.Manager on the task log (K2, K7): a
// reader follows the log of its task (tasklog.Tail), woken by the store's
// watch, to which the listener relays the other instances' notifications.
// Every event an execution applies to the store is logged by that very
// write, so writers have nothing to add — but for the one event without a
// revision: a Message that answers a new task without ever storing it,
// which goes to a2a_cluster_events.
type eventManager struct {
	c *Cluster

	mu struct {
		sync.Mutex
		// pending are the readers created in a call that has not
		// written its work item yet, by call and task: a2a-go's
		// SendMessage creates its reader, then writes the item, with
		// the same context (startAt).
		pending map[pendingKey][]*reader
	}
}

// pendingKey names a reader's call: a2a-go's call context (one per call)
// and the task.
type pendingKey struct {
	call *a2asrv.CallContext
	task a2a.TaskID
}

var _ eventqueue.Manager = (*eventManager)(nil)

func newEventManager(c *Cluster) *eventManager {
	m := &eventManager{c: c}
	m.mu.pending = make(map[pendingKey][]*reader)
	return m
}

// startAt makes the readers created earlier in the call of ctx for task
// deliver only entries after revision rev: the revision the call's own
// execution starts from. A follow-up's reader is created while the
// previous execution of its task may still run; that execution's final
// entry, written before the follow-up's work item, is not the
// follow-up's answer (it would end the follow-up's stream on the
// previous turn's INPUT_REQUIRED). Readers of other calls (subscribers)
// are not touched.
func (m *eventManager) startAt(ctx context.Context, task a2a.TaskID, rev int64) {
	call, ok := a2asrv.CallContextFrom(ctx)
	if !ok {
		return
	}
	key := pendingKey{call, task}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.mu.pending[key] {
		r.floor.Store(rev)
		r.key = nil
	}
	delete(m.mu.pending, key)
}

// forget drops r from the pending readers.
func (m *eventManager) forget(r *reader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.key == nil {
		return
	}
	readers := slices.DeleteFunc(m.mu.pending[*r.key], func(x *reader) bool { return x == r })
	if len(readers) == 0 {
		delete(m.mu.pending, *r.key)
	} else {
		m.mu.pending[*r.key] = readers
	}
	r.key = nil
}

// CreateReader implements eventqueue.Manager: the reader returns every
// event of the task logged after this call, in revision order.
func (m *eventManager) CreateReader(ctx context.Context, taskID a2a.TaskID) (eventqueue.Reader, error) {
	var after int64
	switch rec, err := m.c.opts.Log.Get(ctx, taskID); {
	case err == nil:
		after = rec.Revision
	case !errors.Is(err, engine.ErrNotFound):
		return nil, fmt.Errorf("pgcluster: create reader: %w", err)
	}
	r := &reader{m: m, taskID: taskID, closed: make(chan struct{})}
	if err := m.c.pool.QueryRow(ctx, m.c.sql.lastSeq, string(taskID)).Scan(&r.seq); err != nil {
		return nil, fmt.Errorf("pgcluster: create reader: %w", err)
	}
	r.tail = tasklog.NewTail(m.c.opts.Log, taskID, after, m.c.opts.PollInterval)
	// Before the call writes its work item: a task its execution creates
	// and something deletes before the first read ends the reader (K7).
	if err := r.tail.Start(ctx); err != nil {
		r.tail.Close()
		return nil, fmt.Errorf("pgcluster: create reader: %w", err)
	}
	if call, ok := a2asrv.CallContextFrom(ctx); ok {
		key := pendingKey{call, taskID}
		m.mu.Lock()
		r.key = &key
		m.mu.pending[key] = append(m.mu.pending[key], r)
		m.mu.Unlock()
	}
	return r, nil
}

// CreateWriter implements eventqueue.Manager.
func (m *eventManager) CreateWriter(_ context.Context, taskID a2a.TaskID) (eventqueue.Writer, error) {
	return &writer{m: m, taskID: taskID}, nil
}

// Destroy implements eventqueue.Manager: the log stays for late readers
// (tasklog.Trimmer and the cleaner bound it).
func (m *eventManager) Destroy(context.Context, a2a.TaskID) error { return nil }

// writer is an eventqueue.Writer of one task.
type writer struct {
	m      *eventManager
	taskID a2a.TaskID
}

// Write implements eventqueue.Writer. An event with a version was logged
// by the store write that gave it that version, in the same transaction;
// one without (a task-less Message reply) is stored for the readers of
// other instances.
func (w *writer) Write(ctx context.Context, msg *eventqueue.Message) error {
	if msg.TaskVersion != taskstore.TaskVersionMissing {
		return nil
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: msg.Event})
	if err != nil {
		return fmt.Errorf("pgcluster: encode reply: %w", err)
	}
	return w.m.c.insertReply(ctx, w.taskID, string(msg.Protocol), body)
}

// insertReply stores a task-less reply of task (body, the event JSON) as
// its next seq, and notifies the task's readers.
func (c *Cluster) insertReply(ctx context.Context, task a2a.TaskID, protocol string, body []byte) error {
	for {
		tag, err := c.pool.Exec(ctx, c.sql.insertReply, string(task), protocol, body,
			channel(c.opts.Schema), notifyPayload('e', task))
		if err != nil {
			return fmt.Errorf("pgcluster: write reply: %w", err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		// A concurrent insert took the seq: take the next.
	}
}

// gaveUpProtocol marks, in the protocol column of a2a_cluster_events, the
// row giveUp writes for a task that was never stored: its readers end
// with ErrGaveUp and the reason in the row's body (gaveUpBody).
const gaveUpProtocol = "pgcluster:gave-up"

// gaveUpBody is the body of a gave-up row.
type gaveUpBody struct {
	Reason string `json:"reason"`
}

// ErrGaveUp is the error of a call waiting for a new task whose execution
// was given up before any task was stored (every attempt failed before
// the agent's first event, K4): the caller gets it, with the reason,
// instead of waiting for a task that will never exist — as a2a-go's
// local mode returns the agent's error. It is an a2a.ErrInternalError.
var ErrGaveUp = errors.New("pgcluster: execution given up")

// gaveUpError is ErrGaveUp with its reason.
type gaveUpError struct{ reason string }

func (e gaveUpError) Error() string   { return "execution given up: " + e.reason }
func (e gaveUpError) Unwrap() []error { return []error{ErrGaveUp, a2a.ErrInternalError} }

// Close implements eventqueue.Writer.
func (w *writer) Close() error { return nil }

// reader is an eventqueue.Reader of one task.
type reader struct {
	m      *eventManager
	taskID a2a.TaskID
	tail   *tasklog.Tail
	seq    int64 // the last reply row read
	closed chan struct{}
	once   sync.Once
	// floor is the revision the reader's own execution starts from
	// (startAt): entries up to it are skipped.
	floor atomic.Int64
	// key is the reader's entry in the manager's pending readers, until
	// startAt or Close (guarded by the manager's mu).
	key *pendingKey
}

// Read implements eventqueue.Reader: the next logged event, waiting for
// it. History revisions (a message added to the history) deliver nothing.
// An event's TaskVersion is its revision — but for an entry that leaves
// the task terminal or interrupted (input or auth required), delivered
// without version: a2a-go v2.3.1's remote subscription reads its snapshot
// after it wrote the work item and skips every event at or below the
// snapshot's version, so a final event logged before that snapshot would
// be skipped and the call would never end. Unversioned, it always ends
// the subscription.
func (r *reader) Read(ctx context.Context) (*eventqueue.Message, error) {
	c := r.m.c
	for {
		if err := r.open(); err != nil {
			return nil, err
		}
		l, ok, err := r.tail.TryNext(ctx)
		if err != nil {
			return nil, readError(err)
		}
		if ok {
			if l.Kind == engine.LogMessage || l.Revision <= r.floor.Load() {
				continue
			}
			return r.deliver(l)
		}
		if !r.tail.Seen() { // a task-less reply comes only for a task never stored
			if msg, err := r.reply(ctx); msg != nil || err != nil {
				return msg, err
			}
		}
		// Asked before every wait, the first included: a deletion between
		// CreateReader's read and its watch sends no wake-up.
		if gone, err := r.tail.Gone(ctx); gone || err != nil {
			return nil, readError(cmpErr(err, tasklog.ErrGone))
		}
		if c.onIdle != nil {
			c.onIdle(r.taskID)
		}
		timer := time.NewTimer(c.opts.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-r.closed:
		case <-c.closed:
		case <-r.tail.Woken():
		case <-timer.C:
		}
		timer.Stop()
	}
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// open fails with eventqueue.ErrQueueClosed after Close (of the reader or
// the cluster).
func (r *reader) open() error {
	select {
	case <-r.closed:
		return eventqueue.ErrQueueClosed
	case <-r.m.c.closed:
		return eventqueue.ErrQueueClosed
	default:
		return nil
	}
}

// readError turns a vanished task into a2a's not found.
func readError(err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("pgcluster: read events: %w", a2a.ErrTaskNotFound)
	}
	return fmt.Errorf("pgcluster: read events: %w", err)
}

// deliver turns entry l into the reader's next message.
func (r *reader) deliver(l engine.LogEntry) (*eventqueue.Message, error) {
	ev, err := l.Event(r.taskID)
	if err != nil {
		return nil, err
	}
	c := r.m.c
	c.stats.Events.Add(1)
	if observe := c.opts.ObserveDelivery; observe != nil {
		observe(time.Since(time.UnixMicro(l.Time)))
	}
	v := taskstore.TaskVersion(l.Revision)
	if engine.Final(l.State) {
		v = taskstore.TaskVersionMissing
	}
	return &eventqueue.Message{Event: ev, TaskVersion: v}, nil
}

// reply returns the next task-less reply stored for the task, if any.
func (r *reader) reply(ctx context.Context) (*eventqueue.Message, error) {
	var (
		seq      int64
		protocol string
		body     []byte
		at       time.Time
	)
	err := r.m.c.pool.QueryRow(ctx, r.m.c.sql.readReply, string(r.taskID), r.seq).Scan(&seq, &protocol, &body, &at)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("pgcluster: read reply: %w", err)
	}
	r.seq = seq
	if protocol == gaveUpProtocol {
		var g gaveUpBody
		_ = json.Unmarshal(body, &g)
		return nil, gaveUpError{g.Reason}
	}
	var sr a2a.StreamResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		return nil, fmt.Errorf("pgcluster: decode reply %d of task: %w", seq, err)
	}
	c := r.m.c
	c.stats.Events.Add(1)
	if observe := c.opts.ObserveDelivery; observe != nil {
		observe(time.Since(at))
	}
	return &eventqueue.Message{Event: sr.Event, Protocol: a2a.ProtocolVersion(protocol)}, nil
}

// Close implements eventqueue.Reader.
func (r *reader) Close() error {
	r.once.Do(func() {
		close(r.closed)
		r.tail.Close()
		r.m.forget(r)
	})
	return nil
}
