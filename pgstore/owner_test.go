package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// O1, O2, O5: CreateOwned records the owner, Create records none, every
// record carries it, no mutation changes it (whatever the metadata says),
// and pages report it per task.
func TestOwnerRecords(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	r := must(t)(s.CreateOwned(ctx, task("a", "c", a2a.TaskStateWorking), "alice"))
	if r.Owner != "alice" {
		t.Fatalf("CreateOwned: owner %q", r.Owner)
	}
	if r := must(t)(s.Create(ctx, task("n", "c", a2a.TaskStateWorking))); r.Owner != "" {
		t.Fatalf("Create: owner %q", r.Owner)
	}
	_, err := s.CreateOwned(ctx, task("a", "c", a2a.TaskStateWorking), "bob")
	wantErr(t, err, engine.ErrAlreadyExists)

	forged := task("a", "d", a2a.TaskStateCompleted)
	forged.Metadata = map[string]any{"a2astore.owner": "bob", "owner": "bob"}
	for name, op := range map[string]func() (engine.Record, error){
		"get":     func() (engine.Record, error) { return s.Get(ctx, "a") },
		"replace": func() (engine.Record, error) { return s.Replace(ctx, forged, 0) },
		"append":  func() (engine.Record, error) { return s.AppendHistory(ctx, "a", msg("m", "x")) },
		"dedup":   func() (engine.Record, error) { return s.AppendHistory(ctx, "a", msg("m", "x")) },
	} {
		if r := must(t)(op()); r.Owner != "alice" {
			t.Fatalf("%s: owner %q, want alice", name, r.Owner)
		}
	}
	must(t)(s.CreateOwned(ctx, task("b", "c", a2a.TaskStateWorking), "bob"))
	if r := must(t)(s.Cancel(ctx, "b")); r.Owner != "bob" {
		t.Fatalf("cancel: owner %q", r.Owner)
	}
	for _, proj := range []engine.Projection{engine.ProjectionFull, engine.ProjectionLight} {
		resp, err := s.List(ctx, &engine.ListRequest{Projection: proj})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.TaskOwners) != len(resp.Tasks) {
			t.Fatalf("%d owners for %d tasks", len(resp.TaskOwners), len(resp.Tasks))
		}
		want := map[a2a.TaskID]string{"a": "alice", "b": "bob", "n": ""}
		for i, tk := range resp.Tasks {
			if resp.TaskOwners[i] != want[tk.ID] {
				t.Fatalf("task %s: owner %q, want %q", tk.ID, resp.TaskOwners[i], want[tk.ID])
			}
		}
	}
	resp, err := s.List(ctx, &engine.ListRequest{Owner: "nobody"})
	if err != nil || resp.TaskOwners == nil || len(resp.TaskOwners) != 0 {
		t.Fatalf("empty page: owners %v, %v", resp.TaskOwners, err)
	}
	checkInvariants(t, s)
}

// O3, O4, O6, T7: owner filters alone and with the others; every page
// and total matches a brute-force filter of the data; totals without a
// status time filter come from the counters. Tokens are not bound to
// owners.
func TestOwnerFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	type row struct {
		id, ctx, owner string
		state          a2a.TaskState
		ts             time.Time
	}
	var rows []row
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 120 {
		r := row{fmt.Sprintf("t%03d", i), fmt.Sprint("c", i%4), []string{"alice", "bob", "carol", ""}[i%7%4],
			churnStates[i%3], base.Add(time.Duration(i) * time.Minute)}
		tk := task(r.id, r.ctx, r.state)
		tk.Status.Timestamp = &r.ts
		must(t)(s.CreateOwned(ctx, tk, r.owner))
		rows = append(rows, r)
	}
	after := base.Add(60 * time.Minute)
	for _, req := range []engine.ListRequest{
		{Owner: "alice"},
		{Owner: "alice", ContextID: "c1"},
		{Owner: "bob", Status: a2a.TaskStateWorking},
		{Owner: "bob", ContextID: "c2", Status: a2a.TaskStateSubmitted},
		{Owner: "carol", StatusTimestampAfter: &after},
		{Owner: "carol", ContextID: "c3", StatusTimestampAfter: &after, Status: a2a.TaskStateCompleted},
		{Owner: "nobody"},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s/%v", req.Owner, req.ContextID, req.Status, req.StatusTimestampAfter != nil), func(t *testing.T) {
			var want []string
			for _, r := range rows {
				if r.owner == req.Owner && (req.ContextID == "" || r.ctx == req.ContextID) &&
					(req.Status == a2a.TaskStateUnspecified || r.state == req.Status) &&
					(req.StatusTimestampAfter == nil || !r.ts.Before(*req.StatusTimestampAfter)) {
					want = append(want, r.id)
				}
			}
			slices.Reverse(want) // created in ID order, so newest (largest ID) first
			req.PageSize, req.IncludeTotalSize = 7, true
			var got []string
			for {
				resp, err := s.List(ctx, &req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.TotalSize != len(want) {
					t.Fatalf("total %d, want %d", resp.TotalSize, len(want))
				}
				counter := req.StatusTimestampAfter == nil
				if counted := resp.Stats.Counted; (counted == 0) != (counter || len(want) == 0) {
					t.Fatalf("counted %d rows (from counters: %v)", counted, counter)
				}
				for i, tk := range resp.Tasks {
					if resp.TaskOwners[i] != req.Owner {
						t.Fatalf("task %s of owner %q in %q's list", tk.ID, resp.TaskOwners[i], req.Owner)
					}
					got = append(got, string(tk.ID))
				}
				if resp.NextPageToken == "" {
					break
				}
				req.PageToken = resp.NextPageToken
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %v, want %v", got, want)
			}
		})
	}
	// T7: alice's token continues a list of bob's tasks from its boundary.
	resp, err := s.List(ctx, &engine.ListRequest{Owner: "alice", PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := engine.DecodeToken(resp.NextPageToken)
	resp, err = s.List(ctx, &engine.ListRequest{Owner: "bob", PageToken: resp.NextPageToken, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range resp.Tasks {
		if resp.TaskOwners[i] != "bob" || resp.TaskCursors[i].Compare(c) <= 0 {
			t.Fatalf("task %s (%q) at %v is not bob's after %v", tk.ID, resp.TaskOwners[i], resp.TaskCursors[i], c)
		}
	}
}

// O1, S8: owners PostgreSQL text cannot hold, or longer than
// engine.MaxOwnerBytes, are ErrInvalidArgument before any SQL runs (the
// pool is closed, so SQL would fail with ErrInternal).
func TestOwnerBadInputBeforeSQL(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	for _, bad := range []string{"a\x00b", "\xff\xfe", "ok\xc3", strings.Repeat("o", engine.MaxOwnerBytes+1)} {
		_, err := s.CreateOwned(ctx, task("t", "c", a2a.TaskStateWorking), bad)
		wantErr(t, err, engine.ErrInvalidArgument)
		_, err = s.List(ctx, &engine.ListRequest{Owner: bad, IncludeTotalSize: true})
		wantErr(t, err, engine.ErrInvalidArgument)
	}
	_, err = s.CreateOwned(ctx, task("t", "c", a2a.TaskStateWorking), "fine")
	wantErr(t, err, engine.ErrInternal)
}

// The longest owner, context and task ID together make an entry of the
// owner+context index larger than a btree page allows when the bytes do
// not compress: PostgreSQL refuses the row (SQLSTATE 54000), which the
// store reports as ErrInvalidArgument — nothing is stored and the counters
// stay exact. Compressible values of the same lengths fit.
func TestOwnerIndexEntryLimit(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	random := func() string {
		b := make([]byte, engine.MaxIDBytes/2)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	id := random()
	_, err := s.CreateOwned(ctx, task(id, random(), a2a.TaskStateWorking), random())
	wantErr(t, err, engine.ErrInvalidArgument)
	_, err = s.Get(ctx, a2a.TaskID(id))
	wantErr(t, err, engine.ErrNotFound)
	long := strings.Repeat("x", engine.MaxIDBytes)
	r := must(t)(s.CreateOwned(ctx, task(long, strings.Repeat("c", engine.MaxIDBytes), a2a.TaskStateWorking), strings.Repeat("o", engine.MaxOwnerBytes)))
	if len(r.Owner) != engine.MaxOwnerBytes {
		t.Fatalf("owner of %d bytes", len(r.Owner))
	}
	checkInvariants(t, s)
}
