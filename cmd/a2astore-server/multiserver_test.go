package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pgstore"
)

// startChildServer starts a server process with args (listening on free
// loopback ports) and waits until it serves. It is stopped with SIGTERM at
// t's cleanup, which requires a clean exit. It may run on any goroutine:
// it reports failure as an error.
func startChildServer(t *testing.T, args ...string) (*child, error) {
	args = append(args, "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-metrics", "")
	c, err := spawn(args...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.stopCleanly(t) })
	return c, nil
}

// stopCleanly stops the server with SIGTERM, which requires a clean exit
// within a minute.
func (c *child) stopCleanly(t *testing.T) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("server %s: %v\n%s", c.base, err, c.logs())
		}
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		t.Errorf("server %s did not stop within a minute", c.base)
	}
}

// client returns an a2a-go client of the server over transport tr.
func (cs *child) client(t *testing.T, tr a2a.TransportProtocol) *a2aclient.Client {
	t.Helper()
	var card a2a.AgentCard
	getJSON(t, cs.base+a2asrv.WellKnownAgentCardPath, &card)
	c, err := a2aclient.NewFromCard(t.Context(), &card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{tr}}),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// Issue 11, several application processes on one database: two server
// processes start at once on an empty PostgreSQL database (one installs the
// schema, the other finds it), then serve loadgen's traversal-under-churn
// load each (L7 checked by loadgen), while traversals here alternate
// between the servers page by page — a token from one continued on the
// other — and must see every task that existed before and was never
// written exactly once, in strictly descending cursor order, with an exact
// totalSize on every page. At the end every counter equals a recount.
func TestTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes and runs load")
	}
	dsn := pgtest.DSN(t)
	servers := make([]*child, 2)
	startErrs := make([]error, len(servers))
	var starts sync.WaitGroup
	for i := range servers {
		starts.Go(func() { servers[i], startErrs[i] = startChildServer(t, "-backend", "pg", "-pg-dsn", dsn) })
	}
	starts.Wait()
	for _, err := range startErrs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// A third pool seeds tasks nobody writes during the test.
	ctx := context.Background()
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const stable = 240
	for i := range stable {
		tk := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("stable-%03d", i)), ContextID: "stable",
			Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		if _, err := st.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}

	clients := []*a2aclient.Client{servers[0].client(t, a2a.TransportProtocolJSONRPC), servers[1].client(t, a2a.TransportProtocolGRPC)}
	loadErrs := make(chan error, len(servers))
	var loads sync.WaitGroup
	for i, s := range servers {
		loads.Go(func() {
			res, err := load.Run(ctx, load.Config{
				Target: s.base, Transport: []string{"jsonrpc", "http"}[i], Workload: "traversal-under-churn",
				Concurrency: 3, Ops: 300, Initial: 60, PageSize: 20, Seed: uint64(11 + i),
			})
			if err == nil {
				err = res.Err()
			}
			if err == nil && res.Traversals == 0 {
				err = fmt.Errorf("no traversal checked")
			}
			loadErrs <- err
		})
	}
	loadsDone := make(chan struct{})
	go func() { loads.Wait(); close(loadsDone) }()
	// Cross-server traversals while the loads run (and a few after): all
	// tasks, and the stable context alone.
	rounds := 0
	for ; rounds < 4 || !closed(loadsDone); rounds++ {
		for _, contextID := range []string{"", "stable"} {
			traverseAcross(t, clients, contextID, rounds, stable)
		}
		if rounds > 200 {
			t.Fatal("loads did not finish")
		}
	}
	<-loadsDone
	close(loadErrs)
	for err := range loadErrs {
		if err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	// Both servers report the same, exact total.
	var totals []int
	for _, c := range clients {
		resp, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		totals = append(totals, resp.TotalSize)
	}
	all, err := st.List(ctx, &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if totals[0] != all.TotalSize || totals[1] != all.TotalSize {
		t.Fatalf("totals %v through the servers, %d in the store", totals, all.TotalSize)
	}
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cross-server traversal rounds; %d tasks at the end", rounds, all.TotalSize)
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// traverseAcross walks one traversal, page i on clients[(start+i) % 2],
// and checks L7 for it: boundaries strictly descend, no task twice, every
// stable task exactly once; in the stable context, totalSize is exact on
// every page.
func traverseAcross(t *testing.T, clients []*a2aclient.Client, contextID string, start, stable int) {
	t.Helper()
	seen := map[a2a.TaskID]int{}
	var last *engine.Cursor
	req := &a2a.ListTasksRequest{ContextID: contextID, PageSize: 25}
	for page := 0; ; page++ {
		resp, err := clients[(start+page)%len(clients)].ListTasks(t.Context(), req)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if contextID == "stable" && resp.TotalSize != stable {
			t.Fatalf("stable context: totalSize %d, want %d", resp.TotalSize, stable)
		}
		for _, tk := range resp.Tasks {
			seen[tk.ID]++
			if seen[tk.ID] > 1 {
				t.Fatalf("task %s twice in one traversal (L7)", tk.ID)
			}
		}
		if resp.NextPageToken == "" {
			break
		}
		c, err := engine.DecodeToken(resp.NextPageToken)
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && last.Compare(c) >= 0 {
			t.Fatalf("page boundary %v does not come after %v (L7)", c, *last)
		}
		last = &c
		req.PageToken = resp.NextPageToken
	}
	for i := range stable {
		if id := a2a.TaskID(fmt.Sprintf("stable-%03d", i)); seen[id] != 1 {
			t.Fatalf("untouched task %s seen %d times (L7)", id, seen[id])
		}
	}
}
