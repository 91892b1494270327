package pebblestore

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine/taskcodec"
)

// openOneTask opens a store holding one task, t1, WORKING in context c1.
func openOneTask(t *testing.T) (*Store, []byte) {
	t.Helper()
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	rec, err := s.Create(context.Background(), &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return s, bodyKey(rec.Cursor)
}

// CheckInvariants reads every body (review by helper-39): one that does
// not decode, or whose task's state differs from its record's (a page
// filtered by WORKING then returned a COMPLETED task, and the WORKING
// total counted it), is damage. Both passed before.
func TestCheckReadsBodies(t *testing.T) {
	completed, err := taskcodec.EncodeTask(&a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := taskcodec.EncodeTask(&a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: "no-such-state"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"undecodable": {0xde, 0xad, 0xbe, 0xef}, "another state": completed, "unknown state": unknown} {
		s, key := openOneTask(t)
		if err := s.db.Set(key, body, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckInvariants(); err == nil {
			t.Errorf("CheckInvariants accepts a body of %s", name)
		}
	}
}

// Only the keys of the global counters are kept at zero (review by
// helper-39): a zero-valued key that merely begins like one (n‖t‖…,
// n‖s‖<no state>) is damage, not a global counter; it passed before.
func TestCheckGlobalCounterKeysExact(t *testing.T) {
	s, _ := openOneTask(t)
	for _, k := range [][]byte{
		append(counterKeyOf(counterTotal), 'x'),
		counterKeyOf(counterState, []byte{0x63}),
	} {
		if err := s.db.Set(k, counterDelta(0), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckInvariants(); err == nil {
			t.Errorf("CheckInvariants accepts the zero-valued key %x", k)
		}
		if err := s.db.Delete(k, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
