package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/internal/pgtest"
)

// BenchmarkSendMessageCluster (#22, the price of cluster mode): one blocking
// SendMessage (JSON-RPC, loopback; the synthetic agent's 2 status updates
// and artifact) on the pg backend, in local mode, in cluster mode on one
// server, and over two cluster servers (in this process, calls
// alternating). cpu-us/op is the process's CPU (client and servers) per
// message; log-rows/op the task log's rows per message (K7: one per
// revision, in the revision's statement); cluster-rows/op the rows cluster
// mode adds (work items, each also updated twice: claim, complete;
// replies); wal-B/op the WAL the database wrote per message.
func BenchmarkSendMessageCluster(b *testing.B) {
	for _, mode := range []struct {
		name    string
		servers int
		cluster bool
	}{{"local", 1, false}, {"cluster", 1, true}, {"cluster", 2, true}} {
		b.Run(fmt.Sprintf("backend=pg/mode=%s/servers=%d", mode.name, mode.servers), func(b *testing.B) {
			dsn := pgtest.DSN(b)
			var clients []*a2aclient.Client
			for range mode.servers {
				cfg := config{Backend: "pg", PGDSN: dsn, Agent: agentConfig{StatusUpdates: 2, HistoryMessages: 1, ArtifactBytes: 256}}
				cfg.Cluster = clusterConfig{Enabled: mode.cluster, Lease: 30 * time.Second, Retention: time.Hour, Poll: 10 * time.Second}
				clients = append(clients, startServer(b, cfg).clients[a2a.TransportProtocolJSONRPC])
			}
			db, err := pgxpool.New(b.Context(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			count := func(sql string) int64 {
				var n int64
				if err := db.QueryRow(context.Background(), sql).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
			rows := func() int64 {
				if !mode.cluster {
					return 0
				}
				return count(`SELECT (SELECT count(*) FROM a2a_cluster_events) + (SELECT count(*) FROM a2a_cluster_work)`)
			}
			logRows := func() int64 { return count(`SELECT count(*) FROM a2a_task_log`) }
			wal := func() int64 { return count(`SELECT pg_current_wal_lsn() - '0/0'`) }
			rows0, log0, wal0, cpu0 := rows(), logRows(), wal(), cpuTime()
			i := 0
			for b.Loop() {
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("bench"))
				res, err := clients[i%len(clients)].SendMessage(b.Context(), &a2a.SendMessageRequest{Message: msg})
				if err != nil {
					b.Fatal(err)
				}
				if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
					b.Fatalf("SendMessage returned %v", res)
				}
				i++
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(rows()-rows0)/float64(b.N), "cluster-rows/op")
			b.ReportMetric(float64(logRows()-log0)/float64(b.N), "log-rows/op")
			b.ReportMetric(float64(wal()-wal0)/float64(b.N), "wal-B/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
