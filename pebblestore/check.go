package pebblestore

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// CheckInvariants verifies the keyspace from one consistent view: every
// record has exactly one global index key, one context index key and one
// body key at its cursor, with index values equal to the record's light
// fields; no index or body key lacks its record; every counter equals a
// recount. It reads the whole database and is meant for tests
// (engine.Checker).
func (s *Store) CheckInvariants() (err error) {
	exit, err := s.enter("check")
	if err != nil {
		return err
	}
	defer exit()
	defer s.catch("check", &err)
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()

	type rec struct {
		record
		lv                    []byte
		global, context, body int
	}
	recs := map[string]*rec{}
	counters := map[string]int64{}
	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// Records first ('b' < 'c' < 'g' < 'n' < 'r', so read 'r' on its own).
	it.SetBounds([]byte{tagRecord}, []byte{tagRecord + 1})
	for ok := it.First(); ok; ok = it.Next() {
		id := string(it.Key()[1:])
		r, err := decodeRecord(bytes.Clone(it.Value()))
		if err != nil {
			fail("record %q: %v", id, err)
			continue
		}
		if id == "" {
			fail("record with empty ID")
		}
		recs[id] = &rec{record: r, lv: r.light.append(nil)}
		for _, k := range counterKeys(r.light.contextID, r.light.state) {
			counters[string(k)]++
		}
	}
	it.SetBounds(nil, nil)
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		switch key[0] {
		case tagRecord:
		case tagGlobal, tagBody:
			kind, isGlobal := "body", key[0] == tagGlobal
			if isGlobal {
				kind = "global"
			}
			cur, err := decodeIndexCursor(key, 1)
			if err != nil {
				fail("%s key %x: %v", kind, key, err)
				continue
			}
			r := recs[string(cur.ID)]
			if r == nil || r.updatedAt != cur.UpdatedAt {
				fail("%s key %x of task %q does not match a record", kind, key, cur.ID)
				continue
			}
			if isGlobal {
				r.global++
				if !bytes.Equal(it.Value(), r.lv) {
					fail("global value of task %q differs from its record", cur.ID)
				}
			} else {
				r.body++
			}
		case tagContext:
			ctx, rest, err := desckey.DecodeAscending(key[1:])
			if err != nil {
				fail("context key %x: %v", key, err)
				continue
			}
			cur, err := decodeIndexCursor(rest, 0)
			if err != nil {
				fail("context key %x: %v", key, err)
				continue
			}
			r := recs[string(cur.ID)]
			if r == nil || r.updatedAt != cur.UpdatedAt || r.light.contextID != string(ctx) {
				fail("context key %x of task %q does not match a record", key, cur.ID)
				continue
			}
			r.context++
			if !bytes.Equal(it.Value(), r.lv) {
				fail("context value of task %q differs from its record", cur.ID)
			}
		case tagCounter:
			n, err := decodeCounter(it.Value())
			if err != nil {
				fail("counter %x: %v", key, err)
				continue
			}
			if want := counters[string(key)]; n != want {
				fail("counter %x = %d, recount %d", key, n, want)
			}
			delete(counters, string(key))
		default:
			fail("unknown key %x", key)
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	for k, n := range counters {
		if n != 0 {
			fail("counter %x missing, recount %d", k, n)
		}
	}
	for id, r := range recs {
		if r.global != 1 || r.context != 1 || r.body != 1 {
			fail("task %q has %d global, %d context, %d body keys; want 1 each", a2a.TaskID(id), r.global, r.context, r.body)
		}
	}
	return errors.Join(errs...)
}
