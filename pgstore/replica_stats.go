package pgstore

import "time"

// ReplicaStats says where the store's reads ran and how its standbys are
// (for metrics: engine/storemetrics.ReplicaCollector).
type ReplicaStats struct {
	// PrimaryReads counts Get and List calls that ran on the primary
	// (every one, without standbys).
	PrimaryReads int64
	// PrimaryRetries counts primary reads taken again because a commit
	// already in the WAL was not yet visible there.
	PrimaryRetries int64
	// Nudges counts the WAL flushes standby reads asked of the primary
	// after waiting for replay (see Options.ReplicaWait).
	Nudges int64
	// Fallbacks counts reads that ran on the primary although standbys
	// are configured, by reason (every one of Reasons is present).
	Fallbacks map[string]int64
	// Standbys in Options.Replicas order.
	Standbys []StandbyStats
	// WaitCounts[i] counts standby reads whose wait for catch-up was at
	// most WaitBuckets[i] seconds (and above the previous bound); the
	// last element counts longer waits, cut at Options.ReplicaWait (those
	// fell back). WaitSum is their total.
	WaitCounts []int64
	WaitSum    time.Duration
}

// StandbyStats is one standby's reads and the monitor's last verdict.
type StandbyStats struct {
	Name     string // standby-1, standby-2, … in Options.Replicas order
	Reads    int64  // reads it served
	Healthy  bool
	Reason   string        // why not healthy (a fallback reason), "" when healthy
	Lag      time.Duration // how long the primary has been ahead of its replay position
	LagBytes int64         // WAL bytes it has not replayed
}

// ReplicaStats returns the counters of reads by target and the standbys'
// health.
func (s *Store) ReplicaStats() ReplicaStats {
	r := s.replicas
	st := ReplicaStats{
		PrimaryReads:   r.primaryReads.Load(),
		PrimaryRetries: r.primaryRetries.Load(),
		Nudges:         r.nudges.Load(),
		Fallbacks:      make(map[string]int64, len(reasonIndex)),
		WaitSum:        time.Duration(r.waits.sumNs.Load()),
	}
	for i, name := range reasonIndex {
		st.Fallbacks[name] = r.fallbacks[i].Load()
	}
	for i := range r.waits.counts {
		st.WaitCounts = append(st.WaitCounts, r.waits.counts[i].Load())
	}
	for _, sb := range r.list {
		h := sb.health.Load()
		st.Standbys = append(st.Standbys, StandbyStats{Name: sb.name, Reads: sb.reads.Load(),
			Healthy: h.reason == "", Reason: h.reason, Lag: h.lag, LagBytes: h.lagBytes})
	}
	return st
}
