//go:build unix

package wrkload

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, user and system, and
// true: the work of every thread (GC workers included), which other
// processes taking the CPU do not inflate.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
