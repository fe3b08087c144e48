package breakwater

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/breakwater-go/breakwater/internal/gcra"
	"github.com/breakwater-go/breakwater/internal/keyed"
)

// rateLimitConfig is the configuration of a registry of token buckets.
type rateLimitConfig struct {
	start   time.Time // the limiters' clock origin
	shared  SharedLimiter
	limit   rate.Limit
	burst   int
	maxWait time.Duration
	maxKeys int
	idleTTL time.Duration
}

// newRateLimitConfig returns the defaults of a registry of limit tokens
// per second and burst tokens.
func newRateLimitConfig(limit rate.Limit, burst int) rateLimitConfig {
	return rateLimitConfig{start: time.Now(), limit: limit, burst: burst, maxWait: defaultMaxWait, maxKeys: defaultMaxKeys, idleTTL: defaultIdleTTL}
}

// validate reports every invalid value of c, and errs, its options'.
func (c *rateLimitConfig) validate(errs []error) error {
	if !(c.limit > 0 && c.limit < rate.Inf) {
		errs = append(errs, fmt.Errorf("breakwater: rate limit must be > 0 and finite, got %v (leave the rate limit out for none)", float64(c.limit)))
	}
	if c.burst < 1 {
		errs = append(errs, fmt.Errorf("breakwater: rate limit burst must be >= 1, got %d", c.burst))
	}
	if c.maxWait < 0 {
		errs = append(errs, fmt.Errorf("breakwater: rate limit wait must be >= 0, got %s", c.maxWait))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: rate limiter keys need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	return errors.Join(errs...)
}

// rateLimiter is a token bucket for one key: it holds up to burst tokens,
// gains limit tokens per second, and every admitted request takes one. It
// runs the generic cell rate algorithm (GCRA), the token bucket kept as one
// atomic time value updated by compare-and-swap: no lock and no allocation
// per request. Waiting requests are served in arrival order: each one
// reserves its token up front, as [rate.Limiter.Reserve] does, and gives
// it back when it gives up. With a [SharedLimiter], admissions ask the
// shared store instead, and reads describe only what this replica knows:
// refusals the store gave, until they end, and the local share used while
// the store fails. It is safe for concurrent use.
type rateLimiter struct {
	// What an inbound admission reads of it, first: the TAT and the
	// shared store, in the cache line of the registry entry the limiter
	// is allocated with (keyed.NewEmbedded); the policy and the clock's
	// origin are every limiter's of the registry.
	cell   gcra.Cell
	shared SharedLimiter
	p      gcra.Params
	start  time.Time // the clock's origin

	key     string
	limit   rate.Limit
	burst   int
	maxWait time.Duration
	refused atomic.Int64 // shared: the store refused until then (clock ns)
	fell    atomic.Bool  // shared: the store failed since it last answered
	owes    atomic.Bool  // shared: and the local share admitted meanwhile
}

func (c *rateLimitConfig) initLimiter(key string, l *rateLimiter) {
	*l = rateLimiter{key: key, limit: c.limit, burst: c.burst, maxWait: c.maxWait, p: gcra.NewParams(c.limit, c.burst), start: c.start, shared: c.shared}
}

// now is the limiter's clock: monotonic nanoseconds since its origin.
func (l *rateLimiter) now() int64 { return int64(time.Since(l.start)) }

// wait takes a token, waiting until dl at the latest (zero: no deadline
// but ctx's); see [RateLimiters.Wait].
func (l *rateLimiter) wait(ctx context.Context, dl time.Time) error {
	if l == nil {
		return nil
	}
	maxWait := l.maxWait
	if left, ok := timeLeft(ctx, dl, time.Now()); ok && left <= maxWait {
		maxWait = max(0, left-1) // a wait must end before the deadline
	}
	p := l.p
	var ok bool
	var delay int64
	if l.shared != nil {
		var st RateLimitSnapshot
		var d time.Duration
		st, d, p = l.admitShared(ctx, maxWait)
		ok, delay = !st.Limited, int64(d)
		if !ok {
			delay = int64(st.RetryAfter)
		}
	} else {
		ok, delay, _, _ = l.cell.Take(p, l.now, int64(maxWait))
	}
	if !ok {
		return rejected(ErrRateLimited, l.key, l.start.Add(time.Duration(l.now()+delay)))
	}
	if delay == 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(delay))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		if p.Interval != 0 {
			l.cell.Cancel(p) // a turn reserved in the shared store stays spent
		}
		return ctx.Err()
	}
}

// take takes a token if one is available now and reports the quota left;
// a shared limiter's round trip runs on ctx.
func (l *rateLimiter) take(ctx context.Context) RateLimitSnapshot {
	if l.shared != nil {
		st, _, _ := l.admitShared(ctx, 0)
		return st
	}
	ok, _, tat, now := l.cell.Take(l.p, l.now, 0)
	st := l.status(l.p, tat, now)
	st.Limited = !ok
	return st
}

// status describes the bucket of TAT tat at now under policy p.
func (l *rateLimiter) status(p gcra.Params, tat, now int64) RateLimitSnapshot {
	rem, retry, reset := p.Status(tat, now)
	return RateLimitSnapshot{Key: l.key, Limit: l.limit, Burst: l.burst, Remaining: int(rem), Limited: rem == 0, RetryAfter: retry, Reset: reset}
}

// reset fills the bucket again. Requests waiting for a token keep their
// turns.
func (l *rateLimiter) reset() {
	l.cell.TAT.Store(0)
	l.refused.Store(0)
}

// weigh tells the registry that a full bucket is as good as new and one
// still refilling, or fallen back from its shared store (a new one would
// start its share empty again), is worth keeping (see [keyed.Map]).
func (l *rateLimiter) weigh(now time.Time) keyed.Keep {
	t := int64(now.Sub(l.start))
	if l.cell.TAT.Load() <= t && l.refused.Load() <= t && !l.fell.Load() {
		return keyed.None
	}
	return keyed.Soft
}

// snapshot returns the limiter's current state.
func (l *rateLimiter) snapshot() RateLimitSnapshot {
	now := l.now()
	st := l.localStatus(now)
	st.Tokens = l.localParams().Tokens(l.cell.TAT.Load(), now)
	if st.Remaining == 0 {
		st.Tokens = min(st.Tokens, 0)
	}
	st.RetryAfterSeconds = st.RetryAfter.Seconds()
	return st
}

// RateLimiters is a registry of token buckets, one per key, all with the
// same limit and burst, each holding up to burst tokens and gaining limit
// tokens per second; every admitted request takes one. They run the
// generic cell rate algorithm (GCRA), the token bucket kept as one atomic
// time value updated by compare-and-swap: no lock and no allocation per
// request. It is safe for concurrent use.
//
// [RateLimiters.Wait] waits for a token when the wait fits (see
// [WithMaxWait]) and refuses at once otherwise; waiting requests are served
// in arrival order, each reserving its token up front, as
// [rate.Limiter.Reserve] does, and giving it back when it gives up.
// [RateLimiters.Take] admits or refuses without waiting, and reports the
// quota left. With [WithSharedLimiter], admissions ask the shared store
// instead (see [SharedLimiter]), and snapshots describe only what this
// replica knows: refusals the store gave, until they end, and the local
// share used while the store fails.
//
// The registry is bounded ([WithKeyLimits]): buckets not used for idleTTL
// are evicted (an evicted key starts again with a full bucket), and a full
// registry makes room for a new key at once by evicting the bucket of a
// key not used lately, a full bucket rather than one still refilling; a
// new key never shares another key's bucket, so its first request is never
// refused for what other keys did. Reads never create a bucket: a key never
// used has a full one.
type RateLimiters struct {
	cfg rateLimitConfig
	m   *keyed.Map[*rateLimiter]
}

// NewRateLimiters returns a registry of token buckets of limit tokens per
// second (positive and finite) and burst tokens (at least 1) each,
// configured by opts ([WithMaxWait], [WithKeyLimits], [WithSharedLimiter]),
// or an error describing every invalid argument or option.
func NewRateLimiters(limit rate.Limit, burst int, opts ...Option) (*RateLimiters, error) {
	c := newRateLimitConfig(limit, burst)
	s := settings{to: "NewRateLimiters", rate: &c}
	s.applyOptions(opts)
	return buildRateLimiters(c, s.errs)
}

// buildRateLimiters returns the registry of c, or an error describing
// errs, its options', and every invalid value.
func buildRateLimiters(c rateLimitConfig, errs []error) (*RateLimiters, error) {
	if err := c.validate(errs); err != nil {
		return nil, err
	}
	rs := &RateLimiters{cfg: c}
	rs.m = keyed.NewEmbedded(c.maxKeys, c.idleTTL, c.initLimiter, (*rateLimiter).weigh)
	return rs, nil
}

// get returns key's limiter, creating it if needed.
func (rs *RateLimiters) get(key string) *rateLimiter { return rs.m.Get(key) }

// Wait takes a token from key's bucket, waiting for it when the wait is at
// most the registry's longest wait ([WithMaxWait]) and shorter than the
// time left before ctx's deadline. A request that cannot have a token in
// time is refused at once with an [*Error] that matches [ErrRateLimited]
// and says when the next token comes (see [RetryAfter]); it reserves
// nothing, so it costs the others nothing. With a longest wait of 0, Wait
// never waits. If ctx ends while waiting, Wait gives the token back and
// returns ctx.Err().
func (rs *RateLimiters) Wait(ctx context.Context, key string) error {
	return rs.get(key).wait(ctx, time.Time{})
}

// Take takes a token from key's bucket if one is available now, never
// waiting, and reports the quota left (Limited when it refused): what an
// inbound rate limit needs to answer with RateLimit fields, or with 429 and
// Retry-After.
func (rs *RateLimiters) Take(key string) RateLimitSnapshot {
	return rs.get(key).take(context.Background())
}

// Reset fills key's bucket again; requests waiting for a token keep their
// turns.
func (rs *RateLimiters) Reset(key string) {
	if l, ok := rs.m.Lookup(key); ok {
		l.reset()
	}
}

// Snapshot returns the state of every bucket in the registry; a
// *RateLimiters is a source for the status page.
func (rs *RateLimiters) Snapshot() Snapshot {
	return Snapshot{At: time.Now(), RateLimiters: rs.snapshots()}
}

// snapshots returns the state of every bucket in the registry.
func (rs *RateLimiters) snapshots() []RateLimitSnapshot {
	if rs == nil {
		return nil
	}
	var out []RateLimitSnapshot
	rs.m.Each(func(_ string, l *rateLimiter) { out = append(out, l.snapshot()) })
	return out
}
