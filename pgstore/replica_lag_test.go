package pgstore

import (
	"testing"
	"time"
)

// lag: 0 at or past the newest sample; otherwise the bytes behind the
// newest sample and the time since the first sample past the replay
// position; and the ring keeps the newest maxSamples.
func TestReplicaLag(t *testing.T) {
	var r replicas
	if h := r.lag(100); h != (health{}) {
		t.Fatalf("no samples: %+v", h)
	}
	now := time.Now()
	for i, lsn := range []int64{100, 200, 300} {
		r.sample(lsnSample{at: now.Add(time.Duration(i-3) * time.Second), lsn: lsn})
	}
	for _, c := range []struct {
		replay   int64
		bytes    int64
		minLag   time.Duration
		maxLag   time.Duration
		caughtUp bool
	}{
		{replay: 300, caughtUp: true},
		{replay: 400, caughtUp: true},
		{replay: 250, bytes: 50, minLag: time.Second, maxLag: 2 * time.Second},      // behind since the sample at 300 (1 s ago)
		{replay: 150, bytes: 150, minLag: 2 * time.Second, maxLag: 3 * time.Second}, // since the sample at 200
		{replay: 10, bytes: 290, minLag: 3 * time.Second, maxLag: 4 * time.Second},  // before every sample: at least the oldest
	} {
		h := r.lag(c.replay)
		if c.caughtUp != (h == health{}) || h.lagBytes != c.bytes || (!c.caughtUp && (h.lag < c.minLag || h.lag > c.maxLag)) {
			t.Errorf("replay %d: %+v, want %d bytes and a lag in [%v, %v]", c.replay, h, c.bytes, c.minLag, c.maxLag)
		}
	}
	for i := range maxSamples + 10 {
		r.sample(lsnSample{at: now, lsn: int64(1000 + i)})
	}
	if n := len(r.samples.ring); n != maxSamples || r.samples.ring[0].lsn != 1010 {
		t.Fatalf("ring holds %d samples from %d, want %d from 1010", n, r.samples.ring[0].lsn, maxSamples)
	}
}
