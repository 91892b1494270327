package pebblestore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// BenchmarkBackup is issue 56's backup figure: a Checkpoint (what
// `a2astore-admin backup` takes) of a store of n realistic tasks
// (taskgen: history, an artifact), then opening the copy and checking its
// invariants (what `restore` does after copying the files). One op is one
// backup; the store is loaded once (NoSync) and compacted. Metrics: the
// store's bytes per task, the checkpoint's bytes (hard-linked files
// count: a copy onto another file system writes them all) and the
// blocks it newly allocated on this file system (the linked files cost
// none until compactions replace them), and the open + check time.
// BACKUP_N sets n (default 1e5; the figure is 1e6):
//
//	BACKUP_N=1e6 go test ./pebblestore -run '^$' -bench BenchmarkBackup -benchtime 3x
func BenchmarkBackup(b *testing.B) {
	n := 100_000
	if v := os.Getenv("BACKUP_N"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 {
			b.Fatalf("BACKUP_N=%q: want a task count", v)
		}
		n = int(f)
	}
	dir := benchTempDir(b, fmt.Sprintf("backup-%d-%d", n, time.Now().UnixNano()))
	defer os.RemoveAll(dir)
	s := loadBackupFixture(b, dir+"/store", n)
	defer s.Close()
	b.Run(fmt.Sprintf("backend=pebble/n=%d", n), func(b *testing.B) {
		storeBytes := s.Metrics().DiskSpaceUsage()
		var copyBytes, newBytes int64
		var check time.Duration
		b.ResetTimer()
		for i := range b.N {
			to := fmt.Sprintf("%s/backup-%d-%d", dir, b.N, i)
			if err := s.Checkpoint(to); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			copyBytes, newBytes = treeBytes(b, to)
			t0 := time.Now()
			c, err := Open(to, Options{Logger: pebblelog.Quiet{}})
			if err == nil {
				err = c.CheckInvariants()
				c.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
			check += time.Since(t0)
			os.RemoveAll(to)
			b.StartTimer()
		}
		b.ReportMetric(float64(storeBytes)/float64(n), "store-B/task")
		b.ReportMetric(float64(copyBytes), "copy-B")
		b.ReportMetric(float64(newBytes), "new-B")
		b.ReportMetric(check.Seconds()/float64(b.N), "open+check-s")
	})
}

// loadBackupFixture opens a store in dir and writes n taskgen tasks into
// it, then compacts it.
func loadBackupFixture(b *testing.B, dir string, n int) *Store {
	b.Helper()
	s, err := Open(dir, Options{NoSync: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	gen := taskgen.New(taskgen.Shape{})
	start := time.Now()
	for i := range n {
		if _, err := s.Create(ctx, gen.Task(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d tasks and compacted in %v", n, time.Since(start).Round(time.Millisecond))
	return s
}

// treeBytes returns the bytes of the regular files under dir, and the
// bytes of the blocks allocated to those that have one link only (files
// hard-linked from the store cost no new space).
func treeBytes(b *testing.B, dir string) (size, allocated int64) {
	b.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink == 1 {
			allocated += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size, allocated
}
