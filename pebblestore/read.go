package pebblestore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// Get implements engine.Store. The record and its body are read from one
// iterator view, so a concurrent mutation cannot split them.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (rec engine.Record, err error) {
	if err := engine.ValidateID(id); err != nil {
		return engine.Record{}, err
	}
	exit, err := s.enter("get")
	if err != nil {
		return engine.Record{}, err
	}
	defer exit()
	defer s.catch("get", &err)
	it, err := s.db.NewIter(nil)
	if err != nil {
		return engine.Record{}, fmt.Errorf("pebblestore: get: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	rk := recordKey(id)
	if !it.SeekPrefixGE(rk) || !bytes.Equal(it.Key(), rk) {
		if err := it.Error(); err != nil {
			return engine.Record{}, fmt.Errorf("pebblestore: get: %v: %w", err, engine.ErrInternal)
		}
		return engine.Record{}, fmt.Errorf("pebblestore: task %q: %w", id, engine.ErrNotFound)
	}
	r, err := decodeRecord(it.Value())
	if err != nil {
		return engine.Record{}, err
	}
	contextID := r.light.contextID // copied by decodeLight's string conversion
	cur := engine.Cursor{UpdatedAt: r.updatedAt, ID: id}
	bk := bodyKey(cur)
	if !it.SeekPrefixGE(bk) || !bytes.Equal(it.Key(), bk) {
		if err := it.Error(); err != nil {
			return engine.Record{}, fmt.Errorf("pebblestore: get: %v: %w", err, engine.ErrInternal)
		}
		return engine.Record{}, fmt.Errorf("pebblestore: task %q has no body: %w", id, engine.ErrInternal)
	}
	t, err := decodeBody(it.Value(), id, contextID)
	if err != nil {
		return engine.Record{}, err
	}
	return engine.Record{Task: t, Revision: r.revision, Cursor: cur, Owner: r.light.owner}, nil
}

// List implements engine.Store.
//
// The page and the total come from one iterator (L8). The page seeks once
// to just after the boundary in the one index that holds only candidates —
// the (owner, context) index, the context's, the (owner, state) index, the
// owner's, the state's or the global one — and steps until it has
// PageSize+1 matching entries (C2, O6, C7): PageSize+1 steps when no other
// filter applies. A status filter with a context, and StatusTimestampAfter
// filters, skip non-matching entries: with a context, at most the
// context's entries. Light pages decode
// the index values only; full pages read bodies with a clone of the iterator
// that moves forward through the body keyspace, which is in the same order.
// Owners (TaskOwners) come from the index values. Totals without
// StatusTimestampAfter read one maintained counter; with it, they scan the
// index.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (resp *engine.ListResponse, err error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	exit, err := s.enter("list")
	if err != nil {
		return nil, err
	}
	defer exit()
	defer s.catch("list", &err)

	prefix, lower := listBounds(&q)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: desckey.PrefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	p := newPageReader(q, len(prefix))
	if q.Projection == engine.ProjectionFull {
		if p.bodies, err = newBodyReader(it, prefix[0] == tagGlobal, &q); err != nil {
			return nil, err
		}
		defer p.bodies.close()
	}
	if resp, err = p.read(it); err != nil {
		return nil, err
	}
	if q.IncludeTotalSize {
		total, counted, err := s.total(it, &q, prefix)
		if err != nil {
			return nil, err
		}
		resp.TotalSize = total
		resp.Stats.Counted, resp.Stats.TotalComputed = counted, true
	}
	return resp, nil
}

// listBounds returns the index a query reads (its key prefix: the
// (owner, context) index, the context's, the (owner, state) index, the
// owner's, the state's or the global one: C7)
// and the first key of its page: the prefix, or the key just after the
// boundary.
func listBounds(q *engine.Query) (prefix, lower []byte) {
	status := q.Status != a2a.TaskStateUnspecified
	switch {
	case q.Owner != "" && q.ContextID != "":
		prefix = ownerContextPrefix(q.Owner, q.ContextID)
	case q.ContextID != "":
		prefix = contextPrefix(q.ContextID)
	case q.Owner != "" && status:
		prefix = ownerStatePrefix(q.Owner, q.Status)
	case q.Owner != "":
		prefix = ownerPrefix(q.Owner)
	case status:
		prefix = statePrefix(q.Status)
	default:
		prefix = []byte{tagGlobal}
	}
	if q.After == nil {
		return prefix, prefix
	}
	// Cursor keys are prefix-free, so key‖0x00 is the first key strictly
	// after the boundary.
	return prefix, append(desckey.AppendCursor(bytes.Clone(prefix), q.After.UpdatedAt, []byte(q.After.ID)), 0)
}

// pageReader builds one page from index entries in list order. It holds
// the query and the body reader by value, so that a List call keeps them on
// its stack.
type pageReader struct {
	q       engine.Query
	skip    int // index key prefix length
	tasks   []*a2a.Task
	cursors []engine.Cursor
	owners  []string
	light   lightPage  // light pages
	bodies  bodyReader // full pages
	scratch []byte     // decoded IDs, before their string copy
}

func newPageReader(q engine.Query, skip int) pageReader {
	p := pageReader{
		q: q, skip: skip,
		tasks:   make([]*a2a.Task, 0, q.PageSize+1),
		cursors: make([]engine.Cursor, 0, q.PageSize+1),
		owners:  make([]string, 0, q.PageSize+1),
		scratch: make([]byte, 0, 64),
	}
	if q.Projection == engine.ProjectionLight {
		p.light = newLightPage(q.PageSize)
	}
	return p
}

// read steps it from its first entry until the page has PageSize tasks and
// one more matching entry exists (the look-ahead: matched, not decoded), or
// the index ends.
func (p *pageReader) read(it *pebble.Iterator) (*engine.ListResponse, error) {
	examined, more := 0, false
	for ok := it.First(); ok; ok = it.Next() {
		examined++
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
		}
		l, err := decodeLight(v)
		if err != nil {
			return nil, err
		}
		match, err := matches(&p.q, &l)
		if err != nil {
			return nil, err
		}
		if !match {
			p.bodies.skipped()
			continue
		}
		if len(p.tasks) == p.q.PageSize {
			more = true
			break
		}
		if err := p.add(it.Key(), &l); err != nil {
			return nil, err
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
	}
	resp := listpage.Response(&p.q, p.tasks, p.cursors, more)
	resp.TaskOwners = p.owners
	resp.Stats.Examined = examined
	return resp, nil
}

// add appends the task of the index entry key, whose value is l.
func (p *pageReader) add(key []byte, l *light) error {
	cur, err := decodeIndexCursorBuf(&p.scratch, key, p.skip)
	if err != nil {
		return err
	}
	// A filtered page shares the query's context ID and owner strings.
	contextID, owner := p.q.ContextID, p.q.Owner
	if contextID == "" {
		contextID = string(l.ctx)
	}
	if owner == "" {
		owner = string(l.ownerRaw)
	}
	var t *a2a.Task
	if p.q.Projection == engine.ProjectionLight {
		t, err = p.light.add(cur.ID, contextID, l)
	} else if t, err = p.bodies.read(cur, contextID); err == nil {
		listpage.Shape(&p.q, t)
	}
	if err != nil {
		return err
	}
	p.tasks = append(p.tasks, t)
	p.cursors = append(p.cursors, cur)
	p.owners = append(p.owners, owner)
	return nil
}

// matches applies q's filters (listpage.Matches) to an index entry. A list
// filtered by owner or context reads only an index whose key prefix is that
// filter, so the entry's owner and context are q's. The status timestamp
// is decoded only when a filter reads it.
func matches(q *engine.Query, l *light) (bool, error) {
	var ts *time.Time
	if q.StatusAfter != nil {
		t, ok, err := l.statusTime()
		if err != nil {
			return false, err
		}
		if ok {
			ts = &t
		}
	}
	return listpage.Matches(q, q.Owner, q.ContextID, l.state, ts), nil
}

// lightPage builds the tasks of a light page (ProjectionLight) in three
// allocations for the whole page: tasks, their timestamps, and (in the
// caller) the pointer slice.
type lightPage struct {
	tasks []a2a.Task
	times []time.Time
}

func newLightPage(n int) lightPage {
	return lightPage{tasks: make([]a2a.Task, 0, n)}
}

func (p *lightPage) add(id a2a.TaskID, contextID string, l *light) (*a2a.Task, error) {
	p.tasks = append(p.tasks, a2a.Task{ID: id, ContextID: contextID, Status: a2a.TaskStatus{State: l.state}})
	t := &p.tasks[len(p.tasks)-1]
	ts, ok, err := l.statusTime()
	if err != nil {
		return nil, err
	}
	if ok {
		if p.times == nil {
			p.times = make([]time.Time, 0, cap(p.tasks))
		}
		p.times = append(p.times, ts)
		t.Status.Timestamp = &p.times[len(p.times)-1]
	}
	if t.Metadata, err = taskcodec.DecodeMetadata(l.metadata); err != nil {
		return nil, err
	}
	return t, nil
}

// bodyReader reads the bodies of a full page with a clone of the page's
// index iterator, over the body keyspace. Bodies are keyed by cursor, like
// the global index, so they sit in page order and the reader only moves
// forward.
type bodyReader struct {
	it *pebble.Iterator
	// global: the page reads the global index, whose entries are in body
	// order one for one.
	global bool
	// adjacent: the previous index entry of a global page was returned, so
	// its body is it's current key and the next body is one step away.
	adjacent bool
	// d decodes the page's bodies, building only the history and
	// artifacts the page returns (taskcodec.Decoder.Shape).
	d *taskcodec.Decoder
}

func newBodyReader(index *pebble.Iterator, global bool, q *engine.Query) (bodyReader, error) {
	it, err := index.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{
		LowerBound: []byte{tagBody}, UpperBound: []byte{tagBody + 1},
	}})
	if err != nil {
		return bodyReader{}, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
	}
	d := new(taskcodec.Decoder)
	d.Shape(q.HistoryLength, q.IncludeArtifacts)
	return bodyReader{it: it, global: global, d: d}, nil
}

func (b *bodyReader) close() { b.it.Close() }

// skipped notes an index entry the page skipped: the next body is no
// longer the next key.
func (b *bodyReader) skipped() { b.adjacent = false }

// read positions the reader at cur's body and decodes it. When the
// previous entry of a global page was also returned, the body is the next
// key: one step. Otherwise (pages of another index, skipped entries) it
// seeks forward: Pebble first tries a few steps from where the reader is
// (its seek-using-next optimization, bounded by a handful of steps per
// level, so a sparse page does not walk the bodies in between), then seeks.
func (b *bodyReader) read(cur engine.Cursor, contextID string) (*a2a.Task, error) {
	bk := bodyKey(cur)
	found := false
	if b.adjacent {
		found = b.it.Next() && bytes.Equal(b.it.Key(), bk)
	}
	if !found {
		found = b.it.SeekGE(bk) && bytes.Equal(b.it.Key(), bk)
	}
	b.adjacent = b.global
	if !found {
		if err := b.it.Error(); err != nil {
			return nil, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
		}
		return nil, fmt.Errorf("pebblestore: task %q has no body: %w", cur.ID, engine.ErrInternal)
	}
	v, err := b.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list: %v: %w", err, engine.ErrInternal)
	}
	t := new(a2a.Task)
	if err := b.d.Task(string(v), t); err != nil { // string: v is the iterator's until it moves
		return nil, err
	}
	t.ID, t.ContextID = cur.ID, contextID
	return t, nil
}

// total computes TotalSize from it's view (L5, L8): a maintained counter, or
// a scan of the index under prefix when StatusAfter is set. counted is the
// number of entries the scan inspected.
func (s *Store) total(it *pebble.Iterator, q *engine.Query, prefix []byte) (total, counted int, err error) {
	if q.StatusAfter == nil {
		n, _, err := s.readCounter(it, counterKey(q))
		if err != nil {
			return 0, 0, fmt.Errorf("pebblestore: list: total: %v: %w", err, engine.ErrInternal)
		}
		return int(n), 0, nil
	}
	it.SetBounds(prefix, desckey.PrefixEnd(prefix))
	for ok := it.First(); ok; ok = it.Next() {
		counted++
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, 0, fmt.Errorf("pebblestore: list: total: %v: %w", err, engine.ErrInternal)
		}
		l, err := decodeLight(v)
		if err != nil {
			return 0, 0, err
		}
		match, err := matches(q, &l)
		if err != nil {
			return 0, 0, err
		}
		if match {
			total++
		}
	}
	if err := it.Error(); err != nil {
		return 0, 0, fmt.Errorf("pebblestore: list: total: %v: %w", err, engine.ErrInternal)
	}
	return total, counted, nil
}
