//go:build !unix

package wrkload

import "time"

// cpuTime is not available here.
func cpuTime() (time.Duration, bool) { return 0, false }
