// Package gcra is the generic cell rate algorithm (GCRA): the token
// bucket's exact equivalent kept as one number per key, admitted with one
// compare-and-swap.
package gcra

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Cell is one key's rate limit under the generic cell rate algorithm
// (GCRA), the token bucket's exact equivalent kept as a single number: the
// theoretical arrival time (TAT), the instant at which the bucket would be
// full again if nothing else arrived. A request at now is admitted when
// max(TAT, now) + interval lies at most burst intervals ahead of now, and
// then moves TAT there. One atomic value and a compare-and-swap: no lock,
// no allocation.
//
// Times are nanoseconds on the owner's monotonic clock, which starts at 0;
// a TAT of 0 (or any TAT in the past) is a full bucket.
//
// The shared store (the Redis adapter) runs the same algorithm in one Lua
// script on Redis's clock: [Params] and the arithmetic below are what
// both agree on.
type Cell struct {
	TAT atomic.Int64
}

// Params is a policy: one token every interval nanoseconds, at most
// burst tokens held.
type Params struct {
	Interval int64 // nanoseconds per token, >= 1
	Burst    int64 // >= 1
	Capacity int64 // Interval * Burst, saturated
}

// maxGCRASpan bounds interval*burst so that TAT arithmetic never
// overflows: about 146 years.
const maxGCRASpan = math.MaxInt64 / 4

// NewParams converts limit tokens per second and burst to a policy.
// limit must be positive and burst at least 1; a limit so small that a
// token takes longer than maxGCRASpan saturates there.
func NewParams(limit rate.Limit, burst int) Params {
	b := int64(max(1, burst))
	iv := math.Ceil(float64(time.Second) / float64(limit))
	interval := int64(maxGCRASpan) / b
	if iv < float64(interval) {
		interval = max(1, int64(iv))
	}
	return Params{Interval: interval, Burst: b, Capacity: interval * b}
}

// Share is the policy of one of n replicas sharing p: the same burst
// window, a rate and a burst n times smaller (the burst at least 1).
func (p Params) Share(n int) Params {
	if n <= 1 {
		return p
	}
	b := max(1, p.Burst/int64(n))
	interval := int64(maxGCRASpan) / b
	if p.Interval <= interval/int64(n) {
		interval = p.Interval * int64(n)
	}
	return Params{Interval: interval, Burst: b, Capacity: interval * b}
}

// Take admits one request or refuses it, at the instant clock reads.
// With maxWait > 0 a request that would have to wait at most maxWait for
// its token reserves it, and delay tells how long to wait before going; a
// refusal reserves nothing. tat is the TAT after the decision and now the
// clock reading it was made at.
//
// The clock is read after the TAT is loaded, and again for every retry of
// the compare-and-swap: a caller held up between reading the clock and
// deciding (preempted, or back from a slow shared store) is never judged
// at a stale instant against a TAT other callers have moved on since,
// which would refuse it at any rate below the limit.
func (c *Cell) Take(p Params, clock func() int64, maxWait int64) (ok bool, delay, tat, now int64) {
	for {
		old := c.TAT.Load()
		now = clock()
		next := max(old, now) + p.Interval
		delay = next - p.Capacity - now
		if delay > maxWait {
			return false, delay, old, now
		}
		if c.TAT.CompareAndSwap(old, next) {
			return true, max(0, delay), next, now
		}
	}
}

// Cancel gives back one token reserved by Take.
func (c *Cell) Cancel(p Params) { c.TAT.Add(-p.Interval) }

// Tokens is the bucket's content at now as a token bucket sees it:
// negative while reservations are outstanding.
func (p Params) Tokens(tat, now int64) float64 {
	return float64(p.Capacity-max(0, tat-now)) / float64(p.Interval)
}

// Status describes the quota at now of a bucket whose TAT is tat.
// Remaining counts whole tokens; RetryAfter is the time until the next
// whole token when none is left (zero otherwise); Reset is the time until
// the bucket is full.
func (p Params) Status(tat, now int64) (remaining int64, retryAfter, reset time.Duration) {
	backlog := max(0, tat-now)
	free := p.Capacity - backlog
	if free >= p.Interval {
		return free / p.Interval, 0, time.Duration(backlog)
	}
	return 0, time.Duration(p.Interval - free), time.Duration(backlog)
}

// NextToken is how long after now the bucket of TAT tat gains its next
// whole token: the RateLimit field's t ("seconds until additional quota is
// made available"). It equals RetryAfter when no token is left, is zero
// for a full bucket, and is never more than RetryAfter or Reset.
func (p Params) NextToken(tat, now int64) time.Duration {
	backlog := max(0, tat-now)
	if free := p.Capacity - backlog; free < p.Interval {
		return time.Duration(p.Interval - free)
	}
	if backlog == 0 {
		return 0
	}
	if r := backlog % p.Interval; r != 0 {
		return time.Duration(r)
	}
	return time.Duration(p.Interval)
}
