package load

import (
	"math"
	rtmetrics "runtime/metrics"
)

// GCStats is the Go collector's work in this process over a run, from
// runtime/metrics: for an embedded target, the store's process. Pause
// quantiles come from the runtime's pause histogram (stop-the-world
// pauses, stopping included: /sched/pauses/total/gc:seconds) and are the
// upper bounds of the buckets they fall in.
type GCStats struct {
	Cycles     uint64  `json:"cycles"`          // completed GC cycles during the run
	Pauses     uint64  `json:"pauses"`          // stop-the-world pauses (two per cycle)
	PauseP50Ms float64 `json:"pause_p50_ms"`    // pause quantiles
	PauseP99Ms float64 `json:"pause_p99_ms"`    //
	PauseMaxMs float64 `json:"pause_max_ms"`    //
	CPUSec     float64 `json:"cpu_sec"`         // CPU time the collector used (/cpu/classes/gc/total)
	CPUShare   float64 `json:"cpu_share"`       // that time over all CPU time the runtime accounts for
	HeapLive   uint64  `json:"heap_live_bytes"` // live heap marked by the last cycle, at the end
}

var gcMetricNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/sched/pauses/total/gc:seconds",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/gc/heap/live:bytes",
}

// gcSample is a reading of gcMetricNames.
type gcSample []rtmetrics.Sample

func readGC() gcSample {
	s := make(gcSample, len(gcMetricNames))
	for i, name := range gcMetricNames {
		s[i].Name = name
	}
	rtmetrics.Read(s)
	return s
}

// since returns the collector's work between start and s.
func (s gcSample) since(start gcSample) *GCStats {
	g := &GCStats{}
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		g.Cycles = s[0].Value.Uint64() - start[0].Value.Uint64()
	}
	if s[1].Value.Kind() == rtmetrics.KindFloat64Histogram {
		h0, h := start[1].Value.Float64Histogram(), s[1].Value.Float64Histogram()
		counts := make([]uint64, len(h.Counts))
		for i := range counts {
			counts[i] = h.Counts[i]
			if i < len(h0.Counts) {
				counts[i] -= h0.Counts[i]
			}
		}
		g.Pauses, g.PauseP50Ms, g.PauseP99Ms, g.PauseMaxMs = pauseQuantiles(counts, h.Buckets)
	}
	if s[2].Value.Kind() == rtmetrics.KindFloat64 && s[3].Value.Kind() == rtmetrics.KindFloat64 {
		g.CPUSec = s[2].Value.Float64() - start[2].Value.Float64()
		if total := s[3].Value.Float64() - start[3].Value.Float64(); total > 0 {
			g.CPUShare = g.CPUSec / total
		}
	}
	if s[4].Value.Kind() == rtmetrics.KindUint64 {
		g.HeapLive = s[4].Value.Uint64()
	}
	return g
}

// pauseQuantiles returns the number of pauses in a histogram (counts[i]
// pauses in [buckets[i], buckets[i+1]) seconds) and its median, 99th
// percentile and maximum in milliseconds, each the upper bound of its
// bucket (the lower bound for the open last bucket).
func pauseQuantiles(counts []uint64, buckets []float64) (n uint64, p50, p99, maxMs float64) {
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	bound := func(i int) float64 {
		if hi := buckets[i+1]; !math.IsInf(hi, 1) {
			return hi * 1e3
		}
		return buckets[i] * 1e3
	}
	quantile := func(q float64) float64 {
		rank := uint64(math.Ceil(q * float64(n)))
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= rank && c > 0 {
				return bound(i)
			}
		}
		return 0
	}
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			maxMs = bound(i)
			break
		}
	}
	return n, quantile(0.5), quantile(0.99), maxMs
}
