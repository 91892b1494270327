package pebblestore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// The format-1 fixture (testdata/format1) was written by the format-1 code
// itself (commit 732c0ca); testdata/format1.md says how. Tests that need
// more format-1 data write the format-1 key layout directly (putV1), and
// TestV1WriterMatchesFixture checks that layout against the fixture.

// copyFixture copies the format-1 fixture into a new directory and returns
// it: the upgrade writes, testdata stays as it is.
func copyFixture(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dir, os.DirFS("testdata/format1")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixtureOwners are the owners the upgrade finds in the fixture's metadata,
// with their tasks in list order; "" lists the tasks left without owner
// (no owner key, a number, an empty string, an owner of 1,100 bytes).
var fixtureOwners = map[string][]a2a.TaskID{
	"alice": {"t15", "t13", "t10", "t\xff07", "t06", "t03", "t01"},
	"bob":   {"t16", "t09", "t02"},
	"carol": {"t11"},
	"":      {"t14", "t08", "t05", "t04"},
}

// rawOpen opens the database in dir on fs with Pebble alone, without
// Open: no format check, no upgrade, no rollback guard; its log where its
// OPTIONS file says it is, so that Pebble's checks pass.
func rawOpen(t testing.TB, fs vfs.FS, dir string, readOnly bool) *pebble.DB {
	t.Helper()
	wal, _, err := recordedWAL(dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Merger: counterMerger, Logger: pebblelog.Quiet{}, ReadOnly: readOnly, WALDir: wal})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// oldOpen opens the database in dir on fs as the releases before the
// rollback guard did (format 1 at commit 732c0ca, and format 2 before the
// guard): Pebble's options with the store's merger, the log in the store
// directory.
func oldOpen(fs vfs.FS, dir string) (*pebble.DB, error) {
	return pebble.Open(dir, &pebble.Options{FS: fs, Merger: counterMerger, Logger: pebblelog.Quiet{},
		FormatMajorVersion: pebble.FormatNewest})
}

// rawKeys returns every key of the database in dir on fs with its value as
// an iterator reads it (counters merged), opened read-only without Open:
// no format check, no upgrade.
func rawKeys(t testing.TB, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	db := rawOpen(t, fs, dir, true)
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	keys := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		keys[string(it.Key())] = string(it.Value())
	}
	return keys
}

// v1Records decodes the format-1 records of keys, with their bodies.
func v1Records(t testing.TB, keys map[string]string) map[a2a.TaskID]engine.Record {
	t.Helper()
	recs := map[a2a.TaskID]engine.Record{}
	for k, v := range keys {
		if k[0] != tagRecord {
			continue
		}
		r, err := decodeRecordWith([]byte(v), decodeLightV1)
		if err != nil {
			t.Fatalf("record %q: %v", k[1:], err)
		}
		cur := engine.Cursor{UpdatedAt: r.updatedAt, ID: a2a.TaskID(k[1:])}
		tk, err := decodeBody([]byte(keys[string(bodyKey(cur))]), cur.ID, r.light.contextID)
		if err != nil {
			t.Fatalf("body of %q: %v", cur.ID, err)
		}
		recs[cur.ID] = engine.Record{Task: tk, Revision: r.revision, Cursor: cur}
	}
	return recs
}

// appendLightV1 appends l in format 1: no version byte, no owner.
func appendLightV1(dst []byte, l *light) []byte {
	dst = append(dst, stateCode(l.state))
	dst = binary.AppendUvarint(dst, uint64(len(l.contextID)))
	dst = append(dst, l.contextID...)
	dst = binary.AppendUvarint(dst, uint64(len(l.statusTS)))
	dst = append(dst, l.statusTS...)
	return append(dst, l.metadata...)
}

// putV1 adds to b the keys format 1 stored for rec: record, global and
// context index values, body, and one count in each format-1 counter.
func putV1(t testing.TB, b *pebble.Batch, rec engine.Record) {
	t.Helper()
	body, err := taskcodec.EncodeTask(rec.Task)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lightOf(rec.Task, "")
	if err != nil {
		t.Fatal(err)
	}
	lv := appendLightV1(nil, &l)
	rv := binary.BigEndian.AppendUint64(binary.AppendUvarint(nil, uint64(rec.Revision)), uint64(rec.Cursor.UpdatedAt))
	_ = b.Set(recordKey(rec.Task.ID), append(rv, lv...), nil)
	_ = b.Set(globalKey(rec.Cursor), lv, nil)
	_ = b.Set(contextKey(l.contextID, rec.Cursor), lv, nil)
	_ = b.Set(bodyKey(rec.Cursor), body, nil)
	exist, shape := counterKeys("", l.contextID, l.state)
	for _, k := range append(exist, shape...) {
		_ = b.Merge(k, counterDelta(+1), nil)
	}
}

// writeV1 writes recs in format 1 into the database in dir on fs (a new
// one: a format-1 database), opened as the format-1 code opened it
// (oldOpen).
func writeV1(t testing.TB, fs vfs.FS, dir string, recs []engine.Record) {
	t.Helper()
	db, err := oldOpen(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for _, r := range recs {
		putV1(t, b, r)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestV1WriterMatchesFixture: putV1 writes what the format-1 code wrote.
// The fixture's records, rewritten by putV1 into a new database, give the
// fixture's keyspace key for key (less the zero counters its deleted task
// left behind).
func TestV1WriterMatchesFixture(t *testing.T) {
	want := rawKeys(t, vfs.Default, copyFixture(t))
	if _, ok := want[string(formatKey)]; ok {
		t.Fatal("the format-1 fixture has a format key")
	}
	for k, v := range want {
		if k[0] == tagCounter && v == string(counterDelta(0)) {
			delete(want, k)
		}
	}
	var recs []engine.Record
	for _, r := range v1Records(t, want) {
		recs = append(recs, r)
	}
	if len(recs) != 15 {
		t.Fatalf("the fixture holds %d tasks, want 15", len(recs))
	}
	fs := vfs.NewMem()
	writeV1(t, fs, "db", recs)
	got := rawKeys(t, fs, "db")
	for k, v := range want {
		if g, w := canonV1(t, k, got[k]), canonV1(t, k, v); g != w {
			t.Errorf("key %x: putV1 wrote %s, the format-1 code %s", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %x: written by putV1 only", k)
		}
	}
}

// canonV1 is a comparable form of the format-1 value v under key:
// taskcodec encodes maps (metadata) in iteration order, so bodies and light
// values compare decoded, the rest byte for byte.
func canonV1(t testing.TB, key, v string) string {
	t.Helper()
	if v == "" {
		return "<none>"
	}
	lightForm := func(b []byte) string {
		l, err := decodeLightV1(b)
		if err != nil {
			t.Fatalf("key %x: %v", key, err)
		}
		md, err := taskcodec.DecodeMetadata(l.metadata)
		if err != nil {
			t.Fatalf("key %x: %v", key, err)
		}
		return fmt.Sprintf("%s %q %x %s", l.state, l.ctx, l.statusTS, canonJSON(md))
	}
	switch key[0] {
	case tagBody:
		tk, err := taskcodec.DecodeTask([]byte(v))
		if err != nil {
			t.Fatalf("key %x: %v", key, err)
		}
		return fmt.Sprintf("%q %q %s", tk.ID, tk.ContextID, canonJSON(tk))
	case tagGlobal, tagContext:
		return lightForm([]byte(v))
	case tagRecord:
		rev, k := binary.Uvarint([]byte(v))
		return fmt.Sprintf("rev %d at %x %s", rev, v[k:k+8], lightForm([]byte(v[k+8:])))
	}
	return fmt.Sprintf("%x", v)
}

// canonJSON is v's JSON: map keys sorted.
func canonJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// recordingLogger keeps Pebble's and the store's log lines.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}
func (l *recordingLogger) Errorf(format string, args ...any) { l.Infof(format, args...) }
func (l *recordingLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (l *recordingLogger) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool { return strings.Contains(line, s) })
}

// checkOwners checks that s lists each owner's tasks (and totals them) as
// want says, with TaskOwners and Get agreeing, and every task once
// unfiltered.
func checkOwners(t testing.TB, s *Store, want map[string][]a2a.TaskID) {
	t.Helper()
	ctx := context.Background()
	all := 0
	for owner, ids := range want {
		all += len(ids)
		for _, id := range ids {
			r, err := s.Get(ctx, id)
			if err != nil || r.Owner != owner {
				t.Errorf("Get(%q): owner %q, %v; want %q", id, r.Owner, err, owner)
			}
		}
		if owner == "" {
			continue
		}
		got, total := listOwners(t, s, engine.ListRequest{Owner: owner})
		if !slices.Equal(taskIDsOf(got), ids) || total != len(ids) {
			t.Errorf("owner %q: %q total %d, want %q", owner, taskIDsOf(got), total, ids)
		}
	}
	got, total := listOwners(t, s, engine.ListRequest{Projection: engine.ProjectionLight})
	if len(got) != all || total != all {
		t.Errorf("unfiltered: %d tasks, total %d; want %d", len(got), total, all)
	}
	for _, to := range got {
		if !slices.Contains(want[to.owner], to.id) {
			t.Errorf("unfiltered: task %q listed with owner %q", to.id, to.owner)
		}
	}
}

// taskOwner is a listed task and its owner.
type taskOwner struct {
	id    a2a.TaskID
	owner string
}

// listOwners traverses req and returns the tasks with their owners, and
// the total of the first page (which must come from a counter unless the
// request filters by status time).
func listOwners(t testing.TB, s *Store, req engine.ListRequest) ([]taskOwner, int) {
	t.Helper()
	var out []taskOwner
	total := -1
	req.PageSize, req.IncludeTotalSize = 100, true
	for {
		resp, err := s.List(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if total < 0 {
			total = resp.TotalSize
			if resp.Stats.Counted != 0 {
				t.Errorf("%+v: the total counted %d entries", req, resp.Stats.Counted)
			}
		}
		for i, tk := range resp.Tasks {
			out = append(out, taskOwner{tk.ID, resp.TaskOwners[i]})
		}
		if resp.NextPageToken == "" {
			return out, total
		}
		req.PageToken, req.IncludeTotalSize = resp.NextPageToken, false
	}
}

func taskIDsOf(tos []taskOwner) []a2a.TaskID {
	out := make([]a2a.TaskID, len(tos))
	for i, to := range tos {
		out[i] = to.id
	}
	return out
}

// TestUpgradeFixture opens the fixture written by the format-1 code: Open
// upgrades it in place, taking owners from the metadata key, and every task
// reads back as before with its owner; lists and totals by owner come from
// the new index and counters; the metadata is left as it was. Opening it
// again does not upgrade again.
func TestUpgradeFixture(t *testing.T) {
	dir := copyFixture(t)
	before := v1Records(t, rawKeys(t, vfs.Default, dir))
	log := &recordingLogger{}
	s, err := Open(dir, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if !log.contains("15 tasks rewritten (11 with an owner; 1 owners over 1024 bytes left unowned)") {
		t.Errorf("no upgrade summary in the log: %q", log.lines)
	}
	mustCheck(t, s)
	checkOwners(t, s, fixtureOwners)
	ctx := context.Background()
	for id, want := range before {
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Revision != want.Revision || got.Cursor != want.Cursor || !sameTask(got.Task, want.Task) {
			t.Errorf("task %q changed in the upgrade: rev %d→%d, cursor %v→%v", id, want.Revision, got.Revision, want.Cursor, got.Cursor)
		}
	}
	if r, _ := s.Get(ctx, "t13"); r.Task.Metadata["a2astore.owner"] != "alice" || r.Task.Metadata["owner"] != "mallory" {
		t.Errorf("t13's metadata after the upgrade: %v", r.Task.Metadata)
	}
	for _, c := range []struct {
		req  engine.ListRequest
		want int
	}{
		{engine.ListRequest{Owner: "alice", ContextID: "ctx-a"}, 3},
		{engine.ListRequest{Owner: "alice", Status: a2a.TaskStateWorking}, 2},
		{engine.ListRequest{Owner: "alice", ContextID: "ctx-a", Status: a2a.TaskStateWorking}, 1},
		{engine.ListRequest{Owner: "bob", ContextID: "ctx-c", Status: a2a.TaskStateCompleted}, 1},
		{engine.ListRequest{Owner: "dave"}, 0}, // his only task was deleted
	} {
		c.req.IncludeTotalSize = true
		resp, err := s.List(ctx, &c.req)
		if err != nil || resp.TotalSize != c.want || len(resp.Tasks) != c.want || resp.Stats.Counted != 0 {
			t.Errorf("%+v: %d tasks, total %d (counted %d), %v; want %d", c.req, len(resp.Tasks), resp.TotalSize, resp.Stats.Counted, err, c.want)
		}
	}
	// The upgraded store works as any other.
	if _, err := s.CreateOwned(ctx, task("t17", "ctx-a", a2a.TaskStateWorking), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, "t01"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log = &recordingLogger{}
	s, err = Open(dir, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if log.contains("upgrading") {
		t.Error("a second Open upgraded again")
	}
	mustCheck(t, s)
	after := maps2(fixtureOwners)
	after["alice"] = append([]a2a.TaskID{"t01", "t17"}, slices.DeleteFunc(after["alice"], func(id a2a.TaskID) bool { return id == "t01" })...)
	checkOwners(t, s, after)
}

// TestUpgradeOwnerKeyOptions: the upgrade reads owners from the key the
// deployment's OwnerPolicy wrote (Options.UpgradeOwnerKey; in the fixture
// only t13 has an "owner" key), or records none (UpgradeWithoutOwners);
// "a2astore.owner" is then ordinary metadata and gives no task an owner.
func TestUpgradeOwnerKeyOptions(t *testing.T) {
	all := slices.Concat(fixtureOwners["alice"], fixtureOwners["bob"], fixtureOwners["carol"], fixtureOwners[""])
	for _, c := range []struct {
		opts Options
		want map[string][]a2a.TaskID
	}{
		{Options{UpgradeOwnerKey: "owner"}, map[string][]a2a.TaskID{
			"mallory": {"t13"}, "": slices.DeleteFunc(slices.Clone(all), func(id a2a.TaskID) bool { return id == "t13" })}},
		{Options{UpgradeWithoutOwners: true}, map[string][]a2a.TaskID{"": all}},
	} {
		t.Run(fmt.Sprintf("%+v", c.opts), func(t *testing.T) {
			c.opts.Logger = pebblelog.Quiet{}
			s, err := Open(copyFixture(t), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mustCheck(t, s)
			checkOwners(t, s, c.want)
			for _, o := range []string{"alice", "bob"} {
				if got, total := listOwners(t, s, engine.ListRequest{Owner: o}); len(got) != 0 || total != 0 {
					t.Errorf("owner %q: %v, total %d", o, taskIDsOf(got), total)
				}
			}
		})
	}
	_, err := Open(copyFixture(t), Options{UpgradeOwnerKey: "owner", UpgradeWithoutOwners: true, Logger: pebblelog.Quiet{}})
	if !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("both options: %v", err)
	}
}

// maps2 copies an owner map.
func maps2(m map[string][]a2a.TaskID) map[string][]a2a.TaskID {
	out := map[string][]a2a.TaskID{}
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// sameTask compares tasks by IDs and JSON.
func sameTask(a, b *a2a.Task) bool {
	return a.ID == b.ID && a.ContextID == b.ContextID && canonJSON(a) == canonJSON(b)
}

// TestUpgradeRefused: with NoUpgrade, Open fails on a format-1 database
// with an error that says what to do, and changes nothing; without it, the
// same database opens.
func TestUpgradeRefused(t *testing.T) {
	dir := copyFixture(t)
	before := rawKeys(t, vfs.Default, dir)
	_, err := Open(dir, Options{NoUpgrade: true, Logger: pebblelog.Quiet{}})
	if !errors.Is(err, ErrOldFormat) || !errors.Is(err, engine.ErrInternal) {
		t.Fatalf("Open with NoUpgrade: %v, want ErrOldFormat (and ErrInternal)", err)
	}
	for _, s := range []string{"format 1", "without Options.NoUpgrade", "back it up"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error %q does not say %q", err, s)
		}
	}
	if after := rawKeys(t, vfs.Default, dir); !mapsEqual(before, after) {
		t.Error("a refused Open changed the database")
	}
	s, err := Open(dir, Options{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkOwners(t, s, fixtureOwners)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFormatVersions: a new database gets the current format; a newer
// format, an unknown one and an unreadable format key fail Open with an
// error that says so, and change nothing.
func TestFormatVersions(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if v, found, err := s.readFormat(); err != nil || !found || v != formatVersion {
		t.Fatalf("new database: format %d, %v, %v; want %d", v, found, err, formatVersion)
	}
	if _, err := s.Create(context.Background(), task("t1", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat := func(v []byte) {
		t.Helper()
		raw := rawOpen(t, fs, "db", false)
		if err := raw.Set(formatKey, v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := raw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		value []byte
		want  error
		says  string
	}{
		{"newer", binary.AppendUvarint(nil, formatVersion+1), ErrNewFormat, "format 4, this build reads format 3"},
		{"unknown", binary.AppendUvarint(nil, 1), engine.ErrInternal, "unknown database format 1"},
		{"unreadable", []byte{0xff}, engine.ErrInternal, "corrupt format key"},
	} {
		setFormat(c.value)
		_, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s format: Open: %v; want %v saying %q", c.name, err, c.want, c.says)
		}
		if got := rawKeys(t, fs, "db")[string(formatKey)]; got != string(c.value) {
			t.Errorf("%s format: Open rewrote the format key to %x", c.name, got)
		}
	}
	setFormat(binary.AppendUvarint(nil, formatVersion))
	s = openStore(t, fs, "db", nil)
	if _, err := s.Get(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
}

// upgradeSet is a format-1 data set for the crash tests: tasks with owners
// in metadata (some binary, some prefixes of others), none, a number, an
// owner over the limit; and what the upgrade must make of it.
func upgradeSet(n int, seed uint64) ([]engine.Record, map[string][]a2a.TaskID) {
	rng := rand.New(rand.NewPCG(seed, 3))
	owners := []any{"alice", "al", "al\x00", "\xff", "bob", nil, 7.0, strings.Repeat("x", engine.MaxOwnerBytes+1)}
	var recs []engine.Record
	want := map[string][]a2a.TaskID{}
	at := map[a2a.TaskID]engine.Cursor{}
	for i := range n {
		id := a2a.TaskID(fmt.Sprintf("u%04d", i))
		tk := task(string(id), fmt.Sprintf("c%d", rng.IntN(4)), states[rng.IntN(len(states))])
		ts := time.UnixMicro(int64(rng.IntN(100))).UTC()
		tk.Status.Timestamp = &ts
		o := owners[rng.IntN(len(owners))]
		if o != nil {
			tk.Metadata = map[string]any{"a2astore.owner": o, "n": float64(i)}
		}
		at[id] = engine.Cursor{UpdatedAt: int64(1000 + i/3), ID: id}
		recs = append(recs, engine.Record{Task: tk, Revision: 1 + int64(rng.IntN(3)), Cursor: at[id]})
		owner, _ := o.(string)
		if len(owner) > engine.MaxOwnerBytes {
			owner = ""
		}
		want[owner] = append(want[owner], id)
	}
	for _, ids := range want {
		slices.SortFunc(ids, func(a, b a2a.TaskID) int { return at[a].Compare(at[b]) })
	}
	return recs, want
}

// withUpgradeChunks runs the test with upgrade batches of size and the
// hook after each.
func withUpgradeChunks(t *testing.T, size int, done func()) {
	oldSize, oldDone := upgradeChunk, upgradeChunkDone
	upgradeChunk, upgradeChunkDone = size, done
	t.Cleanup(func() { upgradeChunk, upgradeChunkDone = oldSize, oldDone })
}

// checkPartialUpgrade checks a database an upgrade was interrupted in:
// each record is format 1 with format-1 index values and no owner keys, or
// format 2 with all its keys, and the owner counters count exactly the
// format-2 records; a format-1 reader (a release before format 2) fails on
// every format-2 value rather than misreading it. It returns how many
// records were upgraded.
func checkPartialUpgrade(t *testing.T, keys map[string]string, owners map[a2a.TaskID]string) int {
	t.Helper()
	counters := map[string]int64{}
	upgraded := 0
	seen := map[string]bool{}
	for k, v := range keys {
		if k[0] != tagRecord {
			continue
		}
		id := a2a.TaskID(k[1:])
		r, err := decodeRecord([]byte(v))
		v2 := err == nil
		if !v2 {
			if r, err = decodeRecordWith([]byte(v), decodeLightV1); err != nil {
				t.Fatalf("record %q is neither format: %v", id, err)
			}
		} else if _, err := decodeRecordWith([]byte(v), decodeLightV1); err == nil {
			t.Fatalf("format-2 record %q reads as format 1", id)
		}
		cur := engine.Cursor{UpdatedAt: r.updatedAt, ID: id}
		owner := owners[id]
		lv := string(appendLightV1(nil, &r.light))
		if v2 {
			upgraded++
			if r.light.owner != owner {
				t.Fatalf("upgraded record %q has owner %q, want %q", id, r.light.owner, owner)
			}
			lv = string(r.light.append(nil))
			if owner != "" {
				exist, shape := ownerCounterKeys(owner, r.light.contextID, r.light.state)
				for _, ck := range append(shape, exist) {
					counters[string(ck)]++
				}
			}
		} else {
			owner = "" // no owner keys yet
		}
		iks := indexKeys(owner, r.light.contextID, r.light.state, cur)
		if !v2 {
			iks = iks[:2] // format 1: global and context keys only
		}
		for _, ik := range iks {
			seen[string(ik)] = true
			if keys[string(ik)] != lv {
				t.Fatalf("record %q (format 2: %v): index key %x holds %x, want %x", id, v2, ik, keys[string(ik)], lv)
			}
		}
	}
	for k, v := range keys {
		switch k[0] {
		case tagOwner, tagOwnerCx, tagState, tagOwnerSt:
			if !seen[k] {
				t.Fatalf("owner index key %x of no upgraded record", k)
			}
		case tagCounter:
			if f := counts(k[1]); f[0] {
				n, _ := decodeCounter([]byte(v))
				if n != counters[k] {
					t.Fatalf("owner counter %x = %d, %d upgraded records count in it", k, n, counters[k])
				}
				delete(counters, k)
			}
		}
	}
	for k, n := range counters {
		t.Fatalf("owner counter %x missing, %d upgraded records count in it", k, n)
	}
	return upgraded
}

// counts returns what a counter kind counts (owner, context, state).
func counts(kind byte) [3]bool {
	for f, k := range counterKinds {
		if k == kind {
			return f
		}
	}
	panic(fmt.Sprintf("unknown counter kind %q", kind))
}

// TestUpgradeCrash interrupts an upgrade after each of its batches with a
// crash (a crash clone of the filesystem keeping a random part of the
// unsynced writes). Every crashed database is a consistent mix of format-1
// and fully upgraded records (checkPartialUpgrade) that no release before
// format 2 can open (the rollback guard), and opening it finishes the
// upgrade: the invariants hold and every owner lists exactly its tasks.
func TestUpgradeCrash(t *testing.T) {
	seed := testSeed(t)
	recs, want := upgradeSet(300, seed)
	owners := map[a2a.TaskID]string{}
	for o, ids := range want {
		for _, id := range ids {
			owners[id] = o
		}
	}
	fs := vfs.NewCrashableMem()
	writeV1(t, fs, "db", recs)
	rng := rand.New(rand.NewPCG(seed, 4))
	// After each batch, two crashes: one keeping every write so far (the
	// upgrade stopped right after the batch), one keeping a random part of
	// the unsynced ones (the batches are not synced: any prefix of them,
	// torn writes included).
	var whole, torn []*vfs.MemFS
	withUpgradeChunks(t, 16, func() {
		whole = append(whole, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(seed, 0))}))
		torn = append(torn, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(seed, uint64(len(torn))))}))
	})
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	checkOwners(t, s, want)
	s.Close()
	if len(whole) != (len(recs)+15)/16 {
		t.Fatalf("%d upgrade batches, want %d", len(whole), (len(recs)+15)/16)
	}
	withUpgradeChunks(t, 16, nil)
	for i, c := range append(whole, torn...) {
		what := fmt.Sprintf("crash after batch %d", i%len(whole)+1)
		if i >= len(whole) {
			what += ", keeping part of the unsynced writes"
		}
		n := checkPartialUpgrade(t, rawKeys(t, c, "db"), owners)
		if i < len(whole) && n != min(16*(i+1), len(recs)) {
			t.Errorf("%s: %d records upgraded, want %d", what, n, min(16*(i+1), len(recs)))
		}
		oldRefuses(t, c, "db", what) // the guard is up before the first batch
		s, err := Open("db", Options{FS: c, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatalf("%s (%d records upgraded): reopen: %v", what, n, err)
		}
		mustCheck(t, s)
		checkOwners(t, s, want)
		s.Close()
		if t.Failed() {
			t.Fatalf("%s (%d records upgraded)", what, n)
		}
	}
}

// walFault fails the k-th write to a write-ahead log file (k from 0), and
// counts those writes. Faults elsewhere would reach Pebble's background
// flush of the log replayed at Open, which panics the process (see Store);
// a WAL write is where an upgrade batch tears.
type walFault struct {
	k int32
	n atomic.Int32
}

func (f *walFault) String() string { return fmt.Sprintf("wal write %d", f.k) }

func (f *walFault) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if f.n.Add(1)-1 == f.k {
		return errorfs.ErrInjected
	}
	return nil
}

// TestUpgradeFaultInjection fails the k-th write to the log of an Open
// that upgrades, for k = 0, 1, 2, … until the upgrade completes without
// reaching the fault. Open must return (an error, or a store), and the
// files left behind, after a crash keeping a random part of the unsynced
// writes, must open on a clean filesystem with the upgrade finished, the
// invariants holding and every owner listing exactly its tasks.
func TestUpgradeFaultInjection(t *testing.T) {
	seed := testSeed(t)
	recs, want := upgradeSet(40, seed)
	base := vfs.NewCrashableMem()
	writeV1(t, base, "db", recs)
	withUpgradeChunks(t, 8, nil)
	rng := rand.New(rand.NewPCG(seed, 5))
	faults := 0
	for k := 0; ; k++ {
		if k > 1000 {
			t.Fatal("the upgrade does not complete")
		}
		mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		inj := &walFault{k: int32(k)}
		if s, err := Open("db", Options{FS: errorfs.Wrap(mem, inj), Logger: pebblelog.Quiet{}}); err == nil {
			_ = s.Close()
		} else {
			faults++
		}
		clean := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, uint64(k)))})
		s, err := Open("db", Options{FS: clean, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatalf("k=%d: reopen on a clean FS: %v", k, err)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("k=%d: invariants after reopen: %v", k, err)
		}
		checkOwners(t, s, want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.Fatalf("k=%d", k)
		}
		if inj.n.Load() <= int32(k) {
			t.Logf("the upgrade completed without a fault at k=%d; %d Opens failed before", k, faults)
			if faults == 0 {
				t.Error("no injected fault failed an Open")
			}
			return
		}
	}
}

// FuzzDecodeLight: the light decoders of both formats never panic, a value
// one of them accepts the other rejects (so a format-1 reader fails on a
// format-2 value rather than misreading it, and the upgrade tells them
// apart), and a decoded value encodes back to one that decodes the same.
func FuzzDecodeLight(f *testing.F) {
	ts := taskcodec.AppendTimestamp(nil, time.Unix(5, 6).UTC())
	md, _ := taskcodec.EncodeMetadata(map[string]any{"a2astore.owner": "alice"})
	for _, l := range []light{
		{state: a2a.TaskStateWorking},
		{contextID: "c\x00", owner: "o\xff", state: a2a.TaskStateCanceled, statusTS: ts, metadata: md},
		{contextID: strings.Repeat("c", 300), owner: strings.Repeat("o", engine.MaxOwnerBytes), state: a2a.TaskStateRejected},
	} {
		f.Add(l.append(nil))
		f.Add(appendLightV1(nil, &l))
	}
	f.Add([]byte{lightV2})
	f.Add([]byte{lightV2, 2, 0x80, 0x00, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l2, err2 := decodeLight(b)
		l1, err1 := decodeLightV1(b)
		if err1 == nil && err2 == nil {
			t.Fatalf("%x decodes in both formats", b)
		}
		check := func(l light, decode func([]byte) (light, error), encode func(*light) []byte) {
			l.contextID, l.owner = string(l.ctx), string(l.ownerRaw)
			again, err := decode(encode(&l))
			if err != nil {
				t.Fatalf("%x: its re-encoding does not decode: %v", b, err)
			}
			if again.state != l.state || string(again.ctx) != string(l.ctx) || string(again.ownerRaw) != string(l.ownerRaw) ||
				string(again.statusTS) != string(l.statusTS) || string(again.metadata) != string(l.metadata) {
				t.Fatalf("%x: decodes differently once re-encoded", b)
			}
		}
		if err2 == nil {
			check(l2, decodeLight, func(l *light) []byte { return l.append(nil) })
		}
		if err1 == nil {
			check(l1, decodeLightV1, func(l *light) []byte { return appendLightV1(nil, l) })
		}
	})
}
