//go:build unix

package authz_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used: less
// sensitive than wall time to other processes sharing the machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
