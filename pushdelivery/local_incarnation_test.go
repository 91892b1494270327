package pushdelivery

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// localIdle reports whether the harness's worker, over the Local l, has
// nothing in flight, no task left to read and no record leased or due.
func localIdle(h *harness, l *Local) bool {
	now := h.clock.Now()
	h.w.mu.Lock()
	inFlight := len(h.w.mu.dests)
	h.w.mu.Unlock()
	if inFlight > 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.dirty) > 0 {
		return false
	}
	for _, t := range l.mu.tasks {
		for _, lr := range t.recs {
			if lr.token != 0 || !lr.rec.NextAt.After(now) && t.rev > lr.rec.Delivered {
				return false
			}
		}
	}
	return true
}

// SPEC N1, N2: a task at revision 5 deleted and created again (revision
// 1) before the outbox read it again: a config saved on the new task
// gets revision 1 once. Before, the outbox kept revision 5 (revisions
// only went up), so the new record stayed due at cursor 1 and the task
// was posted again on every claim.
func TestLocalRecreatedTaskPostedOnce(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			var l *Local
			h := newHarness(t, func(o *Options) {
				lo := LocalOptions{Clock: o.Clock, Rescan: time.Hour}
				if kind == "memory" {
					l = NewMemory(o.Store, lo)
				} else {
					var err error
					if l, err = OpenPebble(t.TempDir(), o.Store, lo); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
				}
				o.Outbox = l
			})
			rc := newReceiver(t, nil)
			const task = a2a.TaskID("t1")
			h.create(task)
			for range 4 {
				h.update(task, a2a.TaskStateWorking)
			} // revision 5
			save := func(id string) {
				t.Helper()
				mark, err := h.store.Deleted(h.ctx, task)
				if err != nil {
					t.Fatal(err)
				}
				r := &Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: id, URL: rc.srv.URL + "/" + id},
					Dest: rc.srv.URL, Created: h.clock.Now(), NextAt: h.clock.Now(), Delivered: 4, Incarnation: mark}
				if id == "new" {
					r.Delivered = 0
				}
				if err := l.Save(h.ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			save("old") // revision 5 due
			h.w.Wake(task)
			eventually(t, "revision 5 to the old config", func() bool { return localIdle(h, l) && len(rc.hits()) == 1 })

			if err := h.store.Delete(h.ctx, task); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Second)
			h.create(task) // revision 1 of the new task
			save("new")    // drops old
			h.w.Wake(task)
			// With the defect the record never becomes idle and the
			// posts keep coming: stop at a second one.
			within(10*time.Second, func() bool { return localIdle(h, l) && len(rc.hits()) >= 2 || len(rc.hits()) > 2 })
			var revs []int64
			for _, x := range rc.hits() {
				revs = append(revs, x.rev)
			}
			if len(revs) != 2 || revs[0] != 5 || revs[1] != 1 {
				t.Fatalf("posted revisions %v, want [5 1]: 5 to the old config, 1 once to the new", revs)
			}
		})
	}
}
