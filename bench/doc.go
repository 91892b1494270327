// Package bench is the a2astore benchmark lab: one benchmark body run
// against every backend, with sub-benchmarks named key=value
// (backend=mem/op=page/n=1000000/page=50/proj=light) so that
// `benchstat -col /backend` pivots them, and peers measured side by side in
// the same process on the same fixture.
//
// Sizes run by default are 1e3..1e5; set BENCH_FULL=1 for 1e6 as well.
package bench
