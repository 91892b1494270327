package load

import (
	"sync/atomic"
	"time"
)

// ScheduleStats says how far a paced run fell behind its schedule. A paced
// run counts each response time from the operation's scheduled start, so
// once every worker is busy the wait for a free worker is in every later
// figure: a run whose workers cannot offer the rate (or that waited out a
// dead server) shows response times that grow with the run, while its
// service times (OpStats.ServiceP50Ms) stay those of the target.
type ScheduleStats struct {
	MaxLagMs float64 `json:"max_lag_ms"` // the most an operation started late
	EndLagMs float64 `json:"end_lag_ms"` // how late the last one started
}

// Behind reports whether the run fell behind its schedule by more than a
// second at some point (the report then says so).
func (s *ScheduleStats) Behind() bool { return s != nil && s.MaxLagMs > 1000 }

// lagGauge keeps the largest and the latest lag of a paced run's starts.
type lagGauge struct {
	max, last atomic.Int64 // nanoseconds
}

// observe records that an operation started lag behind its scheduled time
// (negative: ahead of it, then it waits and starts on time).
func (g *lagGauge) observe(lag time.Duration) {
	v := max(int64(lag), 0)
	g.last.Store(v)
	for {
		m := g.max.Load()
		if v <= m || g.max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (g *lagGauge) stats() *ScheduleStats {
	return &ScheduleStats{MaxLagMs: float64(g.max.Load()) / 1e6, EndLagMs: float64(g.last.Load()) / 1e6}
}
