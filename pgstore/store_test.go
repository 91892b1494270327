package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open returns a store on a fresh database, and the database's DSN.
func open(t testing.TB) (*pgstore.Store, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

func task(id, contextID string, state a2a.TaskState) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: contextID, Status: a2a.TaskStatus{State: state}}
}

func msg(id, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID = id
	return m
}

// matches reports whether tk passes req's filters.
func matches(t testing.TB, req engine.ListRequest, tk *a2a.Task) bool {
	t.Helper()
	q, err := engine.ParseListRequest(&req)
	if err != nil {
		t.Fatal(err)
	}
	return listpage.Matches(&q, "", tk.ContextID, tk.Status.State, tk.Status.Timestamp)
}

// must(t)(store.Op(...)) returns the record or fails t.
func must(t testing.TB) func(engine.Record, error) engine.Record {
	return func(r engine.Record, err error) engine.Record {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)

	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	in := task("t1", "c1", a2a.TaskStateWorking)
	in.Status.Timestamp = &ts
	in.Status.Message = msg("sm", "status")
	in.Metadata = map[string]any{"k": "v\x00nul"}
	in.Artifacts = []*a2a.Artifact{{ID: "a1", Parts: a2a.ContentParts{a2a.NewTextPart("art")}}}
	in.History = []*a2a.Message{msg("m1", "hello")}

	r1 := must(t)(s.Create(ctx, in))
	if r1.Revision != 1 || r1.Cursor.ID != "t1" || r1.Cursor.UpdatedAt <= 0 {
		t.Fatalf("create record = %+v", r1)
	}
	_, err := s.Create(ctx, in)
	wantErr(t, err, engine.ErrAlreadyExists)

	g := must(t)(s.Get(ctx, "t1"))
	if g.Revision != 1 || g.Cursor != r1.Cursor {
		t.Fatalf("get = %+v, want revision 1 at %+v", g, r1.Cursor)
	}
	if !g.Task.Status.Timestamp.Equal(ts) || g.Task.Status.Message.ID != "sm" ||
		g.Task.Metadata["k"] != "v\x00nul" || len(g.Task.Artifacts) != 1 || g.Task.Artifacts[0].ID != "a1" ||
		len(g.Task.History) != 1 || g.Task.History[0].ID != "m1" || g.Task.ContextID != "c1" {
		t.Fatalf("round trip lost data: %+v", g.Task)
	}
	// L9: the returned task is a copy.
	g.Task.History = nil
	if g2 := must(t)(s.Get(ctx, "t1")); len(g2.Task.History) != 1 {
		t.Fatal("mutating a returned task changed the store")
	}

	// S7: conditional replace.
	in.Metadata = nil
	_, err = s.Replace(ctx, in, 5)
	wantErr(t, err, engine.ErrRevisionConflict)
	r2 := must(t)(s.Replace(ctx, in, 1))
	if r2.Revision != 2 || r2.Cursor.UpdatedAt <= r1.Cursor.UpdatedAt || r2.Task.Metadata != nil {
		t.Fatalf("replace record = %+v after %+v", r2, r1)
	}
	r3 := must(t)(s.Replace(ctx, in, 0))
	if r3.Revision != 3 || r3.Cursor.UpdatedAt <= r2.Cursor.UpdatedAt {
		t.Fatalf("unconditional replace = %+v", r3)
	}
	_, err = s.Replace(ctx, task("missing", "", a2a.TaskStateWorking), 0)
	wantErr(t, err, engine.ErrNotFound)

	// S3: a deduplicated append changes nothing; a new one advances.
	r4 := must(t)(s.AppendHistory(ctx, "t1", msg("m1", "again")))
	if r4.Revision != 3 || r4.Cursor != r3.Cursor || len(r4.Task.History) != 1 {
		t.Fatalf("duplicate append changed the task: %+v", r4)
	}
	r5 := must(t)(s.AppendHistory(ctx, "t1", msg("m2", "second")))
	if r5.Revision != 4 || r5.Cursor.UpdatedAt <= r3.Cursor.UpdatedAt || len(r5.Task.History) != 2 || r5.Task.History[1].ID != "m2" {
		t.Fatalf("append = %+v", r5)
	}
	_, err = s.AppendHistory(ctx, "missing", msg("m", "x"))
	wantErr(t, err, engine.ErrNotFound)
	_, err = s.AppendHistory(ctx, "t1", nil)
	wantErr(t, err, engine.ErrInvalidArgument)

	// S9: cancel sets state, status timestamp = new time, clears the message.
	r6 := must(t)(s.Cancel(ctx, "t1"))
	if r6.Revision != 5 || r6.Task.Status.State != a2a.TaskStateCanceled || r6.Task.Status.Message != nil ||
		r6.Task.Status.Timestamp == nil || r6.Task.Status.Timestamp.UnixMicro() != r6.Cursor.UpdatedAt ||
		r6.Task.Status.Timestamp.Nanosecond()%1000 != 0 || r6.Cursor.UpdatedAt <= r5.Cursor.UpdatedAt {
		t.Fatalf("cancel = %+v status %+v", r6, r6.Task.Status)
	}
	_, err = s.Cancel(ctx, "t1")
	wantErr(t, err, engine.ErrNotCancelable)
	if g := must(t)(s.Get(ctx, "t1")); g.Revision != 5 || g.Cursor != r6.Cursor {
		t.Fatalf("rejected cancel changed the task: %+v", g)
	}
	_, err = s.Cancel(ctx, "missing")
	wantErr(t, err, engine.ErrNotFound)

	// Replace is allowed on terminal tasks (S7).
	in.Status.State = a2a.TaskStateCompleted
	must(t)(s.Replace(ctx, in, 5))

	if err := s.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Delete(ctx, "t1"), engine.ErrNotFound)
	_, err = s.Get(ctx, "t1")
	wantErr(t, err, engine.ErrNotFound)
}

// S8, T4: input PostgreSQL cannot hold is rejected before any SQL runs. The
// store's pool is closed, so any SQL would fail with ErrInternal instead.
func TestBadInputBeforeSQL(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()

	for _, bad := range []string{"a\x00b", "\xff\xfe", "ok\xc3"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			_, err := s.Create(ctx, task(bad, "c", a2a.TaskStateWorking))
			wantErr(t, err, engine.ErrInvalidArgument)
			_, err = s.Create(ctx, task("ok", bad, a2a.TaskStateWorking))
			wantErr(t, err, engine.ErrInvalidArgument)
			_, err = s.Replace(ctx, task(bad, "c", a2a.TaskStateWorking), 0)
			wantErr(t, err, engine.ErrInvalidArgument)
			_, err = s.Get(ctx, a2a.TaskID(bad))
			wantErr(t, err, engine.ErrInvalidArgument)
			_, err = s.Cancel(ctx, a2a.TaskID(bad))
			wantErr(t, err, engine.ErrInvalidArgument)
			_, err = s.AppendHistory(ctx, a2a.TaskID(bad), msg("m", "x"))
			wantErr(t, err, engine.ErrInvalidArgument)
			wantErr(t, s.Delete(ctx, a2a.TaskID(bad)), engine.ErrInvalidArgument)
			_, err = s.List(ctx, &engine.ListRequest{ContextID: bad})
			wantErr(t, err, engine.ErrInvalidArgument)

			tok := engine.EncodeToken(engine.Cursor{UpdatedAt: 1, ID: a2a.TaskID(bad)})
			_, err = s.List(ctx, &engine.ListRequest{PageToken: tok})
			if err != engine.ErrInvalidPageToken {
				t.Fatalf("token with ID %q: error = %v, want exactly ErrInvalidPageToken", bad, err)
			}
		})
	}
	// The closed pool really fails SQL, so the checks above are meaningful.
	_, err = s.Get(ctx, "fine")
	wantErr(t, err, engine.ErrInternal)
	if strings.Contains(err.Error(), "closed") {
		t.Fatalf("driver text leaked into the error: %q", err)
	}
}

// T4: every int64 µs time fits timestamptz, so the largest token pages from
// the top; a time of 0 pages nothing.
func TestTokenTimeRange(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	for i := range 3 {
		must(t)(s.Create(ctx, task(fmt.Sprint("t", i), "c", a2a.TaskStateWorking)))
	}
	resp, err := s.List(ctx, &engine.ListRequest{PageToken: engine.EncodeToken(engine.Cursor{UpdatedAt: math.MaxInt64, ID: "\U0010FFFF"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 3 {
		t.Fatalf("MaxInt64 boundary: got %d tasks, want 3", len(resp.Tasks))
	}
	resp, err = s.List(ctx, &engine.ListRequest{PageToken: engine.EncodeToken(engine.Cursor{UpdatedAt: 0, ID: "a"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 0 || resp.NextPageToken != "" {
		t.Fatalf("boundary at time 0: got %d tasks", len(resp.Tasks))
	}
}

// L2: StatusTimestampAfter compares at nanosecond precision, >=.
func TestStatusTimestampNanos(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	base := time.Date(2030, 1, 1, 0, 0, 0, 500, time.UTC)
	for i, d := range []time.Duration{-1, 0, 1, 999, 1000} {
		ts := base.Add(d)
		tk := task(fmt.Sprint("t", i), "c", a2a.TaskStateWorking)
		tk.Status.Timestamp = &ts
		must(t)(s.Create(ctx, tk))
	}
	must(t)(s.Create(ctx, task("no-ts", "c", a2a.TaskStateWorking)))
	for _, tc := range []struct {
		after time.Time
		want  int
	}{
		{base, 4}, {base.Add(1), 3}, {base.Add(1000), 1}, {base.Add(1001), 0}, {base.Add(-1), 5},
		{time.Date(-20000, 1, 1, 0, 0, 0, 0, time.UTC), 5}, {time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		checkAfter(t, s, tc.after, tc.want)
	}
}

// L1–L7: a traversal in small pages sees every task once, in order, with
// filters and totals; light pages carry no body.
func TestTraversal(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	const n = 230
	for i := range n {
		tk := task(fmt.Sprintf("t%03d", i), fmt.Sprint("c", i%3), a2a.TaskStateWorking)
		if i%4 == 0 {
			tk.Status.State = a2a.TaskStateCompleted
		}
		tk.History = []*a2a.Message{msg(fmt.Sprint("m", i), "a"), msg(fmt.Sprint("n", i), "b")}
		tk.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("x")}}}
		must(t)(s.Create(ctx, tk))
	}
	one := 1
	for _, tc := range []struct {
		name string
		req  engine.ListRequest
		want int
	}{
		{"all", engine.ListRequest{}, n},
		{"context", engine.ListRequest{ContextID: "c1"}, 77},
		{"state", engine.ListRequest{Status: a2a.TaskStateCompleted}, 58},
		{"context+state", engine.ListRequest{ContextID: "c0", Status: a2a.TaskStateCompleted}, 20},
		{"light", engine.ListRequest{Projection: engine.ProjectionLight}, n},
		{"history1", engine.ListRequest{HistoryLength: &one, IncludeArtifacts: true}, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.PageSize = 7
			req.IncludeTotalSize = true
			seen := map[a2a.TaskID]bool{}
			var last *engine.Cursor
			pages := 0
			for {
				resp, err := s.List(ctx, &req)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Stats
				pages++
				if resp.TotalSize != tc.want || st.Counted != tc.want || !st.TotalComputed {
					t.Fatalf("total %d (counted %d), want %d", resp.TotalSize, st.Counted, tc.want)
				}
				if len(resp.TaskCursors) != len(resp.Tasks) {
					t.Fatal("cursors not aligned")
				}
				if st.Examined != len(resp.Tasks)+btoi(resp.NextPageToken != "") {
					t.Fatalf("examined %d rows for %d tasks", st.Examined, len(resp.Tasks))
				}
				for i, tk := range resp.Tasks {
					c := resp.TaskCursors[i]
					if c.ID != tk.ID || seen[tk.ID] || (last != nil && last.Compare(c) >= 0) {
						t.Fatalf("order broken at %v after %v", c, last)
					}
					seen[tk.ID] = true
					last = &c
					switch {
					case req.Projection == engine.ProjectionLight:
						if tk.History != nil || tk.Artifacts != nil {
							t.Fatal("light task carries a body")
						}
					case req.HistoryLength != nil:
						if len(tk.History) != 1 || !strings.HasPrefix(tk.History[0].ID, "n") || len(tk.Artifacts) != 1 {
							t.Fatalf("history trim: %+v", tk.History)
						}
					default:
						if len(tk.History) != 2 || tk.Artifacts != nil {
							t.Fatal("full task lost history or kept artifacts")
						}
					}
					if !matches(t, req, tk) {
						t.Fatalf("task %s does not match the filter", tk.ID)
					}
				}
				if resp.NextPageToken == "" {
					break
				}
				req.PageToken = resp.NextPageToken
			}
			if len(seen) != tc.want {
				t.Fatalf("saw %d tasks, want %d", len(seen), tc.want)
			}
			if pages != (tc.want+6)/7 {
				t.Fatalf("%d pages for %d tasks of 7", pages, tc.want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// S3, S7: concurrent appends of distinct and repeated messages are neither
// lost nor duplicated.
func TestConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	must(t)(s.Create(ctx, task("t", "c", a2a.TaskStateWorking)))
	const writers, msgs = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				// Every writer appends every message ID: each must land once.
				id := fmt.Sprint("m", (i+w)%msgs)
				if _, err := s.AppendHistory(ctx, "t", msg(id, "x")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := must(t)(s.Get(ctx, "t"))
	ids := map[string]int{}
	for _, m := range r.Task.History {
		ids[m.ID]++
	}
	if len(r.Task.History) != msgs || len(ids) != msgs || r.Revision != 1+msgs {
		t.Fatalf("history has %d messages (%d distinct), revision %d; want %d, %d, %d",
			len(r.Task.History), len(ids), r.Revision, msgs, msgs, 1+msgs)
	}
}

// S8: status timestamps are stored across timestamptz's range; beyond it
// they are ErrInvalidArgument. Filters beyond it clamp without error.
func TestStatusTimestampRange(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	for i, ts := range []time.Time{
		time.Date(-4000, 1, 1, 0, 0, 0, 7, time.UTC),
		time.Date(20000, 6, 1, 0, 0, 0, 999, time.UTC),
	} {
		tk := task(fmt.Sprint("far", i), "c", a2a.TaskStateWorking)
		tk.Status.Timestamp = &ts
		r := must(t)(s.Create(ctx, tk))
		if !r.Task.Status.Timestamp.Equal(ts) {
			t.Fatalf("stored %v, read %v", ts, r.Task.Status.Timestamp)
		}
	}
	for _, ts := range []time.Time{time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		tk := task("out", "c", a2a.TaskStateWorking)
		tk.Status.Timestamp = &ts
		_, err := s.Create(ctx, tk)
		wantErr(t, err, engine.ErrInvalidArgument)
	}
	for _, tc := range []struct {
		after time.Time
		want  int
	}{
		{time.Date(-1_000_000, 1, 1, 0, 0, 0, 0, time.UTC), 2},
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 1},
		{time.Date(20000, 6, 1, 0, 0, 0, 999, time.UTC), 1},
		{time.Date(20000, 6, 1, 0, 0, 0, 1000, time.UTC), 0},
		{time.Date(1_000_000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		checkAfter(t, s, tc.after, tc.want)
	}
}

// S6, C3: tasks with equal times are listed by ID in descending byte order,
// across page boundaries and in context pages, even when the database's
// default collation (ICU en-US here) orders the IDs differently.
func TestEqualTimesByteOrder(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSNWith(t, "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := connect(t, dsn)
	var icuLess bool
	if err := conn.QueryRow(ctx, `SELECT 'a' < 'B'`).Scan(&icuLess); err != nil {
		t.Fatal(err)
	}
	if !icuLess {
		t.Fatal("the database's default collation is byte order; the test would prove nothing")
	}
	ids := []string{"a", "B", "b", "A", "é", "e", "z", "Z", "aa", "a b", "_", "~", "1", "\u00e9x", "e\u0301"}
	for _, id := range ids {
		must(t)(s.Create(ctx, task(id, "c", a2a.TaskStateWorking)))
	}
	if _, err := conn.Exec(ctx, `UPDATE a2a_tasks SET updated_at = '2025-01-01 00:00:00+00'`); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids)
	slices.SortFunc(want, func(a, b string) int { return -strings.Compare(a, b) })
	for _, req := range []engine.ListRequest{{PageSize: 2}, {PageSize: 3, ContextID: "c"}, {PageSize: 1, Projection: engine.ProjectionLight}} {
		var got []string
		for {
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range resp.Tasks {
				got = append(got, string(tk.ID))
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		if !slices.Equal(got, want) {
			t.Fatalf("context %q: order %q, want %q", req.ContextID, got, want)
		}
	}
}

// checkAfter lists with StatusTimestampAfter = after and checks that the page
// and the total both hold want tasks.
func checkAfter(t *testing.T, s engine.Store, after time.Time, want int) {
	t.Helper()
	resp, err := s.List(context.Background(), &engine.ListRequest{StatusTimestampAfter: &after, IncludeTotalSize: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != want || resp.TotalSize != want {
		t.Errorf("after %v: %d tasks, total %d; want %d", after, len(resp.Tasks), resp.TotalSize, want)
	}
}
