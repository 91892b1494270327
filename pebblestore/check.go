package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// CheckInvariants verifies the keyspace from one consistent view: the
// format version is this build's; every record has exactly one key in each
// ordering index it belongs to (global, context, state, and with an owner,
// owner, (owner, context) and (owner, state): C7) and one body key, all at its cursor, with index
// values equal to the record's light fields; no index or body key lacks its
// record; every counter equals a recount, and no counter key but the
// global ones (all tasks, per state) is zero: a counter no task counts in
// has no key, and no zero-counter marker is pending (counters.go). It
// first sweeps the markers queued for the sweeper (zero_sweeper.go), so
// only a marker no running write queued (one a crash left) is reported.
// It reads the whole database and is meant for tests (engine.Checker),
// with no concurrent writer.
func (s *Store) CheckInvariants() (err error) {
	exit, err := s.enter("check")
	if err != nil {
		return err
	}
	defer exit()
	if err := s.sweepPending(nil); err != nil {
		return err
	}
	defer s.catch("check", &err)
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()

	c := keyspaceCheck{expected: map[string]*expectedKey{}, counters: map[string]int64{},
		records: map[a2a.TaskID]record{}, logs: map[a2a.TaskID]*logSpan{},
		deletions: map[string]int64{}, deletedAt: map[string][]int64{}}
	// Records first ('r' sorts among the other tags, so read it on its
	// own).
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

// keyspaceCheck is the state of one CheckInvariants: the index and body
// keys the records call for, the counters they add up to, and what is
// wrong (the first 20 problems).
type keyspaceCheck struct {
	expected map[string]*expectedKey // by key
	counters map[string]int64        // recounted, by counter key
	format   bool                    // the format key was seen
	errs     []error
	records  map[a2a.TaskID]record   // by task, for the log check
	logs     map[a2a.TaskID]*logSpan // the log keys seen, by task
	// deletions and deletedAt are the deletion marks seen, by 'd' key:
	// its value, and the marks of the 'e' keys of its task.
	deletions map[string]int64
	deletedAt map[string][]int64
}

// logSpan is what the check saw of one task's log keys.
type logSpan struct {
	first, n int64
	last     engine.LogEntry
}

// expectedKey is an index or body key a record calls for.
type expectedKey struct {
	id    a2a.TaskID
	kind  string // global, context, owner, owner-context, body
	value []byte // an index key's value: the record's light value
	light []byte // a body's: the light value its task must have
	found int
}

func (c *keyspaceCheck) fail(format string, args ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Errorf(format, args...))
	}
}

// record notes the record under key: the keys it calls for and the
// counters it counts in.
func (c *keyspaceCheck) record(key, value []byte) {
	id := a2a.TaskID(key[1:])
	r, err := decodeRecord(bytes.Clone(value))
	if err != nil {
		c.fail("record %q: %v", id, err)
		return
	}
	if id == "" {
		c.fail("record with empty ID")
	}
	if len(r.light.owner) > engine.MaxOwnerBytes {
		c.fail("record %q: owner of %d bytes", id, len(r.light.owner))
	}
	cur := engine.Cursor{UpdatedAt: r.updatedAt, ID: id}
	c.records[id] = r
	lv := r.light.append(nil)
	for i, k := range indexKeys(r.light.owner, r.light.contextID, r.light.state, cur) {
		c.expected[string(k)] = &expectedKey{id: id, kind: indexKinds[i], value: lv}
	}
	c.expected[string(bodyKey(cur))] = &expectedKey{id: id, kind: "body", light: lv}
	exist, shape := counterKeys(r.light.owner, r.light.contextID, r.light.state)
	for _, k := range append(exist, shape...) {
		c.counters[string(k)]++
	}
}

// key checks one key of the whole keyspace against the records.
func (c *keyspaceCheck) key(key, value []byte) {
	switch key[0] {
	case tagRecord:
	case tagGlobal, tagContext, tagState, tagOwner, tagOwnerCx, tagOwnerSt, tagBody:
		e := c.expected[string(key)]
		if e == nil {
			c.fail("index or body key %x does not match a record", key)
			return
		}
		e.found++
		if e.value != nil && !bytes.Equal(value, e.value) {
			c.fail("%s value of task %q differs from its record", e.kind, e.id)
		}
		if e.light != nil {
			c.body(e, value)
		}
	case tagCounter:
		c.counter(key, value)
	case tagMeta:
		if bytes.Equal(key, zeroFreeKey) {
			return
		}
		v, k := binary.Uvarint(value)
		if !bytes.Equal(key, formatKey) || k != len(value) || v != formatVersion {
			c.fail("meta key %x = %x, want %x = format %d", key, value, formatKey, formatVersion)
		}
		c.format = true
	case tagMarker:
		c.fail("zero-counter marker %x pending (counters.go): a write's counter deletes were not done", key)
	case tagLog:
		c.logKey(key, value)
	case tagDeleted:
		if _, _, err := desckey.DecodeAscending(key[1:]); err != nil || len(value) != 8 {
			c.fail("deletion key %x = %x: malformed", key, value)
			return
		}
		c.deletions[string(key)] = int64(binary.BigEndian.Uint64(value))
	case tagDeletedAt:
		mark, id, err := decodeDeletedAt(key)
		if err != nil {
			c.fail("%v", err)
			return
		}
		c.deletedAt[string(deletedKey(id))] = append(c.deletedAt[string(deletedKey(id))], mark)
	default:
		c.fail("unknown key %x", key)
	}
}

// body checks that a task's body decodes, to a task whose state and
// status time are its record's (its metadata, which the encoding does not
// write in one order, is not compared; its context is not in the body).
func (c *keyspaceCheck) body(e *expectedKey, value []byte) {
	r := c.records[e.id]
	t, err := decodeBody(value, e.id, r.light.contextID)
	if err != nil {
		c.fail("body of task %q: %v", e.id, err)
		return
	}
	if _, known := stateCodes[t.Status.State]; !known {
		c.fail("body of task %q: unknown state %q", e.id, t.Status.State)
		return
	}
	l, err := lightOf(t, r.light.owner)
	if err != nil {
		c.fail("body of task %q: %v", e.id, err)
		return
	}
	l.metadata = r.light.metadata
	if !bytes.Equal(l.append(nil), e.light) {
		c.fail("body of task %q (state %s) differs from its record (state %s)", e.id, t.Status.State, r.light.state)
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
	} else if n == 0 && !globalCounter(key) {
		c.fail("counter %x is a zero-valued key: no task counts in it, it should have been deleted (storage bounded by live tasks)", key)
	}
	delete(c.counters, string(key))
}

// finish reports recounted counters that were not stored, keys the records
// call for that are missing, and a missing format key, with everything
// found before.
func (c *keyspaceCheck) finish() error {
	if !c.format {
		c.fail("no format key")
	}
	// Each remembered deletion has its one time key at its mark.
	for k, mark := range c.deletions {
		if at := c.deletedAt[k]; len(at) != 1 || at[0] != mark {
			c.fail("deletion key %x marked %d has time keys at %v", k, mark, at)
		}
	}
	for k, at := range c.deletedAt {
		if _, ok := c.deletions[k]; !ok {
			c.fail("deletion time keys %v without their deletion key %x", at, k)
		}
	}
	for k, n := range c.counters {
		if n != 0 {
			c.fail("counter %x missing, recount %d", k, n)
		}
	}
	for _, e := range c.expected {
		if e.found != 1 {
			c.fail("task %q has %d %s keys at its cursor, want 1", e.id, e.found, e.kind)
		}
	}
	c.checkLogs()
	return errors.Join(c.errs...)
}

// logKey notes one log key (keys come in order: a task's revisions
// ascending).
func (c *keyspaceCheck) logKey(key, value []byte) {
	id, l, err := decodeLog(key, value)
	if err != nil {
		c.fail("%v", err)
		return
	}
	sp := c.logs[id]
	if sp == nil {
		sp = &logSpan{first: l.Revision}
		c.logs[id] = sp
	}
	sp.n++
	sp.last = l
}

// checkLogs checks K7 on every log seen: consecutive revisions ending at
// its record's, the last entry at its time and state (a trimmed log may
// start anywhere), and no log without its record.
func (c *keyspaceCheck) checkLogs() {
	for id, sp := range c.logs {
		r, ok := c.records[id]
		switch {
		case !ok:
			c.fail("log keys of task %q, which has no record", id)
		case sp.last.Revision-sp.first+1 != sp.n:
			c.fail("task %q: %d log keys for revisions %d..%d", id, sp.n, sp.first, sp.last.Revision)
		case sp.last.Revision != r.revision || sp.last.Time != r.updatedAt || sp.last.State != r.light.state:
			c.fail("task %q: last log entry at revision %d, time %d, state %s; record at %d, %d, %s",
				id, sp.last.Revision, sp.last.Time, sp.last.State, r.revision, r.updatedAt, r.light.state)
		}
	}
}
