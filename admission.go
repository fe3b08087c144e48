package breakwater

import (
	"errors"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// limits are the admission stages a [Transport] runs for every attempt
// between the breaker and the attempt timeout: the pause gate, the token
// bucket and the bulkhead. Each is nil when not configured.
type limits struct {
	gates  *PauseGates
	rate   *RateLimiters
	bulk   *Bulkheads
	pacing bool
	obs    Observer // reports waits; nil when nothing observes
}

// minReportedWait separates an admission that waited from one that did
// not: the fast paths take well under a microsecond.
const minReportedWait = 50 * time.Microsecond

// limitsConfig is the part of a Transport's configuration that builds its
// limits. Later options replace earlier ones.
type limitsConfig struct {
	rateSet   bool
	rateLimit rate.Limit
	rateBurst int
	rateOpts  []RateLimitOption
	rate      *RateLimiters

	bulkSet   bool
	bulkLimit int
	bulkOpts  []BulkheadOption
	bulk      *Bulkheads

	noPause   bool
	pauseOpts []PauseOption
	gates     *PauseGates
	gatesSet  bool

	pacing    bool
	pacingSet bool // WithRateLimitHeaders was given
}

// WithRateLimit gives every key a token bucket of limit requests per
// second with burst tokens; each attempt takes a token, after the breaker
// admits it and before the concurrency limit. See [RateLimitOption] for
// wait and reject modes. A refusal ends the call with an [*Error] matching [ErrRateLimited]
// (category [Rejected]: never retried, not charged to the breaker).
// [Unlimited] removes the rate limit. Default: none.
func WithRateLimit(limit rate.Limit, burst int, opts ...RateLimitOption) Option {
	return optionFunc(func(c *config) {
		c.limits.rateSet, c.limits.rate = true, nil
		c.limits.rateLimit, c.limits.rateBurst, c.limits.rateOpts = limit, burst, opts
	})
}

// WithRateLimiters shares an existing registry of token buckets (for
// example between several Transports to one upstream); nil removes the
// rate limit.
func WithRateLimiters(rs *RateLimiters) Option {
	return optionFunc(func(c *config) { c.limits.rateSet, c.limits.rate = false, rs })
}

// WithPauseGate configures the pause gate, which is on by default (see
// [PauseGates]): a 429 with a hint pauses its key, 503s with a hint hold
// it only while they answer most of its attempts, and later attempts to
// the key wait for their turn when their deadline allows it, or fail at
// once with an [*Error] matching [ErrPaused] (category [Rejected]). The pause is capped by
// [WithMaxPause], by default the [WithMaxRetryAfter] value.
func WithPauseGate(opts ...PauseOption) Option {
	return optionFunc(func(c *config) {
		c.limits.noPause, c.limits.gatesSet, c.limits.gates = false, false, nil
		c.limits.pauseOpts = append(c.limits.pauseOpts, opts...)
	})
}

// WithPauseGates shares an existing set of pause gates; nil removes the
// pause gate.
func WithPauseGates(g *PauseGates) Option {
	return optionFunc(func(c *config) { c.limits.noPause, c.limits.gatesSet, c.limits.gates = g == nil, g != nil, g })
}

// WithoutPauseGate removes the pause gate: throttled responses are still
// retried no earlier than their hint, but other calls are not held.
func WithoutPauseGate() Option {
	return optionFunc(func(c *config) { c.limits.noPause, c.limits.gatesSet, c.limits.gates = true, false, nil })
}

// WithRateLimitHeaders, when on, paces calls on the rate limit fields of
// every response (see [ParseQuotaReset]): when the upstream says the
// quota is spent until T, the key is paused until T through the pause
// gate (under the same cap as a Retry-After, [WithMaxRetryAfter]), so the
// next call waits instead of being answered 429. It needs the pause gate.
// Default: on, and off without the pause gate.
func WithRateLimitHeaders(on bool) Option {
	return optionFunc(func(c *config) { c.limits.pacing, c.limits.pacingSet = on, true })
}

// WithConcurrencyLimit gives every key a bulkhead of limit slots; each
// attempt holds a slot, after its token and before the attempt timeout,
// until its response body is closed or read to the end, or until the
// attempt's context ends (the attempt timeout, the call timeout or the
// caller's cancellation), whichever comes first. No slot is held while
// backing off between attempts. A refusal ends the call with an
// [*Error] matching [ErrConcurrencyLimit] (category [Rejected]: never retried, not charged to
// the breaker). Default: none.
func WithConcurrencyLimit(limit int, opts ...BulkheadOption) Option {
	return optionFunc(func(c *config) {
		c.limits.bulkSet, c.limits.bulk = true, nil
		c.limits.bulkLimit, c.limits.bulkOpts = limit, opts
	})
}

// WithBulkheads shares an existing registry of bulkheads (for example
// between a Transport and inbound middleware guarding the same upstream);
// nil removes the concurrency limit.
func WithBulkheads(bs *Bulkheads) Option {
	return optionFunc(func(c *config) { c.limits.bulkSet, c.limits.bulk = false, bs })
}

// build makes the limits of a Transport whose key bounds and longest
// Retry-After are given.
func (lc *limitsConfig) build(maxKeys int, idleTTL, maxRetryAfter time.Duration) (limits, error) {
	var l limits
	var errs []error
	if lc.rateSet {
		rs, err := newRateLimiters(lc.rateLimit, lc.rateBurst, []RateLimitOption{WithRateLimitKeys(maxKeys, idleTTL)}, lc.rateOpts)
		errs = append(errs, err)
		l.rate = rs
	} else {
		l.rate = lc.rate
	}
	if lc.bulkSet {
		bs, err := newBulkheads(lc.bulkLimit, []BulkheadOption{WithBulkheadKeys(maxKeys, idleTTL)}, lc.bulkOpts)
		errs = append(errs, err)
		l.bulk = bs
	} else {
		l.bulk = lc.bulk
	}
	switch {
	case lc.noPause:
	case lc.gatesSet:
		l.gates = lc.gates
	default:
		defaults := []PauseOption{WithPauseKeys(maxKeys, idleTTL), WithMaxPause(orDefault(maxRetryAfter, DefaultMaxRetryAfter))}
		g, err := newPauseGates(defaults, lc.pauseOpts)
		errs = append(errs, err)
		l.gates = g
	}
	if lc.pacing && lc.pacingSet && l.gates == nil {
		errs = append(errs, errors.New("breakwater: WithRateLimitHeaders needs the pause gate"))
	}
	l.pacing = lc.pacing && l.gates != nil
	return l, errors.Join(errs...)
}

// admit runs the pause gate, the token bucket and the bulkhead for one
// attempt of c, in that order, waiting until dl at the latest (the call's
// deadline; now for a hedge, which never waits). A token
// taken for an attempt that the bulkhead then refuses stays spent: the
// bucket paces attempts offered, not only attempts sent. On
// success c.slot holds the attempt's concurrency slot, if any. With an
// observer, each wait is reported as an [EventWait].
func (l *limits) admit(c *call, dl time.Time) error {
	// Time the admission only when something could make it wait: a token
	// bucket, a bulkhead, or a pause somewhere (one atomic load).
	var t0 time.Time
	if l.obs != nil && (l.rate != nil || l.bulk != nil || l.gates != nil && l.gates.latest.Load() != 0) {
		t0 = time.Now()
	}
	if l.gates != nil {
		probe, err := l.gates.wait(c.ctx, c.key, dl, c.throttled)
		if err != nil {
			return err
		}
		c.gateProbe = probe
		t0 = l.waited(c, MechPause, t0)
	}
	if l.rate != nil {
		if err := l.rate.m.Get(c.key).wait(c.ctx, dl); err != nil {
			l.probeLost(c)
			return err
		}
		t0 = l.waited(c, MechRateLimit, t0)
	}
	if l.bulk != nil {
		s, err := l.bulk.acquire(c.ctx, c.key, dl)
		if err != nil {
			l.probeLost(c)
			return err
		}
		c.slot = s
		l.waited(c, MechConcurrency, t0)
	}
	return nil
}

// probeLost tells the pause gate that c, the probe after a pause, got no
// answer: the next call held may probe at once.
func (l *limits) probeLost(c *call) {
	if c.gateProbe {
		c.gateProbe = false
		l.gates.probeLost(c.key)
	}
}

// waited reports a wait for m that began at t0, if there was one, and
// returns when the next one begins.
func (l *limits) waited(c *call, m Mechanism, t0 time.Time) time.Time {
	if t0.IsZero() {
		return t0
	}
	now := time.Now()
	if d := now.Sub(t0); d >= minReportedWait {
		notify(l.obs, c.ctx, Event{Kind: EventWait, Key: c.name, Method: c.req.Method, Attempt: c.attempts, Mechanism: m, Duration: d, Endpoint: c.endpoint()})
	}
	return now
}

// observe feeds the result of c's latest attempt to the pause gate and the
// attempt's slot (see observeKey), and ends its probe after a pause.
func (l *limits) observe(c *call, resp *http.Response, o Outcome) {
	l.observeKey(c.key, &c.slot, resp, o)
	if l.gates != nil {
		if o.Status == 0 {
			l.probeLost(c)
		}
		c.gateProbe = false
	}
}

// observeKey feeds an attempt's result to key's pause gate (a throttled
// outcome with a hint, and rate limit fields when pacing) and tells the
// attempt's slot what an adaptive limit should learn from it.
func (l *limits) observeKey(key string, slot *Slot, resp *http.Response, o Outcome) {
	if l.gates != nil {
		l.gates.Observe(key, o)
		if l.pacing && resp != nil {
			l.gates.ObserveHeaders(key, resp.Header)
		}
	}
	slot.judge(o)
}
