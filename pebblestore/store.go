package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/loghub"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Clock is the source of storage update times. Default: engine.WallClock.
	Clock engine.Clock
	// FS is the filesystem the database lives on. Default (nil): the
	// operating system's disk (vfs.Default). Tests pass vfs.NewMem(), a
	// crashable vfs.NewCrashableMem() or an errorfs wrapper.
	FS vfs.FS
	// NoSync, when true, acknowledges a mutation once it is in Pebble's
	// write-ahead log buffer, without waiting for fsync. A crash of the
	// process or the machine may then lose the most recent acknowledged
	// mutations (recovery keeps a prefix of them: never a torn mutation, never
	// an index that disagrees with the records). Default (false): every
	// mutation is fsynced before it returns; concurrent mutations share
	// fsyncs.
	NoSync bool
	// CacheBytes is the size of Pebble's block cache. Default (0): 64 MiB.
	CacheBytes int64
	// Logger receives Pebble's informational and error messages. Default:
	// pebble.DefaultLogger. See Store for what happens on a fatal error.
	Logger pebble.Logger
	// Tune, if set, is called with the Pebble options just before the
	// database is opened (benchmarks use it to tune compactions). Default: nil.
	// Changing WALDir there moves the write-ahead log (from where OPTIONS
	// last recorded it); a database whose log is not in the subdirectory
	// wal is not protected by the rollback guard (see the package
	// documentation).
	Tune func(*pebble.Options)
	// Limits bound the tasks the store accepts. Default: engine.Limits{}
	// (the engine's defaults).
	Limits engine.Limits
	// Log keeps the task log (engine.LogStore, K7): l keys written in each
	// revision's batch. Default false: ReadLog fails with
	// engine.ErrLogDisabled and writes cost no log key. A database written
	// with the log may be opened without it: Open then deletes the log it
	// holds (every entry and remembered deletion; dropLog), which the
	// writes made without it would leave wrong. Opened with the log again,
	// a task's log starts at its next write, as after TrimLog.
	Log bool
	// NoUpgrade, when true, makes Open fail with ErrOldFormat on a database
	// of an older format instead of upgrading it in place (see Open); the
	// refused database is left as it was, older releases can open it.
	// Default (false): upgrade. (The repair scan of a format-2 database
	// last opened without the rollback guard runs either way: the format
	// stays 2.)
	NoUpgrade bool
	// UpgradeOwnerKey is the task metadata key whose string value the
	// upgrade from format 1 records as the task's owner: where
	// engine/authz's OwnerPolicy kept owners before stores recorded them.
	// Default: "a2astore.owner", the key OwnerPolicy used by default. A
	// deployment whose OwnerPolicy recorded owners under another key (its
	// former MetadataKey option) must name that key: there
	// "a2astore.owner" was ordinary metadata that any client could set,
	// and the upgrade would give the task to whoever the client named.
	UpgradeOwnerKey string
	// UpgradeWithoutOwners, when true, makes the upgrade from format 1
	// record no owners: every task written before is left without owner.
	// Set it when no OwnerPolicy recorded owners in metadata (then any
	// owner key in metadata was written by clients). It cannot be combined
	// with UpgradeOwnerKey.
	UpgradeWithoutOwners bool // RepairFormat1, when true, makes Open scan a format-2 database for
	// tasks stored in format 1 — written by an a2astore release before
	// format 2, which the store reports as "a format-1 value" — and
	// upgrade them as the upgrade from format 1 does (owners from
	// UpgradeOwnerKey). Open does so by itself for a database last opened
	// without the rollback guard (see the package documentation). It
	// reads every record once.
	RepairFormat1 bool
}

// upgradeOwnerKey is the metadata key the upgrade reads owners from (""
// = none).
func (o *Options) upgradeOwnerKey() (string, error) {
	switch {
	case o.UpgradeWithoutOwners && o.UpgradeOwnerKey != "":
		return "", fmt.Errorf("pebblestore: Options.UpgradeOwnerKey and UpgradeWithoutOwners are both set: %w", engine.ErrInvalidArgument)
	case o.UpgradeWithoutOwners:
		return "", nil
	case o.UpgradeOwnerKey == "":
		return defaultUpgradeOwnerKey, nil
	}
	return o.UpgradeOwnerKey, nil
}

// stripes is the number of per-task write locks.
const stripes = 256

// Store is an engine.Store on a Pebble database.
//
// Writes: each mutation of a task runs its read-modify-write under that
// task's stripe lock (one of 256, chosen by a hash of the ID) and commits all
// of its keys in one batch before releasing it. Different tasks never wait
// for each other, so concurrent Sync commits reach Pebble's commit pipeline
// together and share fsyncs. Counters are merge operands (deltas), so they
// need no read before the write; a write that lowers a counter holds the
// shared side of its counter stripe over the commit, and deletes it once
// zero under the exclusive side (counters.go), so storage stays bounded by
// the live tasks.
//
// Failure: Pebble treats a failed write-ahead-log or MANIFEST write as fatal
// (by default it exits the process) and panics on some I/O errors (a failed
// directory sync). The Store instead marks itself failed: the call that hit
// the error and every later call return engine.ErrInternal, and the
// database must be reopened. Such a failure in a background flush or
// compaction goroutine still panics.
type Store struct {
	db     *pebble.DB
	lock   *pebble.Lock // the directory lock, held until Close
	clock  engine.Clock
	limits engine.Limits
	wo     *pebble.WriteOptions
	seed   maphash.Seed
	logger pebble.Logger
	fs     vfs.FS // the database's file system (Checkpoint)

	// life guards db against Close: calls hold it for reading.
	life struct {
		sync.RWMutex
		closed bool
	}
	failed atomic.Pointer[string] // set by a fatal Pebble error

	locks [stripes]sync.Mutex // per-task read-modify-write locks

	log  bool       // Options.Log
	hub  loghub.Hub // wakes log readers after a write
	trim struct {
		sync.Mutex
		cursor *engine.Cursor // where TrimLog goes on (nil: the oldest task)
	}
	// trimHigh is the highest cutoff a TrimLog has begun with (set before
	// its scan): every cursor it sets is older. A write at a time under
	// it may land where TrimLog no longer looks (untrim, log.go).
	trimHigh atomic.Int64

	// counterLocks guard deleting counters at zero (counters.go) and
	// folding them (counter_fold.go): writers hold the shared side over
	// their commit, a delete or a fold the exclusive side. Taken after
	// task locks, in stripe order.
	counterLocks [counterStripes + globalStripes]sync.RWMutex
	markerSeq    atomic.Uint64 // the last marker's number (counters.go)
	zeros        zeroSweeper   // deletes zero counters (zero_sweeper.go)
	folds        counterFolds  // counters to fold (counter_fold.go)
}

var (
	_ engine.OwnerStore = (*Store)(nil)
	_ engine.Checker    = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir.
//
// A new database is created in format 3 (the current one). A database of
// format 2 (before the status indexes) or 1 (written before stores
// recorded task owners) is upgraded in place before Open returns, unless Options.NoUpgrade is set: then Open
// fails with ErrOldFormat. A database of a format newer than this build's
// fails with ErrNewFormat. See the package documentation.
//
// Open holds Pebble's lock on dir until Close. A database last opened by a
// release without the rollback guard (see the package documentation) is
// scanned for format-1 records first, and Open then moves its write-ahead
// log into dir/wal, which releases before the guard refuse to open.
func Open(dir string, opts Options) (*Store, error) {
	if _, err := opts.upgradeOwnerKey(); err != nil {
		return nil, err
	}
	s := &Store{clock: opts.Clock, limits: opts.Limits, seed: maphash.MakeSeed(), wo: pebble.Sync, log: opts.Log}
	if s.clock == nil {
		s.clock = engine.WallClock
	}
	if opts.NoSync {
		s.wo = pebble.NoSync
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = 64 << 20
	}
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref() // the DB holds its own reference
	base := opts.Logger
	if base == nil {
		base = pebble.DefaultLogger
	}
	s.logger = base
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	s.fs = fs
	lock, err := lockDir(dir, fs)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w: %v: %w", dir, ErrLocked, err, engine.ErrInternal)
	}
	s.lock = lock
	if err := s.open(dir, fs, cache, &opts); err != nil {
		s.life.closed = true
		if s.db != nil && s.failed.Load() == nil {
			_ = s.db.Close()
		}
		// Our reference to the lock; a database that failed fatally
		// keeps its own, so the directory stays locked while it lives.
		_ = lock.Close()
		return nil, err
	}
	s.startZeroSweeper()
	return s, nil
}

// open opens the database in dir (s.db) and checks its format (upgrading
// or repairing it), under the rollback guard (guard.go).
func (s *Store) open(dir string, fs vfs.FS, cache *pebble.Cache, opts *Options) error {
	po := &pebble.Options{
		FS:     fs,
		Cache:  cache,
		Merger: counterMerger,
		Logger: &fatalLogger{base: s.logger, s: s},
		// A corruption found on disk fails the store (calls return
		// ErrInternal) instead of Pebble's default, the logger's Fatalf:
		// reported from a background goroutine (table statistics,
		// compactions), its panic reaches no catch and kills the process.
		EventListener:      &pebble.EventListener{DataCorruption: s.dataCorruption},
		FormatMajorVersion: pebble.FormatNewest,
		Lock:               s.lock,
		WALDir:             walDir,
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if opts.Tune != nil {
		opts.Tune(po)
	}
	target, tuned := po.WALDir, po.WALRecoveryDirs
	internal := func(err error) error {
		return fmt.Errorf("pebblestore: open %s: %v: %w", dir, err, engine.ErrInternal)
	}
	prior, exists, err := recordedWAL(dir, fs)
	if err != nil {
		return internal(fmt.Errorf("read its options: %v", err))
	}
	if exists && resolveStorePath(dir, prior) != resolveStorePath(dir, target) {
		// Last opened without the guard: open it as it was, decide (a
		// refusal changes nothing), note the scan it needs, and close it
		// without writing, so that the guarded Open below has no log
		// to replay (see closeDB).
		if err := setAsideDuplicateLogs(dir, fs, prior, target, s.logger); err != nil {
			return internal(err)
		}
		if err := walOptions(po, tuned, dir, fs, prior, target); err != nil {
			return internal(err)
		}
		if s.db, err = openCatching(dir, po); err != nil {
			return internal(err)
		}
		if _, err := s.checkFormat(dir, opts, true); err != nil {
			return err
		}
		if err := markScan(dir, fs); err != nil {
			return internal(err)
		}
		if err := s.closeDB(); err != nil {
			return internal(err)
		}
	}
	if err := walOptions(po, tuned, dir, fs, target, storePath, prior); err != nil {
		return internal(err)
	}
	if s.db, err = openCatching(dir, po); err != nil {
		return internal(err)
	}
	scan, err := scanMarked(dir, fs)
	if err != nil {
		return internal(err)
	}
	if err := s.openFormat(dir, opts, scan || opts.RepairFormat1); err != nil {
		return err
	}
	if err := s.recoverCounters(dir); err != nil {
		return err
	}
	if !opts.Log {
		if err := s.dropLog(); err != nil {
			return internal(err)
		}
	}
	if scan {
		if err := unmarkScan(dir, fs); err != nil {
			return internal(err)
		}
	}
	return nil
}

// closeDB closes s.db for a reopen. Nothing is written before: Pebble
// v2.1.7 flushes the log it replays during Open, the flush may start a
// compaction, and an Open that then fails (creating its new log) closes
// the file cache under that compaction, which panics in the compaction's
// goroutine. (Flushing here instead is no way out: a failing flush panics
// through Fatalf with Pebble's mutex in a state its deferred unlock
// cannot handle.)
func (s *Store) closeDB() (err error) {
	defer s.catch("open", &err)
	db := s.db
	s.db = nil
	return db.Close()
}

func openCatching(dir string, po *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, ok := storageFailure(r)
			if !ok {
				panic(r)
			}
			db, err = nil, errors.New(msg)
		}
	}()
	return pebble.Open(dir, po)
}

// storageFailure reports whether a panic value is a storage failure Pebble
// raised (a Fatalf, or an I/O error it panics with, such as a failed
// directory sync) rather than a bug: runtime errors and non-error values are
// bugs and keep panicking.
func storageFailure(r any) (string, bool) {
	switch v := r.(type) {
	case fatalError:
		return v.msg, true
	case runtime.Error:
		return "", false
	case error:
		return v.Error(), true
	}
	return "", false
}

// Close waits for in-flight calls, then closes the database. Later calls
// fail with engine.ErrInternal. After a fatal error Close releases nothing
// and reports the error.
func (s *Store) Close() (err error) {
	if msg := s.failed.Load(); msg != nil {
		// Do not wait for in-flight calls: after a fatal error Pebble's
		// commit pipeline may never release them (nor the sweeper).
		s.stopZeroSweeper(false)
		return fmt.Errorf("pebblestore: close after fatal error %q: %w", *msg, engine.ErrInternal)
	}
	// The sweeper first (it does not hold life); what calls in flight
	// queue after it stops is swept below, once they are done.
	s.stopZeroSweeper(true)
	s.life.Lock()
	defer s.life.Unlock()
	if s.life.closed {
		return fmt.Errorf("pebblestore: already closed: %w", engine.ErrInternal)
	}
	s.life.closed = true
	// Our reference to the lock goes whatever happens; the database
	// holds its own until it is closed.
	defer func() {
		if lerr := s.lock.Close(); lerr != nil && err == nil {
			err = fmt.Errorf("pebblestore: close: release the lock: %v: %w", lerr, engine.ErrInternal)
		}
	}()
	if msg := s.failed.Load(); msg != nil {
		return fmt.Errorf("pebblestore: close after fatal error %q: %w", *msg, engine.ErrInternal)
	}
	if err := s.sweepPending(nil); err != nil {
		s.logger.Errorf("pebblestore: close: delete zero counters (Open redoes it): %v", err)
	}
	if msg := s.failed.Load(); msg != nil {
		return fmt.Errorf("pebblestore: close after fatal error %q: %w", *msg, engine.ErrInternal)
	}
	defer s.catch("close", &err)
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %v: %w", err, engine.ErrInternal)
	}
	return nil
}

// enter starts a call: it holds life for reading until the returned
// function runs. It fails when the store is closed or failed.
func (s *Store) enter(op string) (exit func(), err error) {
	s.life.RLock()
	if s.life.closed {
		s.life.RUnlock()
		return nil, fmt.Errorf("pebblestore: %s: store is closed: %w", op, engine.ErrInternal)
	}
	if msg := s.failed.Load(); msg != nil {
		s.life.RUnlock()
		return nil, fmt.Errorf("pebblestore: %s: store failed: %w", op, engine.ErrInternal)
	}
	return s.life.RUnlock, nil
}

// ErrLocked is the error (with engine.ErrInternal) of an Open whose
// directory's lock it could not take: another store, in this process or
// another, holds the directory (or the lock file could not be made).
var ErrLocked = errors.New("pebblestore: cannot lock the directory")

// fatalError is the panic value of fatalLogger.Fatalf.
type fatalError struct{ msg string }

// fatalLogger forwards Infof and Errorf; Fatalf marks the store failed and
// panics with fatalError, which the store's calls recover (catch).
type fatalLogger struct {
	base pebble.Logger
	s    *Store
}

func (l *fatalLogger) Infof(format string, args ...any)  { l.base.Infof(format, args...) }
func (l *fatalLogger) Errorf(format string, args ...any) { l.base.Errorf(format, args...) }
func (l *fatalLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.s.failed.CompareAndSwap(nil, &msg)
	l.base.Errorf("pebblestore: fatal pebble error, store failed: %s", msg)
	panic(fatalError{msg: msg})
}

// dataCorruption marks the store failed when Pebble finds a corruption
// on disk; the read that found it fails too (Pebble returns its error).
func (s *Store) dataCorruption(info pebble.DataCorruptionInfo) {
	msg := fmt.Sprint(info)
	if s.failed.CompareAndSwap(nil, &msg) {
		s.logger.Errorf("pebblestore: data corruption, store failed: %s", msg)
	}
}

// catch turns a storage-failure panic in the calling goroutine into
// ErrInternal and marks the store failed. It must be deferred directly.
func (s *Store) catch(op string, err *error) {
	if r := recover(); r != nil {
		msg, ok := storageFailure(r)
		if !ok {
			panic(r)
		}
		if s.failed.CompareAndSwap(nil, &msg) {
			s.logger.Errorf("pebblestore: %s: storage failure, store failed: %s", op, msg)
		}
		*err = fmt.Errorf("pebblestore: %s: storage failure: %w", op, engine.ErrInternal)
	}
}

// lockFor returns the write lock of a task.
func (s *Store) lockFor(id []byte) *sync.Mutex {
	return &s.locks[s.stripeOf(id)]
}

// stripeOf is the number of a task's write lock.
func (s *Store) stripeOf(id []byte) int { return int(maphash.Bytes(s.seed, id) % stripes) }

// counterMerger sums counter deltas (zigzag varints). A counter that drops
// to zero stays as a zero-valued key: Pebble v2.1.7's compaction iterator
// panics when a DeletableValueMerger asks to drop a merged key, so this
// merger does not implement it.
var counterMerger = &pebble.Merger{
	Name: "a2astore.counter.v1",
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		m := &counterSum{}
		return m, m.MergeNewer(value)
	},
}

type counterSum struct{ n int64 }

func (m *counterSum) MergeNewer(value []byte) error {
	d, k := binary.Varint(value)
	if k <= 0 || k != len(value) {
		return fmt.Errorf("pebblestore: corrupt counter operand %x", value)
	}
	m.n += d
	return nil
}

func (m *counterSum) MergeOlder(value []byte) error { return m.MergeNewer(value) }

func (m *counterSum) Finish(includesBase bool) ([]byte, io.Closer, error) {
	return binary.AppendVarint(nil, m.n), nil, nil
}

func decodeCounter(b []byte) (int64, error) {
	n, k := binary.Varint(b)
	if k <= 0 || k != len(b) {
		return 0, errCorruptValue
	}
	return n, nil
}

func counterDelta(d int64) []byte { return binary.AppendVarint(nil, d) }

// Compact compacts every key of the store into Pebble's bottom levels and
// returns when it is done: after a bulk load, what the LSM settles to under
// a steady write rate (reads seek fewer levels; disk bytes are the store's,
// not its write history's). Writers go on meanwhile.
func (s *Store) Compact(ctx context.Context) error {
	exit, err := s.enter("compact")
	if err != nil {
		return err
	}
	defer exit()
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("pebblestore: compact: %v: %w", err, engine.ErrInternal)
	}
	return nil
}

// Metrics returns Pebble's metrics (disk usage, write amplification, cache
// hit rates) for monitoring. After Close or a fatal error it returns zero
// metrics.
func (s *Store) Metrics() *pebble.Metrics {
	exit, err := s.enter("metrics")
	if err != nil {
		return &pebble.Metrics{}
	}
	defer exit()
	return s.db.Metrics()
}
