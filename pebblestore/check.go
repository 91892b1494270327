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

	c := keyspaceCheck{recs: map[string]*checkedRecord{}, counters: map[string]int64{}}
	// Records first ('b' < 'c' < 'g' < 'n' < 'r', so read 'r' on its own).
	it.SetBounds([]byte{tagRecord}, []byte{tagRecord + 1})
	for ok := it.First(); ok; ok = it.Next() {
		c.record(it.Key(), it.Value())
	}
	it.SetBounds(nil, nil)
	for ok := it.First(); ok; ok = it.Next() {
		c.key(it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		return err
	}
	return c.finish()
}

// keyspaceCheck is the state of one CheckInvariants: the records, the
// counters they add up to, and what is wrong (the first 20 problems).
type keyspaceCheck struct {
	recs     map[string]*checkedRecord // by task ID
	counters map[string]int64          // recounted, by counter key
	errs     []error
}

// checkedRecord is a record and the keys found for it.
type checkedRecord struct {
	record
	lv                    []byte // the light value its index entries must hold
	global, context, body int
}

func (c *keyspaceCheck) fail(format string, args ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Errorf(format, args...))
	}
}

// record notes the record under key and counts it in its counters.
func (c *keyspaceCheck) record(key, value []byte) {
	id := string(key[1:])
	r, err := decodeRecord(bytes.Clone(value))
	if err != nil {
		c.fail("record %q: %v", id, err)
		return
	}
	if id == "" {
		c.fail("record with empty ID")
	}
	c.recs[id] = &checkedRecord{record: r, lv: r.light.append(nil)}
	for _, k := range counterKeys(r.light.contextID, r.light.state) {
		c.counters[string(k)]++
	}
}

// key checks one key of the whole keyspace against the records.
func (c *keyspaceCheck) key(key, value []byte) {
	switch key[0] {
	case tagRecord:
	case tagGlobal, tagBody:
		c.cursorKey(key, value)
	case tagContext:
		c.contextKey(key, value)
	case tagCounter:
		c.counter(key, value)
	default:
		c.fail("unknown key %x", key)
	}
}

// cursorKey checks a global index key (its value is the record's light
// value) or a body key.
func (c *keyspaceCheck) cursorKey(key, value []byte) {
	kind, isGlobal := "body", key[0] == tagGlobal
	if isGlobal {
		kind = "global"
	}
	cur, err := decodeIndexCursor(key, 1)
	if err != nil {
		c.fail("%s key %x: %v", kind, key, err)
		return
	}
	r := c.recs[string(cur.ID)]
	if r == nil || r.updatedAt != cur.UpdatedAt {
		c.fail("%s key %x of task %q does not match a record", kind, key, cur.ID)
		return
	}
	if !isGlobal {
		r.body++
		return
	}
	r.global++
	if !bytes.Equal(value, r.lv) {
		c.fail("global value of task %q differs from its record", cur.ID)
	}
}

// contextKey checks a context index key: the record's context and cursor,
// its light value.
func (c *keyspaceCheck) contextKey(key, value []byte) {
	ctx, rest, err := desckey.DecodeAscending(key[1:])
	if err != nil {
		c.fail("context key %x: %v", key, err)
		return
	}
	cur, err := decodeIndexCursor(rest, 0)
	if err != nil {
		c.fail("context key %x: %v", key, err)
		return
	}
	r := c.recs[string(cur.ID)]
	if r == nil || r.updatedAt != cur.UpdatedAt || r.light.contextID != string(ctx) {
		c.fail("context key %x of task %q does not match a record", key, cur.ID)
		return
	}
	r.context++
	if !bytes.Equal(value, r.lv) {
		c.fail("context value of task %q differs from its record", cur.ID)
	}
}

// counter checks a stored counter against the recount and crosses it off.
func (c *keyspaceCheck) counter(key, value []byte) {
	n, err := decodeCounter(value)
	if err != nil {
		c.fail("counter %x: %v", key, err)
		return
	}
	if want := c.counters[string(key)]; n != want {
		c.fail("counter %x = %d, recount %d", key, n, want)
	}
	delete(c.counters, string(key))
}

// finish reports recounted counters that were not stored and records
// without exactly one key of each kind, with everything found before.
func (c *keyspaceCheck) finish() error {
	for k, n := range c.counters {
		if n != 0 {
			c.fail("counter %x missing, recount %d", k, n)
		}
	}
	for id, r := range c.recs {
		if r.global != 1 || r.context != 1 || r.body != 1 {
			c.fail("task %q has %d global, %d context, %d body keys; want 1 each", a2a.TaskID(id), r.global, r.context, r.body)
		}
	}
	return errors.Join(c.errs...)
}
