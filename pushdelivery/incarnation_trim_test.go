package pushdelivery_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/openfinding"
	"github.com/a2astore/a2astore/pushdelivery"
)

// TestConfigOutlivesTrimmedDeletionMark (SPEC N1, review D; fails): a
// push config saved for a task that is then deleted serves a later task
// created under the same ID once the store has forgotten the deletion
// (TrimLog forgets the marks older than the log retention, which the
// server lets be as short as it likes: -log-retention 1m) before the
// outbox's sweep removed the record (the server sweeps records of
// missing tasks older than 10 minutes, 1000 a minute: a task created
// again in between keeps the record for ever). Incarnation only
// compares marks, and a forgotten mark reads as "never deleted". Open
// (not fixed): it fails; openfinding.Env runs it.
func TestConfigOutlivesTrimmedDeletionMark(t *testing.T) {
	openfinding.Gate(t)
	ctx := context.Background()
	// The wall clock: ConfigStore stamps records with it.
	store := memstore.New(memstore.Options{Log: true})
	defer store.Close()
	outbox := pushdelivery.NewMemory(store, pushdelivery.LocalOptions{})
	cs := pushdelivery.NewConfigStore(outbox, store)
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := store.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Save(ctx, "t1", &a2a.PushConfig{ID: "c", URL: "https://old-owner.example/hook", Token: "old-secret"}); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	marked, err := store.Deleted(ctx, "t1")
	if err != nil || marked == 0 {
		t.Fatalf("deletion mark %d, %v", marked, err)
	}
	// The trimmer's pass once the deletion is older than -log-retention
	// (as short as 1m): its cutoff passes the mark.
	if _, err := store.TrimLog(ctx, marked+1, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, task); err != nil { // a later task under the same ID
		t.Fatal(err)
	}
	cfg, err := cs.Get(ctx, "t1", "c")
	if err == nil {
		t.Fatalf("the deleted task's push config serves the later task: %s (token %q)", cfg.URL, cfg.Token)
	}
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatal(err)
	}
}
