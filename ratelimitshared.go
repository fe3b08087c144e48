package breakwater

import (
	"context"
	"time"

	"github.com/breakwater-go/breakwater/internal/gcra"
)

// WithSharedLimiter makes the limiters keep their quotas in s, shared with
// the other replicas, instead of in this process alone: a limit of 100/s
// is then 100/s across all replicas together. Each admission is one call
// to s. A refusal from s is remembered until it ends, so a client over
// its limit costs no round trip. A turn that a waiting request reserved in
// s and then gave up stays spent. nil keeps the limiters local. It
// configures [NewRateLimiters] and [WithRateLimit]. Default: local.
//
// While s fails, each replica admits by its local share of the limit,
// limit/s.Replicas() per second with burst/s.Replicas() tokens (at least
// 1), whatever the other replicas ask: a replica that takes most of the
// traffic is refused what its share does not cover, even when the limit
// would have admitted it, and the shares of idle replicas go unused. A
// key's share starts empty when the key falls back (the store may have
// spent the whole burst just before): it admits its first request about
// s.Replicas()/limit seconds later (at most burst/limit + that). When s
// answers again, s is a [SharedCharger] and the share admitted anything,
// the key charges s with the share's backlog before its first shared
// admission, so that the store's bucket, which refilled meanwhile, holds
// no more than the share did. Across replicas that lose and regain the
// store together (it is down, paused or too slow for all), a limit so
// admits at most limit + burst requests in any 1 s window, seconds with
// fallbacks included, provided burst >= s.Replicas() (each share keeps a
// burst of at least 1). A replica cut off from the store
// while the others still reach it admits its share on top of what they
// admit: up to limit/s.Replicas() per second more for as long as that
// lasts.
func WithSharedLimiter(s SharedLimiter) Option {
	return option(func(st *settings) {
		if st.rate == nil {
			st.reject("WithSharedLimiter")
			return
		}
		st.note("WithSharedLimiter")
		st.rate.shared = s
	})
}

// admitShared is one admission through the shared store, reserving up to
// maxWait ahead; delay is the wait before going. When the store failed
// and the local share answered, p is the share's policy (for giving back a
// reserved turn); otherwise p is zero.
func (l *rateLimiter) admitShared(ctx context.Context, maxWait time.Duration) (st RateLimitSnapshot, delay time.Duration, p gcra.Params) {
	now := l.now()
	if until := l.refused.Load(); now < until && time.Duration(until-now) > maxWait {
		return l.refusal(time.Duration(until - now)), 0, gcra.Params{}
	}
	err := l.charge(ctx)
	if err == nil {
		st, delay, err = l.shared.Take(ctx, l.key, l.limit, l.burst, maxWait)
	}
	if err == nil {
		if l.fell.Load() {
			l.owes.Store(false)
			l.fell.Store(false)
		}
		st.Key, st.Limit, st.Burst = l.key, l.limit, l.burst
		if st.Limited {
			st.RetryAfter = max(st.RetryAfter, time.Nanosecond)
			l.refused.Store(now + int64(st.RetryAfter))
			delay = 0
		}
		return st, max(0, delay), gcra.Params{}
	}
	p = l.localParams()
	if l.fell.CompareAndSwap(false, true) {
		// The store may have spent the whole burst just before it failed:
		// the share starts empty (of the whole limit's span at least, so
		// that the shares' backlogs add up to the store's).
		for n := l.now(); ; {
			old := l.cell.TAT.Load()
			if l.cell.TAT.CompareAndSwap(old, max(old, n+max(p.Capacity, l.p.Capacity))) {
				break
			}
		}
	}
	// The clock is read again: the store may have taken its whole budget.
	ok, d, tat, at := l.cell.Take(p, l.now, int64(maxWait))
	st = l.status(p, tat, at)
	st.Limited = !ok
	if !ok {
		return st, 0, gcra.Params{}
	}
	l.owes.Store(true)
	return st, time.Duration(d), p
}

// charge tells the store, before the first admission it answers after the
// key fell back, what the local share admitted (see [SharedCharger]): when
// it admitted anything, the share's backlog, scaled to the whole limit's
// bucket. A store that cannot be charged is not asked. The key is shared
// again once the store answered its admission.
func (l *rateLimiter) charge(ctx context.Context) error {
	if !l.fell.Load() {
		return nil
	}
	if c, ok := l.shared.(SharedCharger); ok && l.owes.Load() {
		p := l.localParams()
		backlog := max(0, l.cell.TAT.Load()-l.now())
		scaled := int64(float64(min(backlog, 2*p.Capacity)) * float64(l.p.Capacity) / float64(p.Capacity))
		if err := c.Charge(ctx, l.key, l.limit, l.burst, time.Duration(scaled)); err != nil {
			return err
		}
	}
	return nil
}

// refusal is the status of a cached refusal that ends after retry: the
// bucket holds less than one token, so it is full again retry plus
// burst-1 intervals later.
func (l *rateLimiter) refusal(retry time.Duration) RateLimitSnapshot {
	return RateLimitSnapshot{Key: l.key, Limit: l.limit, Burst: l.burst, Limited: true, RetryAfter: retry, Reset: retry + time.Duration(l.p.Capacity-l.p.Interval)}
}

// localParams is the policy of the local bucket: the whole limit, or with
// a shared limiter the replica's share of it.
func (l *rateLimiter) localParams() gcra.Params {
	if l.shared == nil {
		return l.p
	}
	return l.p.Share(l.shared.Replicas())
}

// localStatus is what this replica knows of its quota at now: a refusal
// the shared store gave, while it lasts, or the local bucket.
func (l *rateLimiter) localStatus(now int64) RateLimitSnapshot {
	if l.shared != nil {
		if until := l.refused.Load(); now < until {
			return l.refusal(time.Duration(until - now))
		}
	}
	return l.status(l.localParams(), l.cell.TAT.Load(), now)
}
