package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Standbys is the number of streaming hot standbys of the replicated
// cluster.
const Standbys = 2

// replicaSettings are the primary's settings beside the defaults:
// synchronous commit as PostgreSQL ships it (the throwaway cluster turns
// it off), so an acknowledged commit is flushed and can be streamed at
// once. fsync stays off, so a commit costs a write, not a disk flush.
var replicaSettings = []string{"synchronous_commit=on", "wal_level=replica", "max_wal_senders=8"}

// standbySettings are a standby's: it answers queries while it replays
// and tells the primary which rows its queries still need, so replay
// waits for no query and cancels none.
var standbySettings = []string{"hot_standby=on", "hot_standby_feedback=on", "max_standby_streaming_delay=-1"}

// replicated is the package's replicated cluster, started by the first
// Replicated call, and the lock a test holds while it uses it.
var replicated struct {
	mu  sync.Mutex
	set *ReplicaSet
	err error
	use sync.Mutex
}

// ReplicaSet is a throwaway primary with Standbys streaming hot standbys
// (pg_basebackup -R), each on its own port and socket directory on
// 127.0.0.1, run as the postgres OS user when the tests run as root.
type ReplicaSet struct {
	primary  *cluster
	standbys []*Standby
}

// Standby is one hot standby of a ReplicaSet.
type Standby struct {
	c       *cluster
	primary *cluster
	running bool
}

// Replicated returns the package's replicated cluster, starting it on
// first use (about 3 s), and holds it for tb alone until tb's cleanup:
// tests that use it run one at a time even when parallel, since they
// pause and stop its standbys. At cleanup every standby is started and
// replaying again. It is apart from the cluster DSN uses, so the WAL of
// other tests does not reach its standbys. With A2ASTORE_PG_DSN set
// there is no replicated cluster: tb is skipped (failed under CI=true).
func Replicated(tb testing.TB) *ReplicaSet {
	tb.Helper()
	if os.Getenv(EnvDSN) != "" {
		unavailable(tb, errors.New(EnvDSN+" names an existing server; replicated clusters are started only from PostgreSQL binaries"))
	}
	if !mainCalled.Load() {
		unavailable(tb, errors.New("pgtest.Main was not called from TestMain, so a started cluster could not be stopped"))
	}
	replicated.mu.Lock()
	if replicated.set == nil && replicated.err == nil {
		replicated.set, replicated.err = startReplicaSet()
	}
	set, err := replicated.set, replicated.err
	replicated.mu.Unlock()
	if err != nil {
		unavailable(tb, err)
	}
	replicated.use.Lock()
	tb.Cleanup(func() {
		defer replicated.use.Unlock()
		if err := set.reset(); err != nil {
			tb.Errorf("pgtest: reset standbys: %v", err)
		}
	})
	return set
}

func startReplicaSet() (*ReplicaSet, error) {
	p, err := startCluster(replicaSettings...)
	if err != nil {
		return nil, err
	}
	set := &ReplicaSet{primary: p}
	for i := range Standbys {
		s, err := startStandby(p, i)
		if err != nil {
			set.stop()
			return nil, fmt.Errorf("standby: %w", err)
		}
		set.standbys = append(set.standbys, s)
	}
	return set, nil
}

// startStandby copies primary with pg_basebackup -R (streaming its WAL,
// writing standby.signal and primary_conninfo) and starts the copy, named
// standby<i> (its cluster_name, and so the application_name the primary
// knows it by).
func startStandby(primary *cluster, i int) (*Standby, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	c.settings = append(slices.Clone(standbySettings), fmt.Sprintf("cluster_name=standby%d", i))
	data := filepath.Join(c.dir, "data")
	bb := exec.Command(filepath.Join(bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", primary.sockDir, "-p", strconv.Itoa(primary.port), "-U", "postgres")
	bb.Dir = c.dir
	bb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := bb.CombinedOutput(); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("pg_basebackup: %v: %s", err, out)
	}
	if err := c.startOnFreePort(bin, data, cred); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	return &Standby{c: c, primary: primary, running: true}, nil
}

// copySeq numbers promoted copies (their cluster_name).
var copySeq atomic.Int64

// PromotedCopy copies the set's primary as a standby is made
// (pg_basebackup -R), starts the copy and promotes it (pg_promote): a
// primary on a new timeline, forked off the set's primary where the copy
// ended — what a failover leaves, while the set's primary and its
// standbys go on along the old timeline as an old primary that was not
// fenced would. The copy holds every database the primary had; it is
// stopped and removed at tb's cleanup.
func (r *ReplicaSet) PromotedCopy(tb testing.TB) *Standby {
	tb.Helper()
	s, err := startStandby(r.primary, Standbys+int(copySeq.Add(1)))
	if err != nil {
		tb.Fatalf("pgtest: copy the primary: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.c.stop(); err != nil {
			tb.Errorf("pgtest: stop the promoted copy: %v", err)
		}
	})
	var promoted bool
	if err := s.c.queryRow("SELECT pg_promote(true, 60)", &promoted); err != nil || !promoted {
		tb.Fatalf("pgtest: promote the copy: %v (promoted %v)", err, promoted)
	}
	return s
}

// stop stops every server of the set and removes their directories.
func (r *ReplicaSet) stop() error {
	var errs []error
	for _, s := range r.standbys {
		if s.running {
			errs = append(errs, s.c.stop())
		} else {
			os.RemoveAll(s.c.dir)
		}
	}
	return errors.Join(append(errs, r.primary.stop())...)
}

// reset starts every stopped standby and resumes replay on all.
func (r *ReplicaSet) reset() error {
	for _, s := range r.standbys {
		if !s.running {
			if err := s.start(); err != nil {
				return err
			}
		}
		if err := s.exec("SELECT pg_wal_replay_resume()"); err != nil {
			return err
		}
	}
	return nil
}

// stopReplicated stops the package's replicated cluster (Main).
func stopReplicated() error {
	replicated.mu.Lock()
	defer replicated.mu.Unlock()
	if replicated.set == nil {
		return nil
	}
	err := replicated.set.stop()
	replicated.set = nil
	return err
}

// DSN creates a new, empty database on the primary, dropped at tb's
// cleanup, waits until every running standby has replayed its creation,
// and returns the DSNs of the database on the primary and on each
// standby (in Standby order).
func (r *ReplicaSet) DSN(tb testing.TB) (primary string, standbys []string) {
	tb.Helper()
	name := fmt.Sprintf("a2astore_repl_%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := r.primary.exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.primary.exec("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database: %v", err)
		}
	})
	r.WaitReplayed(tb)
	for _, s := range r.standbys {
		standbys = append(standbys, s.c.dsn(name))
	}
	return r.primary.dsn(name), standbys
}

// SetSynchronous sets the primary's synchronous_standby_names to names
// (standby0, standby1 are the standbys; e.g. "ANY 2 (standby0,
// standby1)") until tb's cleanup: commits then wait for those standbys
// as synchronous_commit says.
func (r *ReplicaSet) SetSynchronous(tb testing.TB, names string) {
	tb.Helper()
	r.SetPrimary(tb, "synchronous_standby_names", names)
	r.waitSyncStates(tb)
}

// SetPrimary sets a reloadable setting of the primary (ALTER SYSTEM and
// a reload) until tb's cleanup, which resets it.
func (r *ReplicaSet) SetPrimary(tb testing.TB, name, value string) {
	tb.Helper()
	set := func(stmt string) error {
		if err := r.primary.exec(stmt); err != nil {
			return err
		}
		return r.primary.exec("SELECT pg_reload_conf()")
	}
	if err := set("ALTER SYSTEM SET " + pgx.Identifier{name}.Sanitize() + " = '" + strings.ReplaceAll(value, "'", "''") + "'"); err != nil {
		tb.Fatalf("pgtest: set %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := set("ALTER SYSTEM RESET " + pgx.Identifier{name}.Sanitize()); err != nil {
			tb.Errorf("pgtest: reset %s: %v", name, err)
		}
	})
}

// waitSyncStates waits until the primary's walsenders report a
// synchronous state for some standby (the reload has reached them).
func (r *ReplicaSet) waitSyncStates(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		err := r.primary.queryRow("SELECT count(*) FROM pg_stat_replication WHERE sync_state <> 'async'", &n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pgtest: no synchronous standby within a minute (last error %v)", err)
		}
		<-tick.C
	}
}

// Standby returns standby i (0 ≤ i < Standbys).
func (r *ReplicaSet) Standby(i int) *Standby { return r.standbys[i] }

// PrimaryAdminDSN is the DSN of the primary's maintenance database.
func (r *ReplicaSet) PrimaryAdminDSN() string { return r.primary.dsn("postgres") }

// WaitReplayed waits (up to a minute) until every running standby whose
// replay is not paused has replayed the primary's WAL up to its insert
// position at the call. It first has the primary flush its WAL (a logged
// message committed synchronously), since standbys receive only flushed
// WAL.
func (r *ReplicaSet) WaitReplayed(tb testing.TB) {
	tb.Helper()
	var lsn, setting string
	if err := r.primary.queryRow("SELECT set_config('synchronous_commit', 'local', true), pg_logical_emit_message(true, 'pgtest', '')::text", &setting, &lsn); err != nil {
		tb.Fatalf("pgtest: primary WAL position: %v", err)
	}
	for _, s := range r.standbys {
		var paused bool
		if !s.running {
			continue
		}
		if err := s.c.queryRow("SELECT pg_get_wal_replay_pause_state() <> 'not paused'", &paused); err != nil {
			tb.Fatalf("pgtest: standby replay state: %v", err)
		}
		if !paused {
			s.waitReplay(tb, lsn)
		}
	}
}

// waitReplay waits until s has replayed up to lsn.
func (s *Standby) waitReplay(tb testing.TB, lsn string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var done bool
		err := s.c.queryRow("SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn", &done)
		if err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("pgtest: standby on port %d has not replayed up to %s within a minute (last error %v)", s.c.port, lsn, err)
		case <-tick.C:
		}
	}
}

// DSN returns the DSN of database name on the standby.
func (s *Standby) DSN(name string) string { return s.c.dsn(name) }

// Port is the standby's TCP port on 127.0.0.1.
func (s *Standby) Port() int { return s.c.port }

// PauseReplay pauses the standby's WAL replay (pg_wal_replay_pause): it
// still answers queries, from data that no longer advances. The test's
// cleanup resumes it.
func (s *Standby) PauseReplay(tb testing.TB) {
	tb.Helper()
	if err := s.exec("SELECT pg_wal_replay_pause()"); err != nil {
		tb.Fatalf("pgtest: pause replay: %v", err)
	}
}

// ResumeReplay resumes the standby's WAL replay.
func (s *Standby) ResumeReplay(tb testing.TB) {
	tb.Helper()
	if err := s.exec("SELECT pg_wal_replay_resume()"); err != nil {
		tb.Fatalf("pgtest: resume replay: %v", err)
	}
}

// Kill stops the standby at once (immediate shutdown: every session is
// cut, nothing is flushed). The test's cleanup starts it again.
func (s *Standby) Kill(tb testing.TB) {
	tb.Helper()
	if !s.running {
		return
	}
	s.c.kill()
	s.running = false
}

// Start starts a killed standby again on its port; it catches up from
// the primary.
func (s *Standby) Start(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatalf("pgtest: start standby: %v", err)
	}
}

func (s *Standby) start() error {
	if s.running {
		return nil
	}
	bin, err := binDir()
	if err != nil {
		return err
	}
	cred, err := runAs()
	if err != nil {
		return err
	}
	if err := s.c.start(bin, filepath.Join(s.c.dir, "data"), cred); err != nil {
		return err
	}
	s.running = true
	return nil
}

// exec runs sql on the standby's maintenance database.
func (s *Standby) exec(sql string) error { return s.c.exec(sql) }

// dsn is the DSN of database name on c.
func (c *cluster) dsn(name string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres sslmode=disable dbname=%s", c.sockDir, c.port, name)
}

// exec runs sql on c's maintenance database.
func (c *cluster) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// queryRow runs sql on c's maintenance database and scans its one row.
func (c *cluster) queryRow(sql string, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// PrimaryPID is the process ID of the primary's postmaster (its backends
// and WAL senders are its children), for measuring the primary's CPU.
func (r *ReplicaSet) PrimaryPID() int { return r.primary.cmd.Process.Pid }

// SetApplyDelay makes the standby apply each commit d after the primary
// made it (recovery_min_apply_delay, set with ALTER SYSTEM and a reload):
// a standby that lags by d while the primary writes. The test's cleanup
// sets it back to 0.
func (s *Standby) SetApplyDelay(tb testing.TB, d time.Duration) {
	tb.Helper()
	set := func(d time.Duration) error {
		if err := s.exec(fmt.Sprintf("ALTER SYSTEM SET recovery_min_apply_delay = '%dms'", d.Milliseconds())); err != nil {
			return err
		}
		return s.exec("SELECT pg_reload_conf()")
	}
	if err := set(d); err != nil {
		tb.Fatalf("pgtest: apply delay: %v", err)
	}
	tb.Cleanup(func() {
		if s.running {
			if err := set(0); err != nil {
				tb.Errorf("pgtest: reset apply delay: %v", err)
			}
		}
	})
}
