package bench

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// The full-page floor (#16): what a full page must cost at least — a bare
// tidwall B-tree of the fixture's tasks as the a2a objects themselves
// (pointers, no encoding, no other index), one seek, and the deep copies
// L9 requires, allocated page-wide (one slice per kind of object per page,
// like the light floor's tasks and timestamps). Strings are shared, not
// copied: they are immutable, so sharing them keeps L9.

// floorItem is an item of a floor's bare B-tree: the list-order key and
// what the floor keeps of the task.
type floorItem[V any] struct {
	at int64
	id a2a.TaskID
	v  V
}

func floorLess[V any](a, b floorItem[V]) bool {
	if a.at != b.at {
		return a.at > b.at
	}
	return strings.Compare(string(a.id), string(b.id)) > 0
}

func newFloorTree[V any]() *btree.BTreeG[floorItem[V]] {
	return btree.NewBTreeGOptions(floorLess[V], btree.Options{NoLocks: true})
}

// treeCache keeps one floor tree, of the fixture it was last asked for.
type treeCache[V any] struct {
	mu sync.Mutex
	fx *fixture
	tr *btree.BTreeG[floorItem[V]]
}

// get returns fx's tree, filled by fill on first use.
func (c *treeCache[V]) get(fx *fixture, fill func(tr *btree.BTreeG[floorItem[V]])) *btree.BTreeG[floorItem[V]] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fx != fx {
		c.fx, c.tr = nil, nil // one at a time
		tr := newFloorTree[V]()
		fill(tr)
		c.fx, c.tr = fx, tr
	}
	return c.tr
}

type fullItem = floorItem[*a2a.Task]

var fullTrees treeCache[*a2a.Task]

// fullTree is the fixture's tasks, regenerated as its loader made them
// (task i is fixtureKey.task(gen, i), created in order, so list order right
// after loading is creation order reversed), in a bare B-tree at their
// cursors.
func fullTree(tb testing.TB, fx *fixture) *btree.BTreeG[fullItem] {
	return fullTrees.get(fx, func(tr *btree.BTreeG[fullItem]) {
		gen := taskgen.New(taskgen.Shape{})
		for i := range fx.n {
			t := fx.key.task(gen, i)
			c := fx.order[fx.n-1-i]
			if c.ID != t.ID {
				tb.Fatalf("fixture order: position %d holds %q, want %q (the loader's order changed)", fx.n-1-i, c.ID, t.ID)
			}
			tr.Set(fullItem{c.UpdatedAt, c.ID, t})
		}
	})
}

// fullPage serves a full page of up to page tasks strictly after the
// boundary at: one seek, then deep copies into page-wide slabs.
func fullPage(tr *btree.BTreeG[fullItem], at fullItem, page int) int {
	var c pageCopier
	all := func(*a2a.Task) bool { return true }
	return floorPage(tr, at, page, all, func(dst *a2a.Task, it fullItem, times *[]time.Time) { c.task(dst, it.v, times) })
}

// fullFloorMax is the largest fixture benchFullFloor copies: a second
// copy of every task beside the store's does not fit in memory above it
// (1e7 realistic tasks: about 15 GiB each).
const fullFloorMax = 1_000_000

// benchFullFloor: the floor under memstore's full page (#16: memstore ≤
// 1.5× this at n = 1e6): the same random cursors on fullTree, up to
// fullFloorMax tasks.
func benchFullFloor(b *testing.B, e *env, fixtureOf func(tb testing.TB, n int) *fixture, tasks string) {
	upTo := func(tb testing.TB, n int) *fixture {
		if n > fullFloorMax {
			tb.Skipf("the full floor copies every task: not above %d tasks", fullFloorMax)
		}
		return fixtureOf(tb, n)
	}
	benchFloorPage(b, e, upTo, "full"+tasks, func(fx *fixture) func(c engine.Cursor) int {
		tr := fullTree(b, fx)
		return func(c engine.Cursor) int { return fullPage(tr, fullItem{at: c.UpdatedAt, id: c.ID}, 50) }
	})
}

// slab hands out values of T from page-wide chunks.
type slab[T any] struct{ buf []T }

// take returns n zero values of T as a slice whose capacity ends with it
// (appending to it never writes into another task's values).
func (s *slab[T]) take(n int) []T {
	if n == 0 {
		return nil
	}
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]T, 0, max(n, 256))
	}
	at := len(s.buf)
	s.buf = s.buf[:at+n]
	return s.buf[at : at+n : at+n]
}

func (s *slab[T]) one() *T { return &s.take(1)[0] }

// pageCopier deep-copies tasks into page-wide slabs.
type pageCopier struct {
	msgs      slab[a2a.Message]
	msgPtrs   slab[*a2a.Message]
	parts     slab[a2a.Part]
	partPtrs  slab[*a2a.Part]
	artifacts slab[a2a.Artifact]
	artPtrs   slab[*a2a.Artifact]
}

// task copies src into dst; dst's status timestamp is appended to times
// (whose capacity is the page's, so pointers stay valid).
func (c *pageCopier) task(dst, src *a2a.Task, times *[]time.Time) {
	*dst = a2a.Task{ID: src.ID, ContextID: src.ContextID, Status: a2a.TaskStatus{State: src.Status.State}}
	if ts := src.Status.Timestamp; ts != nil {
		*times = append(*times, *ts)
		dst.Status.Timestamp = &(*times)[len(*times)-1]
	}
	dst.Status.Message = c.message(src.Status.Message)
	if len(src.History) > 0 {
		dst.History = c.msgPtrs.take(len(src.History))
		for i, m := range src.History {
			dst.History[i] = c.message(m)
		}
	}
	if len(src.Artifacts) > 0 {
		dst.Artifacts = c.artPtrs.take(len(src.Artifacts))
		for i, a := range src.Artifacts {
			if a == nil {
				continue
			}
			d := c.artifacts.one()
			*d = a2a.Artifact{ID: a.ID, Description: a.Description, Name: a.Name,
				Extensions: cloneSlice(a.Extensions), Metadata: copyMap(a.Metadata), Parts: c.partList(a.Parts)}
			dst.Artifacts[i] = d
		}
	}
	dst.Metadata = copyMap(src.Metadata)
}

func (c *pageCopier) message(m *a2a.Message) *a2a.Message {
	if m == nil {
		return nil
	}
	d := c.msgs.one()
	*d = a2a.Message{ID: m.ID, ContextID: m.ContextID, Role: m.Role, TaskID: m.TaskID,
		Extensions: cloneSlice(m.Extensions), ReferenceTasks: cloneSlice(m.ReferenceTasks),
		Metadata: copyMap(m.Metadata), Parts: c.partList(m.Parts)}
	return d
}

func (c *pageCopier) partList(ps a2a.ContentParts) a2a.ContentParts {
	if len(ps) == 0 {
		return nil
	}
	out := c.partPtrs.take(len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		d := c.parts.one()
		*d = a2a.Part{Content: copyContent(p.Content), Filename: p.Filename, MediaType: p.MediaType, Metadata: copyMap(p.Metadata)}
		out[i] = d
	}
	return out
}

func copyContent(c a2a.PartContent) a2a.PartContent {
	switch c := c.(type) {
	case a2a.Raw:
		return a2a.Raw(cloneSlice([]byte(c)))
	case a2a.Data:
		return a2a.Data{Value: copyValue(c.Value)}
	}
	return c // Text, URL: strings
}

func cloneSlice[S ~[]E, E any](s S) S {
	if s == nil {
		return nil
	}
	return append(S(nil), s...)
}

func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

// copyValue deep-copies a JSON value (maps and slices; scalars are values).
func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return copyMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}

// TestPageCopierCopies: the full floor's copy equals its source and shares
// nothing mutable with it (L9), on generated tasks with every kind of
// content.
func TestPageCopierCopies(t *testing.T) {
	gen := taskgen.New(taskgen.Shape{})
	for i := range 20 {
		src := gen.Task(i)
		src.Metadata = map[string]any{"k": []any{1.0, map[string]any{"x": "y"}}}
		src.History[0].Parts = append(src.History[0].Parts, a2a.NewRawPart([]byte("raw")), a2a.NewDataPart(map[string]any{"d": 1.0}))
		src.History[0].Extensions = []string{"ext"}
		want, err := json.Marshal(src)
		if err != nil {
			t.Fatal(err)
		}
		var c pageCopier
		var dst a2a.Task
		times := make([]time.Time, 0, 1)
		c.task(&dst, src, &times)
		if got, _ := json.Marshal(&dst); string(got) != string(want) {
			t.Fatalf("copy %s\nwant %s", got, want)
		}
		dst.Metadata["k"].([]any)[1].(map[string]any)["x"] = "changed"
		dst.History[0].Parts[1].Content.(a2a.Raw)[0] = 'X'
		dst.History[0].Parts[2].Content.(a2a.Data).Value.(map[string]any)["d"] = 2.0
		dst.History[0].Extensions[0] = "changed"
		dst.History[1] = nil
		*dst.Status.Timestamp = time.Time{}
		dst.Artifacts[0].Name = "changed"
		if got, _ := json.Marshal(src); string(got) != string(want) {
			t.Fatalf("mutating the copy changed the source: %s", got)
		}
	}
}
