package pebblestore

import (
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/ownercost"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// bulkCreate creates tasks of owner (every task at time at(i)) in batches
// of a thousand, with the writes put makes (stage): a fast load for tests
// that need many tasks. REQUIRES: the IDs are new and nothing else writes.
func bulkCreate(t testing.TB, s *Store, tasks []*a2a.Task, owner string, at func(i int) int64) {
	t.Helper()
	for lo := 0; lo < len(tasks); lo += 1000 {
		b := s.db.NewBatch()
		var counters counterDeltas
		for i, tk := range tasks[lo:min(lo+1000, len(tasks))] {
			if _, _, err := stage(b, &counters, nil, tk, owner, at(lo+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.commitCounted(b, &counters); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
}

// TestOwnerPagesReadOnlyTheOwner checks O6 with 100,000 tasks of another
// owner present (ownercost.Check); every total without a status-time
// filter reads one counter.
func TestOwnerPagesReadOnlyTheOwner(t *testing.T) {
	// A memtable that holds everything: no flush or compaction slows the
	// load (they take minutes under the race detector).
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{},
		Tune: func(o *pebble.Options) { o.MemTableSize = 256 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ownercost.Check(t, s, func(t testing.TB, owner string, tasks []*a2a.Task, at func(int) int64) {
		bulkCreate(t, s, tasks, owner, at)
	}, 0)
}

// TestCounterKeys: a task counts in the counter its filters read
// (counterKey), one of each kind, and two tasks share a counter only when
// they agree on what it counts — owners and contexts that are prefixes of
// each other included, and the empty context as a context of its own.
func TestCounterKeys(t *testing.T) {
	counts := map[byte][3]bool{} // what each counter kind counts: owner, context, state
	for f, kind := range counterKinds {
		counts[kind] = f
	}
	seen := map[string]string{}
	for _, owner := range []string{"", "o", "o\x00", "o\x00c"} {
		for _, contextID := range []string{"", "c", "c\x00", "\x00c"} {
			for _, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted} {
				exist, shape := counterKeys(owner, contextID, st)
				keys := append(exist, shape...)
				kinds := map[byte]bool{}
				for _, k := range keys {
					f, ok := counts[k[1]]
					if !ok || kinds[k[1]] || f[0] && owner == "" {
						t.Fatalf("task (%q, %q, %s): counter %x of an unknown, repeated or owner kind", owner, contextID, st, k)
					}
					kinds[k[1]] = true
					label := fmt.Sprintf("%c", k[1])
					for i, part := range []string{owner, contextID, string(st)} {
						if f[i] {
							label += fmt.Sprintf("|%q", part)
						}
					}
					if prev, ok := seen[string(k)]; ok && prev != label {
						t.Errorf("counter %x counts %s and %s", k, prev, label)
					}
					seen[string(k)] = label
					// The filters of this kind find the task, with this counter
					// (an empty context is no filter, so no list reads that one).
					q := engine.Query{}
					if f[0] {
						q.Owner = owner
					}
					if f[1] {
						q.ContextID = contextID
					}
					if f[2] {
						q.Status = st
					}
					if (!f[1] || contextID != "") && string(counterKey(&q)) != string(k) {
						t.Errorf("task (%q, %q, %s) counts in %x, the filters %+v read %x", owner, contextID, st, k, q, counterKey(&q))
					}
				}
				if want := map[bool]int{false: 4, true: 8}[owner != ""]; len(keys) != want {
					t.Errorf("task (%q, %q, %s): %d counters, want %d", owner, contextID, st, len(keys), want)
				}
			}
		}
	}
}
