package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// L10 after a failover: a copy of the primary is promoted (a new
// timeline) and becomes the store's primary, while the old primary goes
// on writing along the old timeline and standby 0 follows it, so its
// replay position runs ahead of anything the new primary wrote. Reads
// through standby 0 must not serve that history: tasks created on the
// new primary are found (issue 52, item 6: 20 of 20 were not, the gate
// compared positions only), the read forced onto standby 0 falls back
// for ReasonTimeline, and the health monitor of a store that reads
// nothing marks it so.
func TestStandbyOnOldTimeline(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	cfg, err := pgx.ParseConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	old := openAgain(t, p)
	createN(t, old, 10)
	copied := set.PromotedCopy(t)
	newPrimary := copied.DSN(cfg.Database)

	// The old timeline runs ahead of the new primary by more than the
	// test's own writes there will take.
	newConn, standby0 := connect(t, newPrimary), connect(t, sbs[0])
	lsnOf := func(conn *pgx.Conn, sql string) int64 {
		var lsn int64
		if err := conn.QueryRow(ctx, sql).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	for i := 0; ; i++ {
		set.WaitReplayed(t)
		ahead := lsnOf(standby0, `SELECT (pg_last_wal_replay_lsn() - '0/0')::bigint`) -
			lsnOf(newConn, `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint`)
		if ahead > 1<<20 {
			t.Logf("standby 0 replayed %d bytes past the new primary's position, on the old timeline (%d tasks written there)", ahead, 100*i)
			break
		}
		for j := range 100 {
			must(t)(old.Create(ctx, task(fmt.Sprintf("old%d-%d", i, j), "old", a2a.TaskStateSubmitted)))
		}
	}

	s := openReplicated(t, newPrimary, sbs[:1], time.Second)
	s.RouteReads(func() int { return 0 }) // whatever the monitor says
	for i := range 20 {
		id := a2a.TaskID(fmt.Sprint("new", i))
		must(t)(s.Create(ctx, task(string(id), "new", a2a.TaskStateSubmitted)))
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("Get of %s, created on the new primary, through the standby on the old timeline: %v", id, err)
		}
	}
	st := s.ReplicaStats()
	if st.Standbys[0].Reads != 0 || st.Fallbacks[pgstore.ReasonTimeline] != 20 {
		t.Fatalf("the standby on the old timeline served reads, or they fell back for another reason: %+v", st)
	}
	// A store that reads nothing: only its health monitor can find it.
	idle := openReplicated(t, newPrimary, sbs[:1], time.Second)
	waitFor(t, "the monitor marking the standby on the old timeline", func() bool {
		return idle.ReplicaStats().Standbys[0].Reason == pgstore.ReasonTimeline
	})
}
