//go:build race

package storetest

// raceEnabled reports whether the race detector is on (make test): the
// interleaved model test then runs its short step count (stress.go).
const raceEnabled = true
