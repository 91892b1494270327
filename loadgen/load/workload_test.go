package load

import (
	"maps"
	"slices"
	"testing"

	"github.com/a2astore/a2astore/engine/memstore"
)

// TestSingleOpWorkloadsRemote: send-only and list-only drive a server with
// exactly one operation class (SendMessage, ListTasks), so their round
// trips/s and the server's CPU per request are that method's alone.
func TestSingleOpWorkloadsRemote(t *testing.T) {
	for _, tc := range []struct {
		workload string
		op       Op
	}{{"send-only", OpCreate}, {"list-only", OpList}} {
		for _, tr := range Transports {
			t.Run(tc.workload+"/transport="+tr, func(t *testing.T) {
				store := memstore.New(memstore.Options{})
				t.Cleanup(func() { _ = store.Close() })
				base := startServer(t, store)
				res := smallRun(t, Config{Target: base, Transport: tr, Workload: tc.workload, Ops: 300, Initial: 50})
				assertClean(t, res)
				if got := slices.Sorted(maps.Keys(res.Ops)); !slices.Equal(got, []Op{tc.op}) {
					t.Fatalf("ops %v, want only %s", got, tc.op)
				}
				if s := res.Ops[tc.op]; s.Count != 300 || s.ErrorCount() != 0 {
					t.Fatalf("%s: %d ops, %d errors; want 300, 0", tc.op, s.Count, s.ErrorCount())
				}
			})
		}
	}
}
