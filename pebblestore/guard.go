package pebblestore

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The rollback guard: a release before format 2 must not open a format-2
// database at all. Had it opened one, its Creates would succeed, writing
// format-1 records into the format-2 keyspace, which this build's lists
// and reads then fail on (corrupt value).
//
// Releases before the guard open the database with Pebble's default
// options; the only refusals Pebble's Open makes on options are a
// different comparer or merger name and a different write-ahead log
// directory, each checked against the OPTIONS file of the last Open
// (pebble options.go, CheckCompatibility). Merger and comparer names are
// recorded in every sstable as well, and this Pebble reads sstables only
// under the configured names (sstable/reader.go; the database gives the
// reader no registry of other names), so renaming them would make the
// existing sstables unreadable. The log directory is not: Pebble moves a
// log directory when the previous one is listed as a recovery directory
// (Options.WALRecoveryDirs). So a guarded database keeps its log in the
// subdirectory wal of the store (walDir), recorded in OPTIONS as
// "{store_path}/wal"; a release before the guard opens it with the log in
// the store directory itself and Pebble refuses ("directory ... may
// contain relevant WALs but is not in WALRecoveryDirs") before anything is
// read or written.
//
// Open reads the OPTIONS file first (under the directory lock, which it
// holds until Close, so nothing can open the database in between). A
// database whose OPTIONS does not record walDir was last opened without
// the guard — by a release before it, or by another program — so any
// release may have written format-1 records into it, wherever it stands.
// Open then opens it as it was (its log where OPTIONS says), checks its
// format (a refusal, such as NoUpgrade on format 1, changes nothing and
// leaves it to the older releases), writes the file scanFile, closes it
// without writing anything else, and reopens it with its log in walDir,
// which rewrites OPTIONS. While scanFile exists, Open scans: the upgrade,
// which for a format-2 database is the repair (it rewrites any format-1
// record and leaves format-2 ones as they are); once the scan and the
// format key are done, scanFile is removed. A crash before the reopen
// leaves the database unguarded (scanned at the next Open); after it,
// scanFile makes the next Open scan. Options.RepairFormat1 asks for the
// scan on any Open.

// walDir is the write-ahead log directory of a guarded database, relative
// to the store directory in Pebble's notation.
const walDir = "{store_path}/wal"

// storePath is the store directory in Pebble's notation.
const storePath = "{store_path}"

// resolveStorePath is Pebble's reading of a directory option: the store
// directory for "" or storePath, relative to it after storePath.
func resolveStorePath(dir, p string) string {
	if p == "" {
		return dir
	}
	if rest, ok := strings.CutPrefix(p, storePath); ok {
		return dir + rest
	}
	return p
}

// lockDir creates dir if needed and takes Pebble's lock on it.
func lockDir(dir string, fs vfs.FS) (*pebble.Lock, error) {
	if err := mkdirAllSynced(dir, fs); err != nil {
		return nil, err
	}
	return pebble.LockDirectory(dir, fs)
}

// mkdirAllSynced creates dir and its missing parents, and syncs the parent
// of each directory it creates, so that a store created in new
// directories survives a crash as it does when Pebble creates them (its
// Open syncs only the parent of the store directory once that exists).
func mkdirAllSynced(dir string, fs vfs.FS) error {
	var created []string
	for d := dir; ; d = fs.PathDir(d) {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if fs.PathDir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(fs.PathDir(d), fs); err != nil {
			return err
		}
	}
	return nil
}

// recordedWAL returns the log directory the database in dir was last
// opened with, as its OPTIONS file records it ("" = the store directory),
// and whether a database exists there. A database without OPTIONS file
// counts as opened with the log in the store directory.
func recordedWAL(dir string, fs vfs.FS) (walDir string, exists bool, err error) {
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		return "", false, err
	}
	if !desc.Exists || desc.OptionsFilename == "" {
		return "", desc.Exists, nil
	}
	f, err := fs.Open(desc.OptionsFilename)
	if err != nil {
		return "", true, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", true, err
	}
	return optionsWALDir(string(b)), true, nil
}

// optionsWALDir returns wal_dir of the [Options] section of a Pebble
// OPTIONS file ("" when it has none), read as Pebble reads the file
// (options.go, parseOptions). It reads nothing else: options this build
// does not know, such as a newer Pebble's keys or a user-defined
// compression profile, must not stop an Open, as they do not stop
// Pebble's own (Options.Parse refuses them).
func optionsWALDir(file string) string {
	section := ""
	for line := range strings.Lines(file) {
		line = strings.TrimSpace(line)
		n := len(line)
		switch {
		case n == 0 || line[0] == ';' || line[0] == '#':
		case line[0] == '[' && line[n-1] == ']':
			section = line[1 : n-1]
		case section == "Options" || section == `CFOptions "default"`:
			if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "wal_dir" {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

// walOptions sets po's log directory to walDir and lists as recovery
// directories, besides those tuned (Options.Tune), every other one that
// may hold logs: each of others (log directories of earlier opens) that
// differs from walDir and the tuned ones and exists.
func walOptions(po *pebble.Options, tuned []wal.Dir, dir string, fs vfs.FS, walDir string, others ...string) error {
	po.WALDir = walDir
	po.WALRecoveryDirs = slices.Clone(tuned)
	seen := map[string]bool{resolveStorePath(dir, walDir): true}
	for _, d := range tuned {
		seen[resolveStorePath(dir, d.Dirname)] = true
	}
	for _, o := range others {
		p := resolveStorePath(dir, o)
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := fs.Stat(p); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		po.WALRecoveryDirs = append(po.WALRecoveryDirs, wal.Dir{FS: fs, Dirname: o})
	}
	return nil
}

// scanFile, in the store directory, says that an Open found the database
// last opened without the guard and that the scan it calls for (the
// upgrade, or the repair of a format-2 database) has not completed: the
// next Open scans whatever the options say. Open writes it before the
// guarded reopen and removes it once the scan is done.
const scanFile = "A2ASTORE-SCAN-PENDING"

// markScan creates scanFile, durably.
func markScan(dir string, fs vfs.FS) error {
	f, err := fs.Create(fs.PathJoin(dir, scanFile), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncDir(dir, fs)
}

// scanMarked reports whether scanFile exists.
func scanMarked(dir string, fs vfs.FS) (bool, error) {
	_, err := fs.Stat(fs.PathJoin(dir, scanFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// unmarkScan removes scanFile, durably.
func unmarkScan(dir string, fs vfs.FS) error {
	if err := fs.Remove(fs.PathJoin(dir, scanFile)); err != nil {
		return err
	}
	return syncDir(dir, fs)
}

func syncDir(dir string, fs vfs.FS) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// setAsideDir is the subdirectory of the store directory that receives
// logs set aside by setAsideDuplicateLogs.
const setAsideDir = "wal-set-aside"

// setAsideDuplicateLogs handles a database last opened without the guard
// (its logs in prior) that also has logs in target, the guarded log
// directory: a first guarded Open crashed before it recorded target in
// OPTIONS, and a release before the guard then opened the database. That
// release's log numbers follow its own MANIFEST, so one may repeat the
// number of a log the crashed Open created in target, and Pebble refuses
// to replay two logs of one number. The crashed Open's logs hold nothing
// acknowledged (Pebble writes OPTIONS before its Open returns, and only
// then do writes begin), the older release's do: each log in target whose
// number a log in prior also has is moved to setAsideDir (kept, not
// deleted), durably, and logged.
func setAsideDuplicateLogs(dir string, fs vfs.FS, prior, target string, logger pebble.Logger) error {
	from, to := resolveStorePath(dir, target), resolveStorePath(dir, prior)
	inTarget, err := logNumbers(fs, from)
	if err != nil || len(inTarget) == 0 {
		return err
	}
	inPrior, err := logNumbers(fs, to)
	if err != nil {
		return err
	}
	aside := fs.PathJoin(dir, setAsideDir)
	moved := false
	for num, names := range inTarget {
		if _, dup := inPrior[num]; !dup {
			continue
		}
		if err := mkdirAllSynced(aside, fs); err != nil {
			return err
		}
		for _, name := range names {
			if err := fs.Rename(fs.PathJoin(from, name), fs.PathJoin(aside, name)); err != nil {
				return err
			}
			logger.Infof("pebblestore: %s: log %s repeats a log number of %s (a crashed first Open of this release, then an older release): set aside in %s", dir, name, to, aside)
		}
		moved = true
	}
	if !moved {
		return nil
	}
	return errors.Join(syncDir(from, fs), syncDir(aside, fs))
}

// logNumbers lists the write-ahead logs in dir by number ("000012.log" and
// its failover segments "000012-001.log" share the number 000012); none
// when dir does not exist.
func logNumbers(fs vfs.FS, dir string) (map[string][]string, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	logs := map[string][]string{}
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, ".log"); ok {
			num, _, _ := strings.Cut(base, "-")
			logs[num] = append(logs[num], name)
		}
	}
	return logs, nil
}
