package breakwater

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// SharedLimiter keeps rate limits in a store that the replicas of a
// service share, so that a limit holds across all of them together: the
// per-client limit of a [ClientRateLimit], or a quota of requests to an
// upstream. The Redis adapter (module
// github.com/breakwater-go/breakwater/redisstore) implements it; install
// one with [WithSharedLimiter].
//
// Implementations must be safe for concurrent use.
type SharedLimiter interface {
	// Take asks for one request of key's quota of limit requests per
	// second with a burst of burst, by the same GCRA the local limiter
	// runs. A request that would have to wait at most maxWait (0: not at
	// all) for its turn reserves it: st.Limited is false and delay is how
	// long to wait before going. Otherwise st.Limited is true, nothing is
	// reserved, and st.RetryAfter says when a request would be admitted.
	// The other fields of st are its Remaining and Reset, as far as the
	// store knows them.
	//
	// An error means the store could not answer within its own budget;
	// the caller then admits by its local share of the limit (see
	// Replicas), so Take must return quickly, never block on the network
	// for longer than a few milliseconds.
	Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (st RateLimitSnapshot, delay time.Duration, err error)
	// Replicas is how many replicas share the limits (at least 1): while
	// the store fails, each replica admits limit/Replicas requests per
	// second on its own.
	Replicas() int
}

// SharedCharger is a [SharedLimiter] that can be told what a replica
// admitted on its own while the store failed. The limiters call Charge
// once, before the first admission the store answers after their local
// share admitted: backlog is the share's backlog (how far its bucket is
// from full), scaled to the whole limit's bucket, and the store's bucket
// must then hold at most what a bucket of that backlog holds (its TAT at
// least now + backlog; one further ahead stays). An error leaves the
// limiter on its share, as a failed Take does. The Redis adapter
// implements it.
type SharedCharger interface {
	SharedLimiter
	Charge(ctx context.Context, key string, limit rate.Limit, burst int, backlog time.Duration) error
}

// ClusterBus carries breaker trips and pauses between the replicas of a
// service (see [WithClusterBus]). One bus may carry both: each event says
// which it is ([ClusterEvent.Mechanism]). A replica publishes only what
// it saw itself; what it receives it applies without publishing again, so
// nothing echoes. The Redis adapter implements it.
//
// Implementations must be safe for concurrent use, carry every field of
// an event, and deliver to Subscribe's functions only events that other
// replicas published (or that a periodic read of the shared state finds
// still in force).
type ClusterBus interface {
	// Publish sends e to the other replicas. It must not block: calls run
	// on the request path.
	Publish(e ClusterEvent)
	// Subscribe calls fn with every event from the other replicas until
	// the bus is closed; fn must return quickly. Breakers and pause gates
	// that share a bus each subscribe, and each applies only the events
	// of its own mechanism.
	Subscribe(fn func(ClusterEvent))
}

// ClusterEvent is one change of shared state: a key opened (a breaker
// tripped) or paused for For, or, when For is 0, closed again (a breaker
// reset, a pause resumed).
type ClusterEvent struct {
	Key string
	// For is how long the key stays open or paused from the moment the
	// event was published; 0 closes it.
	For time.Duration
	// Manual marks a Trip, Reset or Resume made by hand: it applies on
	// every replica at once, whatever quorum the bus requires.
	Manual bool
	// Mechanism is whose state changed: [MechBreaker] for a breaker's
	// trip or reset, [MechPause] for a pause gate's pause or resume.
	// Breakers apply only MechBreaker events and pause gates only
	// MechPause ones, so a pause never opens a breaker and a trip never
	// pauses a key. An event of any other mechanism, or of none (from a
	// bus that does not carry the field), is dropped.
	Mechanism Mechanism
}

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
func (l *rateLimiter) admitShared(ctx context.Context, maxWait time.Duration) (st RateLimitSnapshot, delay time.Duration, p gcraParams) {
	now := l.now()
	if until := l.refused.Load(); now < until && time.Duration(until-now) > maxWait {
		return l.refusal(time.Duration(until - now)), 0, gcraParams{}
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
		return st, max(0, delay), gcraParams{}
	}
	p = l.localParams()
	if l.fell.CompareAndSwap(false, true) {
		// The store may have spent the whole burst just before it failed:
		// the share starts empty (of the whole limit's span at least, so
		// that the shares' backlogs add up to the store's).
		for n := l.now(); ; {
			old := l.cell.tat.Load()
			if l.cell.tat.CompareAndSwap(old, max(old, n+max(p.capacity, l.p.capacity))) {
				break
			}
		}
	}
	// The clock is read again: the store may have taken its whole budget.
	ok, d, tat, at := l.cell.take(p, l.now, int64(maxWait))
	st = l.status(p, tat, at)
	st.Limited = !ok
	if !ok {
		return st, 0, gcraParams{}
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
		backlog := max(0, l.cell.tat.Load()-l.now())
		scaled := int64(float64(min(backlog, 2*p.capacity)) * float64(l.p.capacity) / float64(p.capacity))
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
	return RateLimitSnapshot{Key: l.key, Limit: l.limit, Burst: l.burst, Limited: true, RetryAfter: retry, Reset: retry + time.Duration(l.p.capacity-l.p.interval)}
}

// localParams is the policy of the local bucket: the whole limit, or with
// a shared limiter the replica's share of it.
func (l *rateLimiter) localParams() gcraParams {
	if l.shared == nil {
		return l.p
	}
	return l.p.share(l.shared.Replicas())
}

// localStatus is what this replica knows of its quota at now: a refusal
// the shared store gave, while it lasts, or the local bucket.
func (l *rateLimiter) localStatus(now int64) RateLimitSnapshot {
	if l.shared != nil {
		if until := l.refused.Load(); now < until {
			return l.refusal(time.Duration(until - now))
		}
	}
	return l.status(l.localParams(), l.cell.tat.Load(), now)
}

// applyRemote applies another replica's pause or resume, and drops any
// other event.
func (g *PauseGates) applyRemote(e ClusterEvent) {
	switch {
	case e.Mechanism != MechPause:
		return
	case e.For > 0:
		g.pause(e.Key, e.For, false)
	default:
		g.resume(e.Key)
	}
}

// joinCluster publishes the registry's own openings and resets and applies
// the other replicas' ones.
func (bs *Breakers) joinCluster() {
	bus := bs.cfg.bus
	if bus == nil {
		return
	}
	bs.addListener(func(t Transition) {
		switch {
		case t.To == StateOpen && (t.Reason == ReasonFailures || t.Reason == ReasonProbeFailed):
			bus.Publish(ClusterEvent{Key: t.Key, For: t.OpenFor, Mechanism: MechBreaker})
		case t.To == StateOpen && t.Reason == ReasonTrip:
			bus.Publish(ClusterEvent{Key: t.Key, For: t.OpenFor, Manual: true, Mechanism: MechBreaker})
		case t.To == StateClosed && t.Reason == ReasonReset:
			bus.Publish(ClusterEvent{Key: t.Key, Manual: true, Mechanism: MechBreaker})
		}
	})
	bus.Subscribe(bs.applyRemote)
}

// applyRemote applies another replica's trip or reset, and drops any
// other event.
func (bs *Breakers) applyRemote(e ClusterEvent) {
	if e.Mechanism != MechBreaker {
		return
	}
	if e.For <= 0 {
		if b, ok := bs.Lookup(e.Key); ok && b.State() != StateClosed {
			b.reset(ReasonCluster)
		}
		return
	}
	b, pin := bs.acquire(e.Key) // kept in the registry until opened
	defer pin.Release()
	j := bs.cfg.jitter
	if j < defaultOpenJitter {
		j = defaultOpenJitter
	}
	d := time.Duration(addSat(int64(e.For), int64(fracSat(e.For, rand.Float64()*j))))
	b.forceOpen(d, ReasonCluster, func(now int64) bool {
		// Already open for at least as long: nothing to do (a trip seen
		// again by a periodic read, or one this replica had too).
		_, s := unpack(b.sg.Load())
		return s != StateOpen || b.openUntil.Load() < addSat(now, int64(e.For))
	})
}

// explainShared adds the "across replicas" part of [Transport.Explain]:
// which of the transport's state is shared, and what that costs.
func (t *Transport) explainShared(b *strings.Builder, line func(indent int, label, format string, args ...any)) {
	b.WriteString("  across replicas\n")
	switch rs := t.limits.rate; {
	case rs == nil:
		line(2, "rate limit", "none")
	case rs.cfg.shared != nil:
		line(2, "rate limit", "shared: one quota for all replicas, one store round trip per attempt; while the store fails, this replica's share (1/%d)", rs.cfg.shared.Replicas())
	default:
		line(2, "rate limit", "this replica's own")
	}
	switch g := t.limits.gates; {
	case g == nil:
		line(2, "pauses", "none")
	case g.cfg.bus != nil:
		line(2, "pauses", "shared: a pause set here holds every replica, sent after the fact (checks stay local)")
	default:
		line(2, "pauses", "this replica's own")
	}
	switch bc := &t.breakers.cfg; {
	case bc.mode == modeDisabled:
		line(2, "breaker trips", "none")
	case bc.bus != nil:
		line(2, "breaker trips", "shared: openings and resets reach every replica after the fact (admission stays local)")
	default:
		line(2, "breaker trips", "this replica's own")
	}
}
