//go:build !linux

package otelbw_test

import "time"

// threadCPU reports that the platform's thread CPU time is not read here.
func threadCPU() (time.Duration, bool) { return 0, false }
