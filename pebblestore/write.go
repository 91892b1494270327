package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

// current is a task's stored state, read under its write lock.
type current struct {
	rec  record
	id   a2a.TaskID
	body []byte // taskcodec.EncodeTask (binary); nil unless asked for
}

func (c *current) cursor() engine.Cursor {
	return engine.Cursor{UpdatedAt: c.rec.updatedAt, ID: c.id}
}

// load reads a task's record (and body, if withBody). It returns
// ErrNotFound when the task does not exist. REQUIRES: the task's write lock
// held, or a caller that tolerates a racing write.
func (s *Store) load(id a2a.TaskID, withBody bool) (*current, error) {
	v, closer, err := s.db.Get(recordKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("pebblestore: task %q: %w", id, engine.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: read task: %v: %w", err, engine.ErrInternal)
	}
	rec, err := decodeRecord(append([]byte(nil), v...))
	closer.Close()
	if err != nil {
		return nil, err
	}
	c := &current{rec: rec, id: id}
	if withBody {
		v, closer, err := s.db.Get(bodyKey(c.cursor()))
		if err != nil {
			return nil, fmt.Errorf("pebblestore: read task body: %v: %w", err, engine.ErrInternal)
		}
		c.body = append([]byte(nil), v...)
		closer.Close()
	}
	return c, nil
}

// decodeBody decodes a stored body into a fresh task. The body holds the
// task's ID and context ID too; they are set from the key and the record,
// which lists order and filter by, so a task always reads back under them.
func decodeBody(body []byte, id a2a.TaskID, contextID string) (*a2a.Task, error) {
	t, err := taskcodec.DecodeTask(body)
	if err != nil {
		return nil, err
	}
	t.ID, t.ContextID = id, contextID
	return t, nil
}

// put writes task as the new state of its ID at time now, in one batch with
// everything old (if not nil) leaves behind and the revision's log entry l
// (nil without the log), and returns the stored record, with a copy of
// the task if withTask (else Task nil: engine.WithoutTask). The owner is
// old's, or for a new task owner.
// REQUIRES: the task's write lock held.
func (s *Store) put(old *current, task *a2a.Task, owner string, now int64, l *engine.LogEntry, withTask bool) (engine.Record, error) {
	b := s.db.NewBatch()
	defer b.Close()
	var counters counterDeltas
	rec, body, err := stage(b, &counters, old, task, owner, now)
	if err != nil {
		return engine.Record{}, err
	}
	s.stageLog(b, task.ID, rec, l)
	if err := s.commitCounted(b, &counters); err != nil {
		return engine.Record{}, fmt.Errorf("pebblestore: %w", err)
	}
	s.untrim(rec.Cursor)
	s.wake(task.ID)
	if !withTask {
		return rec, nil
	}
	if rec.Task, err = decodeBody(body, task.ID, task.ContextID); err != nil {
		return engine.Record{}, err
	}
	return rec, nil
}

// stage adds to b what put writes: the record, index and body keys of task
// at time now, the deletion of what old (if not nil) leaves behind, and the
// counter deltas (into counters). It returns the record without its task,
// and the body.
func stage(b *pebble.Batch, counters *counterDeltas, old *current, task *a2a.Task, owner string, now int64) (engine.Record, []byte, error) {
	rev := int64(1)
	if old != nil {
		var err error
		if rev, err = engine.NextRevision(old.rec.revision); err != nil { // S7
			return engine.Record{}, nil, err
		}
		owner = old.rec.light.owner // O2
	}
	body, err := taskcodec.EncodeTask(task)
	if err != nil {
		return engine.Record{}, nil, err
	}
	l, err := lightOf(task, owner)
	if err != nil {
		return engine.Record{}, nil, err
	}
	rec := record{revision: rev, updatedAt: now, light: l}
	cur := engine.Cursor{UpdatedAt: now, ID: task.ID}
	lv := l.append(nil)
	if old != nil {
		deleteTaskKeys(b, old)
	}
	_ = b.Set(recordKey(task.ID), rec.append(nil), nil)
	for _, k := range indexKeys(owner, l.contextID, l.state, cur) {
		_ = b.Set(k, lv, nil)
	}
	_ = b.Set(bodyKey(cur), body, nil)
	switch {
	case old == nil:
		counters.task(&l, +1)
	case old.rec.light.contextID != l.contextID || old.rec.light.state != l.state:
		counters.move(&old.rec.light, &l)
	}
	return engine.Record{Revision: rev, Cursor: cur, Owner: owner}, body, nil
}

// deleteTaskKeys deletes old's index and body keys in b.
func deleteTaskKeys(b *pebble.Batch, old *current) {
	oc := old.cursor()
	for _, k := range indexKeys(old.rec.light.owner, old.rec.light.contextID, old.rec.light.state, oc) {
		_ = b.Delete(k, nil)
	}
	_ = b.Delete(bodyKey(oc), nil)
}

// Create implements engine.Store: CreateOwned with no owner (O1).
func (s *Store) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	return s.CreateOwned(ctx, task, "")
}

// CreateOwned implements engine.OwnerStore: it stores a new task of owner
// (any bytes, at most engine.MaxOwnerBytes; "" = none).
func (s *Store) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	if err := s.limits.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateOwner(owner); err != nil {
		return engine.Record{}, err
	}
	l, err := s.newLogEntry(ctx, task, nil)
	if err != nil {
		return engine.Record{}, err
	}
	return s.locked("create", task.ID, func() (engine.Record, error) {
		if _, err := s.load(task.ID, false); err == nil {
			return engine.Record{}, fmt.Errorf("pebblestore: create %q: %w", task.ID, engine.ErrAlreadyExists)
		} else if !errors.Is(err, engine.ErrNotFound) {
			return engine.Record{}, err
		}
		return s.put(nil, task, owner, engine.CreateTime(s.clock()), l, engine.TaskWanted(ctx))
	})
}

// Replace implements engine.Store.
func (s *Store) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	if err := s.limits.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	l, err := s.newLogEntry(ctx, task, engine.EventFrom(ctx))
	if err != nil {
		return engine.Record{}, err
	}
	return s.mutate("replace", task.ID, false, func(old *current) (engine.Record, error) {
		if expectedRevision != 0 && expectedRevision != old.rec.revision {
			return engine.Record{}, fmt.Errorf("pebblestore: replace %q: revision %d, expected %d: %w",
				task.ID, old.rec.revision, expectedRevision, engine.ErrRevisionConflict)
		}
		now, err := engine.NextTime(old.rec.updatedAt, s.clock())
		if err != nil {
			return engine.Record{}, err
		}
		return s.put(old, task, "", now, l, engine.TaskWanted(ctx))
	})
}

// locked runs f under task id's write lock, inside the store's lifecycle
// and failure containment: the common frame of every write.
func (s *Store) locked(op string, id a2a.TaskID, f func() (engine.Record, error)) (rec engine.Record, err error) {
	exit, err := s.enter(op)
	if err != nil {
		return engine.Record{}, err
	}
	defer exit()
	defer s.catch(op, &err)
	mu := s.lockFor([]byte(id))
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// mutate runs f on the current state of existing task id (ErrNotFound
// otherwise) in the write frame: every read-modify-write.
func (s *Store) mutate(op string, id a2a.TaskID, withBody bool, f func(old *current) (engine.Record, error)) (engine.Record, error) {
	return s.locked(op, id, func() (engine.Record, error) {
		old, err := s.load(id, withBody)
		if err != nil {
			return engine.Record{}, err
		}
		return f(old)
	})
}

// Cancel implements engine.Store.
func (s *Store) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return s.CancelIf(ctx, id, 0)
}

// CancelIf implements engine.ConditionalStore.
func (s *Store) CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateID(id); err != nil {
		return engine.Record{}, err
	}
	return s.mutateIf("cancel", id, expectedRevision, true, func(old *current) (engine.Record, error) {
		if old.rec.light.state.Terminal() {
			return engine.Record{}, fmt.Errorf("pebblestore: cancel %q in state %s: %w", id, old.rec.light.state, engine.ErrNotCancelable)
		}
		now, err := engine.NextTime(old.rec.updatedAt, s.clock())
		if err != nil {
			return engine.Record{}, err
		}
		t, err := decodeBody(old.body, id, old.rec.light.contextID)
		if err != nil {
			return engine.Record{}, err
		}
		ts := time.UnixMicro(now).UTC()
		t.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}
		var l *engine.LogEntry
		if s.log {
			c := engine.CanceledEntry(t.ContextID)
			c.Trace = engine.TraceParent(ctx)
			l = &c
		}
		return s.put(old, t, "", now, l, true)
	})
}

// AppendHistory implements engine.Store.
func (s *Store) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	return s.AppendHistoryIf(ctx, id, msg, 0)
}

// AppendHistoryIf implements engine.ConditionalStore.
func (s *Store) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateID(id); err != nil {
		return engine.Record{}, err
	}
	if err := s.limits.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	return s.mutateIf("append history", id, expectedRevision, true, func(old *current) (engine.Record, error) {
		t, err := decodeBody(old.body, id, old.rec.light.contextID)
		if err != nil {
			return engine.Record{}, err
		}
		for _, m := range t.History {
			if m != nil && m.ID == msg.ID {
				return engine.Record{Task: t, Revision: old.rec.revision, Cursor: old.cursor(), Owner: old.rec.light.owner}, nil // S3
			}
		}
		now, err := engine.NextTime(old.rec.updatedAt, s.clock())
		if err != nil {
			return engine.Record{}, err
		}
		t.History = append(t.History, msg) // encoded, never retained
		if err := s.limits.CheckTask(t); err != nil {
			return engine.Record{}, err
		}
		var l *engine.LogEntry
		if s.log {
			m, err := engine.MessageEntry(msg, t.Status.State)
			if err != nil {
				return engine.Record{}, err
			}
			m.Trace = engine.TraceParent(ctx)
			l = &m
		}
		return s.put(old, t, "", now, l, true)
	})
}

// Delete implements engine.Store.
func (s *Store) Delete(ctx context.Context, id a2a.TaskID) error {
	return s.DeleteIf(ctx, id, 0)
}

// DeleteIf implements engine.ConditionalStore.
func (s *Store) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	if err := engine.ValidateID(id); err != nil {
		return err
	}
	_, err := s.mutateIf("delete", id, expectedRevision, false, func(old *current) (engine.Record, error) {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Delete(recordKey(id), nil)
		deleteTaskKeys(b, old)
		s.deleteLog(b, id)
		if err := s.markDeleted(b, id, old.rec.updatedAt); err != nil {
			return engine.Record{}, err
		}
		if err := s.commitCounted(b, counterChanges([]*light{&old.rec.light}, nil)); err != nil {
			return engine.Record{}, fmt.Errorf("pebblestore: delete: %w", err)
		}
		s.wake(id) // its readers end
		return engine.Record{}, nil
	})
	return err
}
