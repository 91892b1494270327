package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/a2aserver"
)

// benchListWire: one ListTasks page of 50 as an A2A server answers it —
// through the a2aserver adapter (which always asks the store for the
// total) and encoded to JSON, the body the JSON-RPC and HTTP+JSON bindings
// send — first page, unfiltered and in the hottest context. Transports are
// left out (cmd/a2astore-server's BenchmarkListTasks measures them).
func benchListWire(b *testing.B, e *env) {
	for _, filter := range []string{"none", "context"} {
		forSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=list-wire/n=%d/page=50/filter=%s", n, filter)
		}, func(b *testing.B, fx *fixture) {
			ts := a2aserver.TaskStore(fx.store)
			req := &a2a.ListTasksRequest{PageSize: 50}
			if filter == "context" {
				req.ContextID = "ctx-00000"
			}
			ctx := context.Background()
			bytes := 0
			b.ReportAllocs()
			for b.Loop() {
				slowdown()
				resp, err := ts.List(ctx, req)
				if err != nil || len(resp.Tasks) != 50 || resp.TotalSize < 50 {
					b.Fatalf("%v, %d tasks of %d", err, len(resp.Tasks), resp.TotalSize)
				}
				body, err := json.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				bytes = len(body)
			}
			b.ReportMetric(float64(bytes), "body-bytes")
		})
	}
}
