package policy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, all threads (so the
// garbage collector's work counts too). Benchmarks report it per
// operation beside the wall time, which is inflated when the machine is
// shared.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
