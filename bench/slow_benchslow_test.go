//go:build benchslow

package bench

import "hash/fnv"

var slowBuf [4096]byte

// slowdown, in a build with -tags benchslow, adds work to every List the
// benchmarks make (hashing 4 KiB, a few microseconds): the artificially
// slowed build the regression gate's test must catch (cmd/benchgate).
func slowdown() {
	h := fnv.New64a()
	h.Write(slowBuf[:])
	slowSink += h.Sum64()
}

var slowSink uint64
