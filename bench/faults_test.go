package bench

import (
	"runtime"
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
// operation as faults/op. On this lab's
// machine (a Firecracker VM with free page reporting) a first touch of a
// 4 KiB page costs 11–13 µs, 50 times a bare host's, so a benchmark whose
// heap grows into memory the guest had handed back pays that per page:
// the metric says when a figure holds such faults.
func reportFaults(b *testing.B) func() {
	warmHeap()
	start := minorFaults()
	return func() {
		b.ReportMetric(float64(minorFaults()-start)/float64(b.N), "faults/op")
	}
}

// warmHeap touches the memory the heap will grow into before the
// collector's next cycle (from the heap in use to the cycle's goal), when
// the runtime does not hold that much already, and frees it again: the
// runtime keeps it (its scavenger returns only what lies beyond the
// goal), so the benchmarks after it allocate into pages already faulted
// in and measure the store, not this machine's first touches. Without it
// the first benchmarks after a large load, or after a benchmark that grew
// the heap, paid up to 9 faults a page (the 1e6 column of the scale
// runs, slower than 1e5 and 1e7 on memory in every run until this).
func warmHeap() {
	const chunk = 1 << 20
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.NextGC <= ms.HeapSys-ms.HeapReleased {
		return
	}
	grow := int64(ms.NextGC) - int64(ms.HeapAlloc)
	junk := make([][]byte, 0, max(grow/chunk, 0)+1)
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
