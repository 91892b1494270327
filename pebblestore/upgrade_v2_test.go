package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// writeV2 makes the database in dir on fs a format-2 one holding tasks:
// written by this build, then its status keys deleted and the format key
// set to 2 — and, as a format-2 release opened after an interrupted
// upgrade could leave it, a stale status key of a task gone and one of a
// task at a former cursor.
func writeV2(t *testing.T, fs vfs.FS, dir string) map[a2a.TaskID]string {
	t.Helper()
	s, err := Open(dir, Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateCompleted}
	owners := map[a2a.TaskID]string{}
	for i := range 40 {
		id := a2a.TaskID(fmt.Sprintf("t%02d", i))
		owners[id] = []string{"alice", "bob", ""}[i%3]
		if _, err := s.CreateOwned(ctx, task(string(id), fmt.Sprint("c", i%2), states[i%3]), owners[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawOpen(t, fs, dir, false)
	b := raw.NewBatch()
	_ = b.DeleteRange([]byte{tagState}, []byte{tagState + 1}, nil)
	_ = b.DeleteRange([]byte{tagOwnerSt}, []byte{tagOwnerSt + 1}, nil)
	_ = b.Set(stateKey(a2a.TaskStateWorking, engine.Cursor{UpdatedAt: 1, ID: "gone"}), []byte("stale"), nil)
	_ = b.Set(ownerStateKey("alice", a2a.TaskStateWorking, engine.Cursor{UpdatedAt: 1, ID: "t00"}), []byte("stale"), nil)
	_ = b.Set(formatKey, []byte{2}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	return owners
}

// C7: a format-2 database (no status indexes) is upgraded in place at
// Open: the stale status keys go, every task gets its state key and, with
// an owner, its (owner, state) key, the format becomes 3, and pages by
// status and by owner and status are exact and read PageSize+1 entries.
// With NoUpgrade Open refuses it and changes nothing.
func TestUpgradeFromV2(t *testing.T) {
	fs := vfs.NewMem()
	owners := writeV2(t, fs, "db")
	before := rawKeys(t, fs, "db")
	_, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, NoUpgrade: true})
	if !errors.Is(err, ErrOldFormat) || !errors.Is(err, engine.ErrInternal) || !bytes.Contains([]byte(err.Error()), []byte("format 2")) {
		t.Fatalf("Open with NoUpgrade on format 2: %v; want ErrOldFormat saying format 2", err)
	}
	if after := rawKeys(t, fs, "db"); !mapsEqual(before, after) {
		t.Fatal("a refused Open changed the database")
	}

	log := &recordingLogger{}
	s, err := Open("db", Options{FS: fs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !log.contains("from format 2 to 3") {
		t.Error("no upgrade log line saying from format 2 to 3")
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	if v, _, _ := s.readFormat(); v != formatVersion {
		t.Fatalf("format %d after the upgrade", v)
	}
	ctx := context.Background()
	for _, req := range []engine.ListRequest{
		{Status: a2a.TaskStateInputRequired, PageSize: 3},
		{Owner: "alice", Status: a2a.TaskStateWorking, PageSize: 2},
		{Owner: "bob", Status: a2a.TaskStateInputRequired, PageSize: 2},
	} {
		var want []a2a.TaskID
		for i := 39; i >= 0; i-- {
			id := a2a.TaskID(fmt.Sprintf("t%02d", i))
			st := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateCompleted}[i%3]
			if st == req.Status && (req.Owner == "" || owners[id] == req.Owner) {
				want = append(want, id)
			}
		}
		var got []a2a.TaskID
		for {
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.NextPageToken != "" && resp.Stats.Examined != req.PageSize+1 {
				t.Errorf("%+v: examined %d, want %d (C7)", req, resp.Stats.Examined, req.PageSize+1)
			}
			for _, tk := range resp.Tasks {
				got = append(got, tk.ID)
			}
			if req.PageToken = resp.NextPageToken; req.PageToken == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: %q, want %q", req, got, want)
		}
	}
}
