package bench

import (
	"math"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
)

// minorFaults returns the process's minor page faults so far (getrusage).
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}

// reportFaults warms the heap (warmHeap), then starts counting the
// process's minor page faults; the returned func reports them per
// operation as faults/op. On this lab's machine (a Firecracker VM with
// free page reporting) a first touch of a 4 KiB page costs 11–13 µs and
// a second 0.04 µs (results/raw/first-touch-2026-12-07.txt), so a
// benchmark whose heap grows into memory the guest had handed back pays
// that per page: the metric says when a figure holds such faults.
func reportFaults(b *testing.B) func() {
	warmHeap()
	start := minorFaults()
	return func() {
		b.ReportMetric(float64(minorFaults()-start)/float64(b.N), "faults/op")
	}
}

// warmHeap touches the memory the heap will grow into before the
// collector's next cycle (from the heap in use to the cycle's goal, at
// most warmMax more, and never past warmLimitShare of the memory limit),
// when the runtime does not hold that much already, and frees it again.
// Below the memory limit the runtime keeps it (its scavenger returns what
// lies beyond the goal, or beyond about 95 % of GOMEMLIMIT when one is
// set), so the benchmarks after it allocate into pages already faulted in
// and measure the store, not this machine's first touches. Without it the
// first benchmarks after a large load, or after a benchmark that grew the
// heap, paid up to 9 faults a page (the 1e6 column of the scale runs,
// slower than 1e5 and 1e7 on memory in every run until this). The caps
// keep it from holding a heap of gigabytes at twice its size: at 1e7
// (11 GB live, results/scale.sh's GOMEMLIMIT of 20 GiB) an uncapped warm
// took the heap near the limit, where the scavenger hands pages back, and
// several figures after it had 0.4–5 faults an operation.
func warmHeap() {
	const chunk = 1 << 20
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	target := min(ms.NextGC, ms.HeapAlloc+warmMax)
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		target = min(target, uint64(float64(limit)*warmLimitShare))
	}
	if target <= ms.HeapSys-ms.HeapReleased || target <= ms.HeapAlloc {
		return
	}
	grow := int64(target - ms.HeapAlloc)
	junk := make([][]byte, 0, grow/chunk+1)
	for ; grow > 0; grow -= chunk {
		c := make([]byte, chunk)
		for i := 0; i < len(c); i += 4096 {
			c[i] = 1
		}
		junk = append(junk, c)
	}
	clear(junk)
	runtime.GC()
}

// warmMax is the most warmHeap touches beyond the heap in use: several
// times what a sub-benchmark allocates between two collections (a page
// of 50 allocates about 11 KB, a full one 115 KB).
const warmMax = 4 << 30

// warmLimitShare is the share of GOMEMLIMIT warmHeap stays under, below
// the scavenger's 95 %.
const warmLimitShare = 0.85
