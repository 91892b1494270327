package bench

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// The Pebble light-page floor (#31: pebblestore's light page ≤ 1.0× a
// bare Pebble page): a bare Pebble DB that holds, per task, what a light
// page needs and nothing else — the key is the task's cursor in list
// order (floorKey), the value its state, status timestamp and context
// (floorValue). It has the store's cache size and bloom filters and is
// loaded like the store's fixture (writes in order, not compacted), then
// flushed. A page
// is one iterator seeked just past the boundary, PageSize+1 entries, and
// the least copying a store must do: fresh light tasks in three
// allocations (tasks, timestamps, pointers), as the B-tree floor does.
// Metadata is not kept: the floor pays for none, whatever the fixture.

// floorKey appends the list-order key of (at, id): at big-endian and
// inverted, then id's bytes inverted and 0xFF, so that keys sort
// ascending in list order — later first, then ID bytes descending. IDs
// hold no NUL (engine.ValidateTask), so no inverted ID byte is 0xFF and
// the terminator sorts every ID after its own prefixes.
func floorKey(dst []byte, at int64, id a2a.TaskID) []byte {
	dst = binary.BigEndian.AppendUint64(dst, ^uint64(at))
	for i := range len(id) {
		dst = append(dst, ^id[i])
	}
	return append(dst, 0xFF)
}

// floorValue is a floor entry's value: the state's index in floorStates,
// the status timestamp in Unix nanoseconds (8 bytes), the context.
func floorValue(state a2a.TaskState, ts time.Time, ctx string) []byte {
	v := []byte{0}
	for i, s := range floorStates {
		if s == state {
			v[0] = byte(i)
		}
	}
	v = binary.BigEndian.AppendUint64(v, uint64(ts.UnixNano()))
	return append(v, ctx...)
}

var floorStates = []a2a.TaskState{a2a.TaskStateUnspecified, a2a.TaskStateSubmitted, a2a.TaskStateWorking,
	a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateInputRequired,
	a2a.TaskStateRejected, a2a.TaskStateAuthRequired}

// openPebbleFloor opens a bare Pebble DB in a temporary directory of tb,
// loaded with fx's light fields, closed when tb ends.
func openPebbleFloor(tb testing.TB, fx *fixture) *pebble.DB {
	tb.Helper()
	cache := pebble.NewCache(64 << 20) // the store's default
	defer cache.Unref()
	o := &pebble.Options{Cache: cache, FormatMajorVersion: pebble.FormatNewest, Logger: pebblelog.Quiet{}}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(tb.TempDir(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	batch := db.NewBatch()
	for i := len(fx.order) - 1; i >= 0; i-- { // creation order
		c := fx.order[i]
		if err := batch.Set(floorKey(nil, c.UpdatedAt, c.ID), floorValue(fx.state[i], fx.stamp[i], fx.ctx[i]), nil); err != nil {
			tb.Fatal(err)
		}
		if batch.Count() == 1000 || i == 0 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				tb.Fatal(err)
			}
			batch = db.NewBatch()
		}
	}
	// Into sstables, as most of the store's fixture is (a small floor
	// would otherwise be served from the memtable alone).
	if err := db.Flush(); err != nil {
		tb.Fatal(err)
	}
	return db
}

// pebbleFloorPage serves a light page of up to page tasks strictly after
// the boundary c from db.
func pebbleFloorPage(tb testing.TB, db *pebble.DB, c engine.Cursor, page int) []*a2a.Task {
	lower := append(floorKey(make([]byte, 0, 64), c.UpdatedAt, c.ID), 0)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower})
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Close()
	tasks := make([]a2a.Task, 0, page)
	times := make([]time.Time, 0, page)
	for ok := it.First(); ok; ok = it.Next() {
		if len(tasks) == page {
			break // the look-ahead entry
		}
		k, v := it.Key(), it.Value()
		id := make([]byte, len(k)-9)
		for i := range id {
			id[i] = ^k[8+i]
		}
		times = append(times, time.Unix(0, int64(binary.BigEndian.Uint64(v[1:9]))).UTC())
		tasks = append(tasks, a2a.Task{ID: a2a.TaskID(id), ContextID: string(v[9:]),
			Status: a2a.TaskStatus{State: floorStates[v[0]], Timestamp: &times[len(times)-1]}})
	}
	if err := it.Error(); err != nil {
		tb.Fatal(err)
	}
	ptrs := make([]*a2a.Task, len(tasks))
	for j := range tasks {
		ptrs[j] = &tasks[j]
	}
	sink = ptrs
	return ptrs
}

// TestPebbleFloorServesTheStoresPage: the floor's page is the store's
// light page (same tasks, same order, same light fields) from the same
// boundaries, so the pair compares like with like.
func TestPebbleFloorServesTheStoresPage(t *testing.T) {
	e := pebbleEnv(t)
	fx := e.fixture(t, 300)
	db := openPebbleFloor(t, fx)
	for _, p := range []int{1, 7, 150, 260, 299} {
		resp, err := fx.store.List(context.Background(), &engine.ListRequest{PageSize: 50, PageToken: fx.token(p), Projection: engine.ProjectionLight})
		if err != nil {
			t.Fatal(err)
		}
		got := pebbleFloorPage(t, db, fx.order[p-1], 50)
		if len(got) != len(resp.Tasks) || len(got) != min(50, fx.n-p) {
			t.Fatalf("boundary %d: floor %d tasks, store %d", p, len(got), len(resp.Tasks))
		}
		for i, w := range resp.Tasks {
			g := got[i]
			if g.ID != w.ID || g.ContextID != w.ContextID || g.Status.State != w.Status.State || !g.Status.Timestamp.Equal(*w.Status.Timestamp) {
				t.Fatalf("boundary %d, task %d: floor %+v, store %+v", p, i, *g, *w)
			}
		}
	}
}
