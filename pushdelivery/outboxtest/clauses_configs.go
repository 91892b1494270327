package outboxtest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/pushdelivery"
)

func testSaveGet(t *testing.T, e *env) {
	r := e.record("t1", "c1")
	r.Config.Auth = &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "secret"}
	r.Delivered, r.Attempts, r.LastError = 4, 2, "503"
	r.FailingSince = e.clk.Now().Add(-3e9)
	e.save(r)
	e.check("t1", "c1", r)
}

func testGetMissing(t *testing.T, e *env) {
	e.save(e.record("t1", "c1"))
	for _, k := range [][2]string{{"t1", "c2"}, {"t2", "c1"}} {
		if _, err := e.o.Get(e.ctx, a2a.TaskID(k[0]), k[1]); !isNotFound(err) {
			t.Fatalf("get %s/%s: %v, want ErrNotFound", k[0], k[1], err)
		}
	}
}

// ids lists the configuration IDs of a page.
func ids(rs []*pushdelivery.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Config.ID)
	}
	return out
}

func testListPaging(t *testing.T, e *env) {
	all := []string{"b", "a", "B", "a0", "ä", "_", "aa"}
	for _, id := range all {
		e.save(e.record("t1", id))
	}
	want := slices.Clone(all)
	slices.Sort(want) // bytewise
	var got []string
	after := ""
	for range len(all) + 1 {
		page, err := e.o.List(e.ctx, "t1", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d, limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, ids(page)...)
		after = page[len(page)-1].Config.ID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walk %q, want %q", got, want)
	}
}

func testListOneTask(t *testing.T, e *env) {
	e.save(e.record("t1", "a"))
	e.save(e.record("t2", "b"))
	e.save(e.record("t10", "c"))
	page, err := e.o.List(e.ctx, "t1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(page); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("t1 lists %q", got)
	}
	if page, _ := e.o.List(e.ctx, "t3", "", 100); len(page) != 0 {
		t.Fatalf("a task without configs lists %q", ids(page))
	}
}

func testDelete(t *testing.T, e *env) {
	e.save(e.record("t1", "a"))
	e.save(e.record("t1", "b"))
	for range 2 { // the second time, missing: no error
		if err := e.o.Delete(e.ctx, "t1", "a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.o.Get(e.ctx, "t1", "a"); !isNotFound(err) {
		t.Fatalf("deleted record: %v", err)
	}
	e.get("t1", "b")
}

func testDeleteAll(t *testing.T, e *env) {
	for _, id := range []string{"a", "b", "c"} {
		e.save(e.record("t1", id))
	}
	e.save(e.record("t2", "a"))
	if err := e.o.DeleteAll(e.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if page, _ := e.o.List(e.ctx, "t1", "", 100); len(page) != 0 {
		t.Fatalf("after DeleteAll: %q", ids(page))
	}
	e.get("t2", "a")
	if err := e.o.DeleteAll(e.ctx, "t3"); err != nil {
		t.Fatalf("DeleteAll of a task without configs: %v", err)
	}
}

func testSaveKeepsDelivery(t *testing.T, e *env) {
	r := e.record("t1", "c1")
	r.Delivered, r.Attempts, r.LastError, r.Done = 7, 3, "timeout", true
	r.FailingSince = e.clk.Now().Add(-5e9)
	r.NextAt = e.clk.Now().Add(30e9)
	e.save(r)
	// The same config saved again (a2a-go's cluster mode retrying an
	// execution) keeps the whole delivery state.
	again := e.record("t1", "c1")
	again.Created = e.clk.Now().Add(1e9)
	e.save(again)
	e.check("t1", "c1", r)
	// A new URL keeps Delivered and Done; the failures were the old URL's.
	repl := e.record("t1", "c1")
	repl.Config.URL, repl.Dest = "http://other.example:8080/x", "http://other.example:8080"
	repl.Created = e.clk.Now().Add(2e9)
	e.save(repl)
	want := *r
	want.Config, want.Dest = repl.Config, repl.Dest
	want.Attempts, want.FailingSince, want.LastError, want.NextAt = 0, repl.FailingSince, "", repl.NextAt
	e.check("t1", "c1", &want)
}

func testTooMany(t *testing.T, e *env) {
	for i := range pushdelivery.MaxConfigsPerTask {
		e.save(e.record("t1", fmt.Sprintf("c%02d", i)))
	}
	err := e.o.Save(e.ctx, e.record("t1", "extra"))
	if err == nil || !isTooMany(err) {
		t.Fatalf("config %d: %v, want ErrTooMany", pushdelivery.MaxConfigsPerTask+1, err)
	}
	if _, err := e.o.Get(e.ctx, "t1", "extra"); !isNotFound(err) {
		t.Fatalf("refused config stored: %v", err)
	}
	e.save(e.record("t1", "c00")) // replacing one is no new config
	e.save(e.record("t2", "extra"))
}

func testTooManyConcurrent(t *testing.T, e *env) {
	const n = 2 * pushdelivery.MaxConfigsPerTask
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs <- e.o.Save(e.ctx, e.record("t1", fmt.Sprintf("c%02d", i))) })
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		switch {
		case isTooMany(err):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	page, err := e.o.List(e.ctx, "t1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != pushdelivery.MaxConfigsPerTask || refused != n-pushdelivery.MaxConfigsPerTask {
		t.Fatalf("%d stored, %d refused; want %d stored", len(page), refused, pushdelivery.MaxConfigsPerTask)
	}
}
