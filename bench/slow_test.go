//go:build !benchslow

package bench

// slowdown is called once per List in the benchmark loops; it does nothing
// in a normal build (see slow_benchslow_test.go).
func slowdown() {}
