package main

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// BenchmarkListTasks: one 50-task ListTasks page over each transport,
// client to server on loopback, in-memory store with 1,000 tasks.
func BenchmarkListTasks(b *testing.B) {
	ts := startServer(b, config{Backend: "mem"})
	for range 10 {
		for _, tr := range transports {
			send(b, ts.clients[tr], "bench", "hi")
		}
	}
	seedDirect(b, ts, 970)
	for _, tr := range transports {
		b.Run("backend=mem/transport="+string(tr)+"/page=50", func(b *testing.B) {
			b.ReportAllocs()
			c := ts.clients[tr]
			for b.Loop() {
				resp, err := c.ListTasks(b.Context(), &a2a.ListTasksRequest{PageSize: 50})
				if err != nil || len(resp.Tasks) != 50 {
					b.Fatalf("%v, %d tasks", err, len(resp.Tasks))
				}
			}
		})
	}
}
