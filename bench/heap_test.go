package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// heapProfileDir, when set, makes BenchmarkMemHeap write the heap profile
// of each loaded store (after its collections, the store live) to
// DIR/<sub-benchmark>.pprof: `go tool pprof -sample_index=inuse_space`.
// Use it with -test.memprofilerate (e.g. 4096) for fine-grained samples.
var heapProfileDir = flag.String("bench.heapprofile", "", "BenchmarkMemHeap: write each loaded store's heap profile to this directory")

// BenchmarkMemHeap (#16) reports memstore's live heap per task after
// loading n tasks and collecting the garbage, beside the bare-tree floor
// built in the same process from the same tasks:
//
//	BenchmarkMemHeap/n=N/tasks=light|realistic/owners=none|1000|per-task
//	BenchmarkMemHeap/n=N/tasks=realistic/owners=1000/log=on
//
// Light tasks are lightTask's (a 36-byte ID, one of 16 contexts, a state
// and a status timestamp); realistic ones are internal/taskgen's default
// shape. Owners:
// none (Create), 1,000 drawn from a Zipf distribution, or one per task
// (the owner indexes' worst case).
//
// The floor is a bare tidwall B-tree of (time, ID) items pointing at a
// small record of the light fields (contexts shared): what any ordered
// index of the tasks must hold, with no ID map, no per-context or owner
// index and no counters. For realistic tasks the record also holds the
// task's taskcodec form, exactly sized: the data itself. Metrics:
// heap-bytes/task (the store), floor-bytes/task, x-floor (their ratio) and
// heap-objects/task (objects the collector tracks per task); log=on
// reports the store with its task log, and log-bytes/task, the log's part
// (the same store with the log off, loaded in the same iteration). Sizes are the
// run's from 1e5 up (BENCH_FULL=1 or BENCH_SIZES for 1e6). Each iteration
// builds both; b.Loop runs once when that takes longer than -benchtime.
func BenchmarkMemHeap(b *testing.B) {
	for _, n := range tenancySizes() {
		for _, shape := range []string{"light", "realistic"} {
			for _, owners := range []string{"none", "1000", "per-task"} {
				name := fmt.Sprintf("n=%d/tasks=%s/owners=%s", n, shape, owners)
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						store, objects := memHeap(b, n, shape, owners, false, name)
						floor := floorHeap(b, n, shape)
						b.ReportMetric(store, "heap-bytes/task")
						b.ReportMetric(floor, "floor-bytes/task")
						b.ReportMetric(store/floor, "x-floor")
						b.ReportMetric(objects, "heap-objects/task")
					}
				})
			}
		}
		// The task log (K7), which every server keeps: the same store with
		// it on, beside it off in the same loop (docs/capacity.md's log
		// term: each task's Create entry, the whole task, kept until the
		// task has been idle for the server's -log-retention).
		name := fmt.Sprintf("n=%d/tasks=realistic/owners=1000/log=on", n)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				off, _ := memHeap(b, n, "realistic", "1000", false, "")
				on, objects := memHeap(b, n, "realistic", "1000", true, name)
				b.ReportMetric(on, "heap-bytes/task")
				b.ReportMetric(on-off, "log-bytes/task")
				b.ReportMetric(objects, "heap-objects/task")
			}
		})
	}
}

// heapOwner returns the owner of task i for the owners variant.
func heapOwner(owners string, z *rand.Zipf, i int) string {
	switch owners {
	case "1000":
		return ownerName(int(z.Uint64()))
	case "per-task":
		return fmt.Sprintf("user-%07d", i)
	}
	return ""
}

// liveHeap returns the live heap bytes and objects after two collections.
func liveHeap() (bytes, objects int64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.HeapObjects)
}

// memHeap loads n tasks into a memstore (with the task log when log is
// set) and returns its live heap bytes and objects per task; with
// -bench.heapprofile and a name it writes the heap profile, store live,
// as name.pprof.
func memHeap(b *testing.B, n int, shape, owners string, log bool, name string) (perTask, objects float64) {
	gen := taskgen.New(taskgen.Shape{})
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, benchOwners-1)
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
	bytes0, objects0 := liveHeap()
	s := memstore.New(memstore.Options{Clock: clock.Now, Log: log})
	ctx := context.Background()
	for i := range n {
		if _, err := s.CreateOwned(ctx, fixtureKey{light: shape == "light"}.task(gen, i), heapOwner(owners, z, i)); err != nil {
			b.Fatal(err)
		}
	}
	bytes1, objects1 := liveHeap()
	if *heapProfileDir != "" && name != "" {
		path := filepath.Join(*heapProfileDir, strings.ReplaceAll(name, "/", "_")+".pprof")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(s)
	return float64(bytes1-bytes0) / float64(n), float64(objects1-objects0) / float64(n)
}

// floorLight is the floor's record of a light task: its light fields.
type floorLight struct {
	contextID  string
	state      a2a.TaskState
	statusTime time.Time
}

// floorFull is the floor's record of a realistic task: the light fields
// and the task's stored form.
type floorFull struct {
	floorLight
	body []byte
}

// floorHeap builds the bare-tree floor of the n tasks of shape and returns
// its live heap bytes per task.
func floorHeap(b *testing.B, n int, shape string) float64 {
	if shape == "light" {
		return floorTree(b, n, shape, func(_ *a2a.Task, lf floorLight) *floorLight { return &lf })
	}
	return floorTree(b, n, shape, func(t *a2a.Task, lf floorLight) *floorFull {
		body, err := taskcodec.EncodeTask(t)
		if err != nil {
			b.Fatal(err)
		}
		return &floorFull{lf, append([]byte(nil), body...)}
	})
}

func floorTree[R any](b *testing.B, n int, shape string, record func(*a2a.Task, floorLight) *R) float64 {
	gen := taskgen.New(taskgen.Shape{})
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
	contexts := map[string]string{}
	bytes0, _ := liveHeap()
	tr := newFloorTree[*R]()
	for i := range n {
		t := fixtureKey{light: shape == "light"}.task(gen, i)
		c, ok := contexts[t.ContextID]
		if !ok {
			c = t.ContextID
			contexts[c] = c
		}
		lf := floorLight{contextID: c, state: t.Status.State}
		if t.Status.Timestamp != nil {
			lf.statusTime = *t.Status.Timestamp
		}
		tr.Set(floorItem[*R]{at: clock.Now(), id: t.ID, v: record(t, lf)})
	}
	bytes1, _ := liveHeap()
	runtime.KeepAlive(tr)
	runtime.KeepAlive(contexts)
	return float64(bytes1-bytes0) / float64(n)
}
