package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Error classes, as reported in OpStats.Errors and the metrics' outcome label.
const (
	ClassInvalidArgument = "invalid_argument"
	ClassNotFound        = "not_found"
	ClassNotCancelable   = "not_cancelable"
	ClassConflict        = "conflict"
	ClassAlreadyExists   = "already_exists"
	ClassInternal        = "internal"
	ClassTransport       = "transport" // anything else: connection, protocol, decoding
)

// ErrorClasses lists the classes in report order.
var ErrorClasses = []string{ClassInvalidArgument, ClassNotFound, ClassNotCancelable, ClassConflict, ClassAlreadyExists, ClassInternal, ClassTransport}

var errTransport = errors.New("transport")

// Classify maps an error from an embedded store or the a2a-go client to its
// class; nil is "".
func Classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, a2a.ErrInvalidParams), errors.Is(err, a2a.ErrInvalidRequest):
		return ClassInvalidArgument
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, a2a.ErrTaskNotFound):
		return ClassNotFound
	case errors.Is(err, engine.ErrNotCancelable), errors.Is(err, a2a.ErrTaskNotCancelable):
		return ClassNotCancelable
	case errors.Is(err, engine.ErrRevisionConflict):
		return ClassConflict
	case errors.Is(err, engine.ErrAlreadyExists):
		return ClassAlreadyExists
	case errors.Is(err, engine.ErrInternal), errors.Is(err, a2a.ErrInternalError):
		return ClassInternal
	}
	return ClassTransport
}

// Violation is one broken guarantee seen by a traversal.
type Violation struct {
	Seed      uint64 `json:"seed"`
	Kind      string `json:"kind"` // repeat, cursor-order, missing, list-error
	Traversal int64  `json:"traversal"`
	Page      int    `json:"page"`
	ContextID string `json:"context_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	Detail    string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("seed=%d traversal=%d page=%d context=%q %s task=%q: %s",
		v.Seed, v.Traversal, v.Page, v.ContextID, v.Kind, v.TaskID, v.Detail)
}

// ViolationKinds lists the kinds of Violation.
var ViolationKinds = []string{"repeat", "cursor-order", "missing"}

// taskState is what loadgen knows about one task it created. It holds no
// pointer (the context is an index into tracker.mu.contexts), so a
// million of them cost the collector nothing to scan: loadgen's own
// bookkeeping lives in the same heap as an embedded store it measures.
type taskState struct {
	context   uint32 // index into tracker.mu.contexts
	created   bool   // a create of this ID succeeded
	deleted   bool   // a delete succeeded
	inflight  int32  // writes begun and not finished
	lastBegin uint64 // seq of the latest write's start
	quietAt   uint64 // seq at which inflight last dropped to 0
}

// tracker is loadgen's model of the data set: which tasks exist and when
// they were last written, on one sequence of events. A traversal that starts
// at seq s may require a task exactly once when the task was created and
// quiet before s and no write to it began since.
type tracker struct {
	mu struct {
		sync.Mutex
		seq      uint64
		index    map[a2a.TaskID]uint32 // task → its position in ids and states
		ids      []a2a.TaskID          // every ID ever written
		states   []taskState
		created  []uint32 // positions of every ID ever created, for random choice
		contexts []string
		ctxIndex map[string]uint32
	}
}

func newTracker() *tracker {
	t := &tracker{}
	t.mu.index = map[a2a.TaskID]uint32{}
	t.mu.ctxIndex = map[string]uint32{}
	return t
}

// begin marks a write to id as started; it returns the state to end with.
func (t *tracker) begin(id a2a.TaskID, contextID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.seq++
	i, ok := t.mu.index[id]
	if !ok {
		c, ok := t.mu.ctxIndex[contextID]
		if !ok {
			c = uint32(len(t.mu.contexts))
			t.mu.contexts = append(t.mu.contexts, contextID)
			t.mu.ctxIndex[contextID] = c
		}
		i = uint32(len(t.mu.ids))
		t.mu.index[id] = i
		t.mu.ids = append(t.mu.ids, id)
		t.mu.states = append(t.mu.states, taskState{context: c})
	}
	st := &t.mu.states[i]
	st.inflight++
	st.lastBegin = t.mu.seq
}

// end marks a write to id as finished. created/deleted tell what it did.
func (t *tracker) end(id a2a.TaskID, created, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.seq++
	i, ok := t.mu.index[id]
	if !ok {
		panic("loadgen: tracker: end of a write to " + string(id) + " that never began")
	}
	st := &t.mu.states[i]
	st.inflight--
	if st.inflight == 0 {
		st.quietAt = t.mu.seq
	}
	if created && !st.created {
		st.created = true
		t.mu.created = append(t.mu.created, i)
	}
	if deleted {
		st.deleted = true
	}
}

// added registers a task created outside begin/end (a remote create, whose
// ID is known only when it returns): it is quiet from now on.
func (t *tracker) added(id a2a.TaskID, contextID string) {
	t.begin(id, contextID)
	t.end(id, true, false)
}

// pick returns the ID at position r (mod the number of IDs) and its
// context; ok is false when no task was created yet.
func (t *tracker) pick(r uint64) (a2a.TaskID, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.created) == 0 {
		return "", "", false
	}
	i := t.mu.created[r%uint64(len(t.mu.created))]
	return t.mu.ids[i], t.mu.contexts[t.mu.states[i].context], true
}

func (t *tracker) now() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.seq
}

func (t *tracker) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, st := range t.mu.states {
		if st.created && !st.deleted {
			n++
		}
	}
	return n
}

// untouchedChunk is how many tasks untouchedSince reads under one hold of
// the lock. At 1e7 tasks a scan under one hold kept every write's begin
// and end waiting for it (loadgen's tracker lock: 12.9 s of waiting in a
// 35 s read-heavy run), adding loadgen's own delay to the writes' latency.
var untouchedChunk = 1 << 16

// untouchedSince returns the tasks (of contextID, or all when "") that
// existed and were quiet at seq start and that no write has begun since.
// It is called once the traversal's last page has returned, and reads
// the tasks a chunk at a time: a write that begins meanwhile began after
// the traversal ended, so the task is still owed if otherwise untouched;
// seeing the write only leaves it out (a weaker check, never a false
// violation).
func (t *tracker) untouchedSince(start uint64, contextID string) []a2a.TaskID {
	var ids []a2a.TaskID
	for from := 0; ; from += untouchedChunk {
		var done bool
		if ids, done = t.untouchedFrom(ids, from, start, contextID); done {
			return ids
		}
	}
}

// untouchedFrom appends to ids the tasks of untouchedSince among positions
// [from, from+untouchedChunk); done reports that none lie past them.
func (t *tracker) untouchedFrom(ids []a2a.TaskID, from int, start uint64, contextID string) (_ []a2a.TaskID, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.mu.ctxIndex[contextID]
	if contextID != "" && !ok {
		return ids, true
	}
	end := min(from+untouchedChunk, len(t.mu.states))
	for i := from; i < end; i++ {
		st := &t.mu.states[i]
		if st.created && !st.deleted && st.inflight == 0 && st.lastBegin <= start && st.quietAt <= start &&
			(contextID == "" || st.context == c) {
			ids = append(ids, t.mu.ids[i])
		}
	}
	return ids, end == len(t.mu.states)
}

// traversal checks one live traversal page by page (L7).
type traversal struct {
	seed      uint64
	n         int64
	contextID string
	start     uint64
	pages     int
	seen      idPages       // page where each ID appeared
	last      engine.Cursor // last cursor seen (task or token boundary), when hasLast
	hasLast   bool
	compared  int // cursor comparisons made
	lastWhat  string
	out       []Violation
}

func newTraversal(seed uint64, n int64, contextID string, start uint64) *traversal {
	return &traversal{seed: seed, n: n, contextID: contextID, start: start, seen: newIDPages()}
}

func (tr *traversal) violate(kind string, id a2a.TaskID, format string, args ...any) {
	tr.out = append(tr.out, Violation{Seed: tr.seed, Kind: kind, Traversal: tr.n, Page: tr.pages,
		ContextID: tr.contextID, TaskID: string(id), Detail: fmt.Sprintf(format, args...)})
}

// cursor checks that c comes strictly after the previous cursor.
func (tr *traversal) cursor(c engine.Cursor, id a2a.TaskID, what string) {
	if tr.hasLast {
		tr.compared++
		if tr.last.Compare(c) >= 0 {
			tr.violate("cursor-order", id, "%s cursor (%d, %q) does not come after %s cursor (%d, %q)",
				what, c.UpdatedAt, c.ID, tr.lastWhat, tr.last.UpdatedAt, tr.last.ID)
		}
	}
	tr.last, tr.hasLast, tr.lastWhat = c, true, what
}

// page checks one page.
func (tr *traversal) page(p page) {
	tr.pages++
	for i, id := range p.ids {
		if prev, ok := tr.seen.get(id); ok {
			tr.violate("repeat", id, "task already returned on page %d", prev)
		} else {
			tr.seen.put(id, tr.pages)
		}
		if p.cursors != nil {
			tr.cursor(p.cursors[i], id, "task")
		}
	}
	if p.next != "" {
		// The boundary the server encoded; remote traversals have only this.
		c, err := engine.DecodeToken(p.next)
		if err == nil {
			if p.cursors != nil && len(p.ids) > 0 && c.Compare(p.cursors[len(p.cursors)-1]) != 0 {
				tr.violate("cursor-order", "", "next page token boundary (%d, %q) is not the last task's cursor", c.UpdatedAt, c.ID)
			}
			if p.cursors == nil {
				tr.cursor(c, "", "page boundary")
			} else {
				tr.last, tr.hasLast, tr.lastWhat = c, true, "page boundary"
			}
		}
	}
}

// finish checks exactly-once for the tasks untouched during the traversal.
func (tr *traversal) finish(t *tracker) {
	for _, id := range t.untouchedSince(tr.start, tr.contextID) {
		if _, ok := tr.seen.get(id); !ok {
			tr.violate("missing", id, "task existed and was not written during the traversal, but no page returned it")
		}
	}
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// ctxDone reports whether err is only the run's context ending.
func ctxDone(ctx context.Context, err error) bool {
	return ctx.Err() != nil && err != nil
}
