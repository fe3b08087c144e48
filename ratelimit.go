package breakwater

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// Unlimited is the rate limit that installs no limiter: [NewRateLimiter]
// and [NewRateLimiters] return nil for it, and [WithRateLimit] removes a
// limiter set by an earlier option. It is [rate.Inf].
const Unlimited = rate.Inf

// Defaults of the rate limiters, pause gates and bulkheads.
const (
	// DefaultRateLimitWait is the longest a request waits for a token in
	// wait mode (the request's deadline may cut it shorter).
	DefaultRateLimitWait = 5 * time.Second
	// DefaultMaxKeys and DefaultKeyIdleTTL bound a registry of limiters,
	// gates or bulkheads: at most that many keys, idle ones evicted.
	DefaultMaxKeys    = 10_000
	DefaultKeyIdleTTL = 10 * time.Minute
)

// A RateLimitOption configures [NewRateLimiter], [NewRateLimiters] and
// [WithRateLimit].
type RateLimitOption interface{ applyRateLimit(*rateLimitConfig) }

type rateLimitOptionFunc func(*rateLimitConfig)

func (f rateLimitOptionFunc) applyRateLimit(c *rateLimitConfig) { f(c) }

type rateLimitConfig struct {
	start   time.Time // the limiters' clock origin
	shared  SharedLimiter
	limit   rate.Limit
	burst   int
	maxWait time.Duration
	maxKeys int
	idleTTL time.Duration
}

// WithRateLimitWait sets the longest a request waits for a token. 0 selects
// reject mode: a request that finds no token is refused at once and never
// waits. Otherwise a request waits for its turn (waiters are served in
// arrival order) when the wait is at most d and shorter than the time left
// before its context's deadline, and is refused at once otherwise. Use a
// very long d to be bounded by the deadline alone. Default:
// [DefaultRateLimitWait].
func WithRateLimitWait(d time.Duration) RateLimitOption {
	return rateLimitOptionFunc(func(c *rateLimitConfig) { c.maxWait = d })
}

// WithRateLimitKeys bounds a [RateLimiters] registry: at most maxKeys
// limiters, and limiters not used for idleTTL are evicted (an evicted key
// starts again with a full bucket). A full registry makes room for a new
// key at once by evicting the limiter of a key not used lately, a full
// bucket rather than one still refilling; a new key never shares another
// key's bucket, so its first request is never refused for what other keys
// did. Defaults: [DefaultMaxKeys] and [DefaultKeyIdleTTL]; a [Transport]
// uses its [WithKeyLimits] values.
func WithRateLimitKeys(maxKeys int, idleTTL time.Duration) RateLimitOption {
	return rateLimitOptionFunc(func(c *rateLimitConfig) { c.maxKeys, c.idleTTL = maxKeys, idleTTL })
}

func newRateLimitConfig(limit rate.Limit, burst int, defaults []RateLimitOption, opts []RateLimitOption) (rateLimitConfig, error) {
	c := rateLimitConfig{start: time.Now(), limit: limit, burst: burst, maxWait: DefaultRateLimitWait, maxKeys: DefaultMaxKeys, idleTTL: DefaultKeyIdleTTL}
	for _, o := range defaults {
		o.applyRateLimit(&c)
	}
	for _, o := range opts {
		if o != nil {
			o.applyRateLimit(&c)
		}
	}
	if c.limit >= Unlimited {
		c.limit = Unlimited
		return c, nil
	}
	var errs []error
	if !(c.limit > 0) {
		errs = append(errs, fmt.Errorf("breakwater: rate limit must be > 0 or Unlimited, got %v", float64(c.limit)))
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
	return c, errors.Join(errs...)
}

// RateLimiter is a token bucket for one key: it holds up to burst tokens,
// gains limit tokens per second, and every admitted request takes one. It
// runs the generic cell rate algorithm (GCRA), the token bucket kept as one
// atomic time value updated by compare-and-swap: no lock and no allocation
// per request. It is safe for concurrent use.
//
// Most callers use [RateLimiter.Wait], which waits for a token when the
// wait fits (wait mode) or refuses at once (reject mode, or a wait that
// does not fit), and [RateLimiter.Allow] to admit or refuse without
// waiting. Waiting requests are served in arrival order: each one reserves
// its token up front, as [rate.Limiter.Reserve] does, and gives it back when
// it gives up.
//
// With [WithSharedLimiter], admissions ask the shared store instead (see
// [SharedLimiter]), and reads ([RateLimiter.Status], [RateLimiter.Peek],
// snapshots) describe only what this replica knows: refusals the store
// gave, until they end, and the local share used while the store fails.
//
// A nil *RateLimiter is the limiter of [Unlimited]: it admits everything and
// reports a full quota. Build one with [NewRateLimiter] or get one from a
// [RateLimiters] registry.
type RateLimiter struct {
	key     string
	limit   rate.Limit
	burst   int
	maxWait time.Duration
	p       gcraParams
	start   time.Time // the clock's origin
	cell    gcra

	shared  SharedLimiter
	refused atomic.Int64 // shared: the store refused until then (clock ns)
}

// NewRateLimiter returns a token bucket of limit tokens per second and
// burst tokens (full at first), or an error describing every invalid
// argument or option. limit must be positive and burst at least 1, or limit
// must be [Unlimited]: then NewRateLimiter returns nil, which admits
// everything.
func NewRateLimiter(limit rate.Limit, burst int, opts ...RateLimitOption) (*RateLimiter, error) {
	cfg, err := newRateLimitConfig(limit, burst, nil, opts)
	if err != nil || cfg.limit == Unlimited {
		return nil, err
	}
	return cfg.newLimiter(""), nil
}

func (c *rateLimitConfig) newLimiter(key string) *RateLimiter {
	return &RateLimiter{key: key, limit: c.limit, burst: c.burst, maxWait: c.maxWait, p: newGCRAParams(c.limit, c.burst), start: c.start, shared: c.shared}
}

// now is the limiter's clock: monotonic nanoseconds since its origin.
func (l *RateLimiter) now() int64 { return int64(time.Since(l.start)) }

// Key returns the limiter's key ("" for one made by [NewRateLimiter]).
func (l *RateLimiter) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Limit returns the tokens gained per second ([Unlimited] for nil).
func (l *RateLimiter) Limit() rate.Limit {
	if l == nil {
		return Unlimited
	}
	return l.limit
}

// Burst returns the bucket's size (0 for nil).
func (l *RateLimiter) Burst() int {
	if l == nil {
		return 0
	}
	return l.burst
}

// Allow takes a token if one is available now and reports whether it did.
// It never waits.
func (l *RateLimiter) Allow() bool {
	if l == nil {
		return true
	}
	if l.shared != nil {
		st, _, _ := l.admitShared(context.Background(), 0)
		return st.Allowed
	}
	ok, _, _ := l.cell.take(l.p, l.now(), 0)
	return ok
}

// Wait takes a token, waiting for it in wait mode when the wait is at most
// the limiter's longest wait and shorter than the time left before ctx's
// deadline. A request that cannot have a token in time is refused at once
// with an [*Error] that matches [ErrRateLimited] and carries the
// wait it would have needed; it reserves nothing, so it costs the others
// nothing. In reject mode Wait never waits. If ctx ends while waiting,
// Wait gives the token back and returns ctx.Err().
func (l *RateLimiter) Wait(ctx context.Context) error { return l.wait(ctx, time.Time{}) }

// wait is Wait with an extra deadline dl (zero: none).
func (l *RateLimiter) wait(ctx context.Context, dl time.Time) error {
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
		var st RateStatus
		var d time.Duration
		st, d, p = l.admitShared(ctx, maxWait)
		ok, delay = st.Allowed, int64(d)
		if !ok {
			delay = int64(st.RetryAfter)
		}
	} else {
		ok, delay, _ = l.cell.take(p, l.now(), int64(maxWait))
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
		if p.interval != 0 {
			l.cell.cancel(p) // a turn reserved in the shared store stays spent
		}
		return ctx.Err()
	}
}

// Peek reports whether a request would be admitted now and, if not, how
// long until a token is available. It takes nothing.
func (l *RateLimiter) Peek() (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	st := l.localStatus(l.now())
	return st.RetryAfter == 0, st.RetryAfter
}

// RateStatus is a limiter's quota at one instant, with the numbers the
// RateLimit, RateLimit-Policy and Retry-After header fields need.
type RateStatus struct {
	// Allowed is, for [RateLimiter.Take], whether the request was admitted;
	// for [RateLimiter.Status], whether one would be admitted now.
	Allowed bool
	// Limit is the tokens gained per second and Burst the bucket's size:
	// the policy is Burst requests per Burst/Limit seconds.
	Limit rate.Limit
	Burst int
	// Remaining is the number of whole tokens left (after the request, for
	// Take), never negative.
	Remaining int
	// RetryAfter is how long until the next token: zero when Remaining is
	// positive, never zero when it is not.
	RetryAfter time.Duration
	// Reset is how long until the bucket is full again.
	Reset time.Duration
}

// Status reports the limiter's quota without taking a token. A nil
// limiter reports Allowed and [Unlimited].
func (l *RateLimiter) Status() RateStatus {
	if l == nil {
		return RateStatus{Allowed: true, Limit: Unlimited}
	}
	st := l.localStatus(l.now())
	st.Allowed = st.Remaining > 0
	return st
}

// Take is [RateLimiter.Allow] reporting the quota left afterwards: what an
// inbound rate limit needs to answer with RateLimit fields, or with 429 and
// Retry-After.
func (l *RateLimiter) Take() RateStatus { return l.take(context.Background()) }

func (l *RateLimiter) take(ctx context.Context) RateStatus {
	if l == nil {
		return RateStatus{Allowed: true, Limit: Unlimited}
	}
	if l.shared != nil {
		st, _, _ := l.admitShared(ctx, 0)
		return st
	}
	now := l.now()
	ok, _, tat := l.cell.take(l.p, now, 0)
	st := l.status(l.p, tat, now)
	st.Allowed = ok
	return st
}

// status describes the bucket of TAT tat at now under policy p.
func (l *RateLimiter) status(p gcraParams, tat, now int64) RateStatus {
	rem, retry, reset := p.status(tat, now)
	return RateStatus{Limit: l.limit, Burst: l.burst, Remaining: int(rem), RetryAfter: retry, Reset: reset}
}

// Reset fills the bucket again. Requests waiting for a token keep their
// turns.
func (l *RateLimiter) Reset() {
	if l == nil {
		return
	}
	l.cell.tat.Store(0)
	l.refused.Store(0)
}

// weigh tells the registry that a full bucket is as good as new and one
// still refilling is worth keeping (see [keyed.Map]).
func (l *RateLimiter) weigh(now time.Time) keyed.Keep {
	t := int64(now.Sub(l.start))
	if l.cell.tat.Load() <= t && l.refused.Load() <= t {
		return keyed.None
	}
	return keyed.Soft
}

// RateLimitSnapshot is a point-in-time view of one rate limiter.
type RateLimitSnapshot struct {
	Key string `json:"key"`
	// Limit is the tokens gained per second and Burst the bucket's size.
	Limit float64 `json:"limit_per_second"`
	Burst int     `json:"burst"`
	// Tokens is the bucket's content; negative while waiting requests
	// hold reservations.
	Tokens float64 `json:"tokens"`
	// Limited reports that no token is available now, and Wait how long
	// until one is.
	Limited     bool          `json:"limited"`
	Wait        time.Duration `json:"-"`
	WaitSeconds float64       `json:"wait_seconds,omitempty"`
}

// Snapshot returns the limiter's current state.
func (l *RateLimiter) Snapshot() RateLimitSnapshot {
	if l == nil {
		return RateLimitSnapshot{Limit: float64(Unlimited)}
	}
	now := l.now()
	st := l.localStatus(now)
	tokens := l.localParams().tokens(l.cell.tat.Load(), now)
	if st.Remaining == 0 {
		tokens = min(tokens, 0)
	}
	w := st.RetryAfter
	return RateLimitSnapshot{Key: l.key, Limit: float64(l.limit), Burst: l.burst, Tokens: tokens, Limited: w > 0, Wait: w, WaitSeconds: w.Seconds()}
}

// RateLimiters is a registry of token buckets, one [RateLimiter] per key,
// all with the same limit, burst and mode, created on first use and
// bounded in number (see [WithRateLimitKeys]). It is safe for concurrent
// use. Reads ([RateLimiters.Peek], [RateLimiters.Status], snapshots) never
// create a limiter: a key never used has a full bucket.
//
// A nil *RateLimiters is the registry of [Unlimited]: it admits everything.
type RateLimiters struct {
	cfg rateLimitConfig
	m   *keyed.Map[*RateLimiter]
}

// NewRateLimiters returns a registry of token buckets of limit tokens per
// second and burst tokens each, or an error describing every invalid
// argument or option. For limit [Unlimited] it returns nil, which admits
// everything.
func NewRateLimiters(limit rate.Limit, burst int, opts ...RateLimitOption) (*RateLimiters, error) {
	return newRateLimiters(limit, burst, nil, opts)
}

func newRateLimiters(limit rate.Limit, burst int, defaults, opts []RateLimitOption) (*RateLimiters, error) {
	cfg, err := newRateLimitConfig(limit, burst, defaults, opts)
	if err != nil || cfg.limit == Unlimited {
		return nil, err
	}
	rs := &RateLimiters{cfg: cfg}
	rs.m = keyed.New(cfg.maxKeys, cfg.idleTTL, cfg.newLimiter, (*RateLimiter).weigh)
	return rs, nil
}

// Get returns key's limiter, creating it if needed (nil for a nil
// registry).
func (rs *RateLimiters) Get(key string) *RateLimiter {
	if rs == nil {
		return nil
	}
	return rs.m.Get(key)
}

// Lookup returns key's limiter without creating it.
func (rs *RateLimiters) Lookup(key string) (*RateLimiter, bool) {
	if rs == nil {
		return nil, false
	}
	return rs.m.Lookup(key)
}

// Len reports how many limiters the registry holds.
func (rs *RateLimiters) Len() int {
	if rs == nil {
		return 0
	}
	return rs.m.Len()
}

// Limit returns the tokens each key gains per second ([Unlimited] for nil).
func (rs *RateLimiters) Limit() rate.Limit {
	if rs == nil {
		return Unlimited
	}
	return rs.cfg.limit
}

// Burst returns each key's bucket size (0 for nil).
func (rs *RateLimiters) Burst() int {
	if rs == nil {
		return 0
	}
	return rs.cfg.burst
}

// Allow takes a token from key's bucket if one is available now. See
// [RateLimiter.Allow].
func (rs *RateLimiters) Allow(key string) bool {
	if rs == nil {
		return true
	}
	return rs.m.Get(key).Allow()
}

// Wait takes a token from key's bucket. See [RateLimiter.Wait].
func (rs *RateLimiters) Wait(ctx context.Context, key string) error {
	return rs.Get(key).Wait(ctx)
}

// Take is [RateLimiters.Allow] reporting key's quota afterwards. See
// [RateLimiter.Take].
func (rs *RateLimiters) Take(key string) RateStatus { return rs.Get(key).Take() }

// take is Take on ctx (a shared limiter's round trip runs on it).
func (rs *RateLimiters) take(ctx context.Context, key string) RateStatus {
	return rs.Get(key).take(ctx)
}

// Peek reports whether key would be admitted now and, if not, how long
// until it would. See [RateLimiter.Peek].
func (rs *RateLimiters) Peek(key string) (ok bool, wait time.Duration) {
	l, found := rs.Lookup(key)
	if !found {
		return true, 0
	}
	return l.Peek()
}

// Status reports key's quota without taking a token. See
// [RateLimiter.Status].
func (rs *RateLimiters) Status(key string) RateStatus {
	if rs == nil {
		return RateStatus{Allowed: true, Limit: Unlimited}
	}
	l, found := rs.Lookup(key)
	if !found {
		return RateStatus{Allowed: true, Limit: rs.cfg.limit, Burst: rs.cfg.burst, Remaining: rs.cfg.burst}
	}
	return l.Status()
}

// Reset fills key's bucket again.
func (rs *RateLimiters) Reset(key string) {
	if l, ok := rs.Lookup(key); ok {
		l.Reset()
	}
}

// ResetAll fills every bucket again.
func (rs *RateLimiters) ResetAll() {
	if rs == nil {
		return
	}
	rs.m.Each(func(_ string, l *RateLimiter) { l.Reset() })
}

// Snapshot returns key's state, or false when no limiter exists for key.
func (rs *RateLimiters) Snapshot(key string) (RateLimitSnapshot, bool) {
	l, ok := rs.Lookup(key)
	if !ok {
		return RateLimitSnapshot{}, false
	}
	return l.Snapshot(), true
}

// Snapshots returns the state of every limiter in the registry.
func (rs *RateLimiters) Snapshots() []RateLimitSnapshot {
	if rs == nil {
		return nil
	}
	var out []RateLimitSnapshot
	rs.m.Each(func(_ string, l *RateLimiter) { out = append(out, l.Snapshot()) })
	return out
}
