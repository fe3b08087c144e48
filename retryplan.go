package breakwater

import (
	"time"

	"github.com/breakwater-go/breakwater/internal/sat"
)

// plan returns the longest wait before each retry of a failing call, for
// attempts 2 to maxAttempts: exact for a backoff with a MaxDelay method
// or a deterministic one, estimated by drawing for a function. The plan
// checkPlan computed at construction is reused, so that every reader of a
// transport's plan sees the same waits even when they were drawn.
func (c *config) plan() []time.Duration {
	if c.planned != nil {
		return c.planned
	}
	out := make([]time.Duration, 0, c.maxAttempts-1)
	var prev time.Duration
	for n := 1; n < c.maxAttempts; n++ {
		var worst time.Duration
		if c.backoffMax != nil {
			worst = c.backoffMax(n, prev)
		} else {
			for range 64 {
				worst = max(worst, c.backoff.Delay(n, prev))
			}
		}
		out = append(out, worst)
		prev = worst
	}
	return out
}

// worstPlan is the sum of plan, bounded by the call timeout.
func (c *config) worstPlan() time.Duration {
	var total time.Duration
	for _, d := range c.plan() {
		total = time.Duration(sat.Add(int64(total), int64(max(0, d))))
	}
	if c.callTimeout > 0 {
		total = min(total, c.callTimeout)
	}
	return total
}

// attemptsFit returns how many attempts of a call the call timeout leaves
// room for when every wait between them is its longest (the plan): the
// retry loop makes attempt n+1 only when the wait before it ends before
// the call's deadline. Attempts take time too, so it is a bound; n, the
// waits before attempt n+1 added up, is returned too (0 when all fit).
func (c *config) attemptsFit() (n int, waits time.Duration) {
	if c.callTimeout <= 0 {
		return c.maxAttempts, 0
	}
	for i, d := range c.plan() {
		waits = time.Duration(sat.Add(int64(waits), int64(max(0, d))))
		if waits >= c.callTimeout {
			return i + 1, waits
		}
	}
	return c.maxAttempts, 0
}
