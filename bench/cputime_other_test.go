//go:build !unix

package bench_test

import "time"

// cpuTime reports that the process's CPU time is not read here.
func cpuTime() (time.Duration, bool) { return 0, false }
