package main

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pebblestore"
)

var backupSeed = flag.Uint64("backup.seed", 0, "seed of TestBackupUnderLoadgen's load (0: from the time)")

// ack is one write the source acknowledged, numbered in the order the
// acknowledgements came back: a task's record as it returned it (content
// in canonTask's form) or, with rev 0, its delete.
type ack struct {
	seq    int
	rev    int64
	cursor engine.Cursor
	owner  string
	task   string
}

// ackStore is the Pebble store handed to load.Run, recording every write
// it acknowledges. Embedding keeps every interface load.Run and its
// decorators look for (OwnerStore, ConditionalStore, Importer, LogStore,
// Checker, io.Closer); every write method is wrapped. The write whose
// acknowledgement is number holdAt is held, applied but not yet
// returned, until release is closed: the run cannot end before then.
type ackStore struct {
	*pebblestore.Store
	t       testing.TB
	holdAt  int
	held    chan struct{} // closed when the held write is waiting
	release chan struct{}

	mu   sync.Mutex
	n    int
	acks map[a2a.TaskID][]ack
}

func (a *ackStore) add(id a2a.TaskID, rec *engine.Record) {
	a.mu.Lock()
	a.n++
	n, x := a.n, ack{seq: a.n}
	if rec != nil {
		if rec.Task == nil {
			a.t.Errorf("task %s: a write returned no task to record", id)
		} else {
			x.rev, x.cursor, x.owner, x.task = rec.Revision, rec.Cursor, rec.Owner, canonTask(rec.Task)
		}
	}
	a.acks[id] = append(a.acks[id], x)
	a.mu.Unlock()
	if n == a.holdAt {
		close(a.held)
		<-a.release
	}
}

func (a *ackStore) rec(rec engine.Record, err error) (engine.Record, error) {
	if err == nil {
		a.add(rec.Task.ID, &rec)
	}
	return rec, err
}

func (a *ackStore) del(id a2a.TaskID, err error) error {
	if err == nil {
		a.add(id, nil)
	}
	return err
}

// count is the number of writes acknowledged so far.
func (a *ackStore) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func (a *ackStore) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	return a.rec(a.Store.Create(ctx, task))
}

func (a *ackStore) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	return a.rec(a.Store.CreateOwned(ctx, task, owner))
}

func (a *ackStore) Replace(ctx context.Context, task *a2a.Task, rev int64) (engine.Record, error) {
	return a.rec(a.Store.Replace(ctx, task, rev))
}

func (a *ackStore) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return a.rec(a.Store.Cancel(ctx, id))
}

func (a *ackStore) CancelIf(ctx context.Context, id a2a.TaskID, rev int64) (engine.Record, error) {
	return a.rec(a.Store.CancelIf(ctx, id, rev))
}

func (a *ackStore) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	return a.rec(a.Store.AppendHistory(ctx, id, msg))
}

func (a *ackStore) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, rev int64) (engine.Record, error) {
	return a.rec(a.Store.AppendHistoryIf(ctx, id, msg, rev))
}

func (a *ackStore) Delete(ctx context.Context, id a2a.TaskID) error {
	return a.del(id, a.Store.Delete(ctx, id))
}

func (a *ackStore) DeleteIf(ctx context.Context, id a2a.TaskID, rev int64) error {
	return a.del(id, a.Store.DeleteIf(ctx, id, rev))
}

func (a *ackStore) Import(ctx context.Context, tasks []engine.StoredTask) error {
	err := a.Store.Import(ctx, tasks)
	if err == nil {
		for i := range tasks {
			a.add(tasks[i].Task.ID, &tasks[i].Record)
		}
	}
	return err
}

// TestBackupUnderLoadgen (X1): a backup of a Pebble store taken while a
// loadgen write-heavy run (owners; creates, replaces, appends, cancels,
// deletes) writes to it — the store's Checkpoint, as a2astore-server's
// backup takes it — restores with a2astore-admin restore into a store
// that passes a2astore-admin check and serves a state the source had at
// the checkpoint: every task, in list order, at a revision the source
// acknowledged with that revision's cursor, owner and content and its log
// ending there; every write acknowledged before the checkpoint began
// there (the task at that revision or a later one, or gone when that
// write was its delete, or when a delete of it was acknowledged later: it
// may have been applied before the checkpoint and acknowledged after). One write is held unacknowledged across the
// checkpoint, so the run is still writing through it and after it.
func TestBackupUnderLoadgen(t *testing.T) {
	seed := *backupSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -backup.seed=%d)", seed, seed)
	const initial = 300
	dir := t.TempDir()
	src, bk, dst := filepath.Join(dir, "src"), filepath.Join(dir, "bk"), filepath.Join(dir, "dst")
	s, err := pebblestore.Open(src, pebblestore.Options{Log: true, NoSync: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acks := &ackStore{Store: s, t: t, holdAt: initial + 250, held: make(chan struct{}), release: make(chan struct{}),
		acks: map[a2a.TaskID][]ack{}}
	var (
		res    *load.Result
		runErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		res, runErr = load.Run(context.Background(), load.Config{Store: acks, Target: "pebble", Initial: initial, Ops: 1500,
			Workload: "write-heavy", Callers: 5, Concurrency: 4, Seed: seed, Shape: taskgen.Shape{Contexts: 20}})
	}()
	select {
	case <-acks.held:
	case <-done:
		t.Fatalf("the run ended after %d writes, before the checkpoint: %v", acks.count(), runErr)
	}
	before := acks.count() // every write acknowledged before the checkpoint began
	if err := s.Checkpoint(bk); err != nil {
		close(acks.release)
		<-done
		t.Fatal(err)
	}
	close(acks.release)
	<-done
	if runErr != nil {
		t.Fatal(runErr)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("the loadgen run: %v", err)
	}
	if after := acks.count() - before; after < 100 {
		t.Fatalf("only %d writes acknowledged once the checkpoint began: the load did not go on", after)
	}

	mustAdmin(t, "restore", "-from", bk, "-pebble-dir", dst)
	if out := mustAdmin(t, "check", "-backend", "pebble", "-pebble-dir", dst); !strings.Contains(out, "ok    invariants") {
		t.Fatalf("check says:\n%s", out)
	}
	r, err := pebblestore.Open(dst, pebblestore.Options{Log: true, NoUpgrade: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := restoredAcked(t, r, acks.acks)
	deletes, kept, racing := 0, 0, 0
	for id, xs := range acks.acks {
		f := fateAt(xs, before)
		switch got, ok := seen[id]; {
		case !f.acked:
		case f.deleted && ok:
			t.Errorf("task %s, deleted before the checkpoint began, is in the backup at revision %d", id, got)
		case f.deleted:
			deletes++
		case !ok && f.deletedLater:
			racing++
		case !ok:
			t.Errorf("task %s, at revision %d before the checkpoint began and never deleted since, is not in the backup", id, f.rev)
		case got < f.rev:
			t.Errorf("task %s at revision %d in the backup; revision %d was acknowledged before the checkpoint began", id, got, f.rev)
		default:
			kept++
		}
	}
	if deletes == 0 || kept == 0 {
		t.Fatalf("nothing to tell: %d deletes and %d tasks acknowledged before the checkpoint", deletes, kept)
	}
	t.Logf("%d writes, %d before the checkpoint; the backup holds %d tasks (%d from before it), %d deleted before it, %d deleted by a write acknowledged during or after it and absent",
		acks.count(), before, len(seen), kept, deletes, racing)
}

// fate is what a task's acknowledgements say of it at a checkpoint.
type fate struct {
	acked        bool  // a write of it was acknowledged before the checkpoint began
	deleted      bool  // its delete was
	rev          int64 // the highest revision that was
	deletedLater bool  // its delete was acknowledged later: it may have been applied before
}

// fateAt reads xs, one task's acknowledgements, against the checkpoint
// that began after the first before of all. Acknowledgements of one task
// by different workers may come back in another order than their writes
// were applied (a replace applied before a delete can be acknowledged
// after it), so the task's state is read from what they say — its highest
// revision, and a delete ends it (loadgen never reuses an ID) — not from
// the last to come back.
func fateAt(xs []ack, before int) fate {
	var f fate
	for _, x := range xs {
		switch {
		case x.seq > before:
			f.deletedLater = f.deletedLater || x.rev == 0
		case x.rev == 0:
			f.acked, f.deleted = true, true
		default:
			f.acked, f.rev = true, max(f.rev, x.rev)
		}
	}
	return f
}

// restoredAcked walks the store r in list order and fails unless every
// task is at a revision acks holds, with its cursor (strictly after the
// one before), owner and content, and its log ends at that revision. It
// returns each task's revision.
func restoredAcked(t *testing.T, r *pebblestore.Store, acks map[a2a.TaskID][]ack) map[a2a.TaskID]int64 {
	t.Helper()
	ctx := t.Context()
	seen := map[a2a.TaskID]int64{}
	var prev *engine.Cursor
	req := &engine.ListRequest{PageSize: engine.MaxPageSize, IncludeArtifacts: true}
	for {
		page, err := r.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, task := range page.Tasks {
			got, err := r.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			var want *ack
			for j, x := range acks[task.ID] {
				if x.rev == got.Revision {
					want = &acks[task.ID][j]
				}
			}
			switch {
			case want == nil:
				t.Fatalf("task %s at revision %d, which the source never acknowledged", task.ID, got.Revision)
			case got.Cursor != want.cursor || page.TaskCursors[i] != want.cursor || got.Owner != want.owner ||
				canonTask(got.Task) != want.task || canonTask(task) != want.task:
				t.Fatalf("task %s revision %d differs from the source's:\n got %+v %q %s\nwant %+v %q %s",
					task.ID, got.Revision, got.Cursor, got.Owner, canonTask(got.Task), want.cursor, want.owner, want.task)
			case prev != nil && prev.Compare(want.cursor) >= 0:
				t.Fatalf("list order: %+v before %+v", *prev, want.cursor)
			}
			prev = &want.cursor
			seen[task.ID] = got.Revision
			logs, err := r.ReadLog(ctx, task.ID, got.Revision-1, 2)
			if err != nil || len(logs) != 1 || logs[0].Revision != got.Revision {
				t.Fatalf("task %s's log in the backup does not end at revision %d: %+v %v", task.ID, got.Revision, logs, err)
			}
		}
		if page.NextPageToken == "" {
			return seen
		}
		req.PageToken = page.NextPageToken
	}
}

// TestFateAt: a replace acknowledged after the delete that followed it
// (the CI failure of stop 60: seq 350 deleted task-000000097, seq 370
// acknowledged its revision 3) leaves the task deleted; a revision
// acknowledged before a lower one counts as the task's.
func TestFateAt(t *testing.T) {
	xs := []ack{{seq: 98, rev: 1}, {seq: 315, rev: 2}, {seq: 350}, {seq: 370, rev: 3}}
	if f := fateAt(xs, 560); !f.deleted || !f.acked || f.deletedLater {
		t.Errorf("deleted before, acknowledged out of order: %+v", f)
	}
	xs = []ack{{seq: 1, rev: 1}, {seq: 5, rev: 3}, {seq: 6, rev: 2}, {seq: 9}}
	if f := fateAt(xs, 6); f.deleted || f.rev != 3 || !f.deletedLater {
		t.Errorf("revision 3 before revision 2, deleted after: %+v", f)
	}
	if f := fateAt(xs[3:], 6); f.acked {
		t.Errorf("only a later delete: %+v", f)
	}
}
