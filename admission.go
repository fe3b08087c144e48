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
// rate and concurrency limits. Later options replace earlier ones.
type limitsConfig struct {
	rateSet   bool // WithRateLimit was given
	rateLimit rate.Limit
	rateBurst int
	rateOpts  []Option
	rate      *RateLimiters // shared with WithRateLimiters

	bulkSet   bool // WithConcurrencyLimit was given
	bulkLimit int
	bulkOpts  []Option
	bulk      *Bulkheads // shared with WithBulkheads
}

// WithRateLimit gives every key a token bucket of limit requests per
// second with burst tokens; each attempt takes a token, after the breaker
// admits it and before the concurrency limit. An attempt waits for its
// token within its deadline, up to [WithMaxWait] (default 5 s; 0 refuses at
// once). A refusal ends the call with an [*Error] matching
// [ErrRateLimited] (category [Rejected]: never retried, not charged to the
// breaker). opts configure the limit: [WithMaxWait], [WithKeyLimits],
// [WithSharedLimiter]. It configures [NewTransport]. Default: none.
func WithRateLimit(limit rate.Limit, burst int, opts ...Option) Option {
	return transportOption("WithRateLimit", false, func(c *config) {
		c.limits.rateSet = true
		c.limits.rateLimit, c.limits.rateBurst, c.limits.rateOpts = limit, burst, opts
	})
}

// WithRateLimiters makes the Transport use rs, token buckets you built
// (with [NewRateLimiters]) and may share, for example between several
// Transports to one upstream, instead of a rate limit of its own. It
// configures [NewTransport].
func WithRateLimiters(rs *RateLimiters) Option {
	return option(func(s *settings) {
		if rs == nil {
			s.fail("WithRateLimiters(nil): leave the option out for no rate limit")
			return
		}
		if c := s.forTransport("WithRateLimiters", false); c != nil {
			c.limits.rate = rs
		}
	})
}

// WithConcurrencyLimit gives every key a bulkhead of limit slots; each
// attempt holds a slot, after its token and before the attempt timeout,
// until its response body is closed or read to the end, or until the
// attempt's context ends (the attempt timeout, the call timeout or the
// caller's cancellation), whichever comes first. No slot is held while
// backing off between attempts. An attempt that finds every slot taken
// waits for one, in arrival order, within its deadline and up to
// [WithMaxWait] (default 5 s, as for a rate limit; 0 refuses at once). A
// refusal ends the call with an [*Error] matching [ErrConcurrencyLimit]
// (category [Rejected]: never retried, not charged to the breaker). opts
// configure the limit:
// [WithMaxWait], [WithMaxQueue], [WithAdaptiveLimit], [WithKeyLimits]. It
// configures [NewTransport]. Default: none.
func WithConcurrencyLimit(limit int, opts ...Option) Option {
	return transportOption("WithConcurrencyLimit", false, func(c *config) {
		c.limits.bulkSet = true
		c.limits.bulkLimit, c.limits.bulkOpts = limit, opts
	})
}

// WithBulkheads makes the Transport use bs, bulkheads you built (with
// [NewBulkheads]) and may share, for example between a Transport and
// inbound middleware guarding the same upstream, instead of a concurrency
// limit of its own. It configures [NewTransport].
func WithBulkheads(bs *Bulkheads) Option {
	return option(func(s *settings) {
		if bs == nil {
			s.fail("WithBulkheads(nil): leave the option out for no concurrency limit")
			return
		}
		if c := s.forTransport("WithBulkheads", false); c != nil {
			c.limits.bulk = bs
		}
	})
}

// buildLimits makes the admission stages of the Transport: its pause gate,
// rate limit and concurrency limit, each its own (with the Transport's key
// bounds and waits under its own options) or shared.
func (c *config) buildLimits() (limits, error) {
	var l limits
	var errs []error
	switch {
	case c.gates != nil:
		l.gates = c.gates
	case !c.noPause:
		pc := c.pause
		pc.maxKeys, pc.idleTTL = c.maxKeys, c.idleTTL
		pc.maxPause = orDefault(c.maxRetryAfter, defaultMaxRetryAfter)
		if c.bus != nil {
			pc.bus = c.bus
		}
		g, err := buildPauseGates(pc)
		errs = append(errs, err)
		l.gates = g
	}
	if lc := &c.limits; lc.rateSet {
		rc := newRateLimitConfig(lc.rateLimit, lc.rateBurst)
		rc.maxKeys, rc.idleTTL = c.maxKeys, c.idleTTL
		s := settings{to: "WithRateLimit", rate: &rc}
		s.applyOptions(lc.rateOpts)
		rs, err := buildRateLimiters(rc, s.errs)
		errs = append(errs, err)
		l.rate = rs
	} else {
		l.rate = lc.rate
	}
	if lc := &c.limits; lc.bulkSet {
		bc := newBulkheadConfig(lc.bulkLimit)
		bc.maxKeys, bc.idleTTL = c.maxKeys, c.idleTTL
		s := settings{to: "WithConcurrencyLimit", bulk: &bc}
		s.applyOptions(lc.bulkOpts)
		bs, err := buildBulkheads(bc, s.errs)
		errs = append(errs, err)
		l.bulk = bs
	} else {
		l.bulk = lc.bulk
	}
	l.pacing = l.gates != nil && l.gates.cfg.pacing
	return l, errors.Join(errs...)
}

// admit runs the pause gate, the token bucket and the bulkhead for one
// attempt of c, in that order, waiting within the call's deadline (a
// hedge never waits), and returns the breaker's
// permit for the attempt: the one given, or, when a pause held the key,
// the breaker's answer after the pause. The gate is checked again after
// each wait for a token or a slot: when a hold began at the key meanwhile
// (a 429 answered another call, say), the attempt gives its slot back and
// passes the gate again, keeping its token, so that no attempt reaches the
// upstream inside a pause whatever it waited for. That check is one atomic
// load while no gate holds anything. A half-open probe lease is given
// back while a pause is waited out: held through the pause, it would
// refuse every other call to the key as half-open busy, and the breaker
// could neither close nor reopen meanwhile; the breaker asked again
// decides as things stand when the attempt is sent (it was asked first so
// that an open breaker refuses before any wait). A token taken for an
// attempt that the bulkhead then refuses stays spent: the bucket paces
// attempts offered, not only attempts sent. On success r holds the
// attempt's concurrency slot, if any. With an observer, each wait is
// reported as an [EventWait].
func (l *limits) admit(c *call, r *attemptResult, permit Permit, hedge bool) (Permit, error) {
	// Time the admission only when something could make it wait: a token
	// bucket, a bulkhead, or a pause somewhere (one atomic load).
	paused := l.gates != nil && l.gates.latest.Load() != 0
	r.waited = paused || l.rate != nil || l.bulk != nil
	if !r.waited {
		return permit, nil
	}
	var t0 time.Time
	if l.obs != nil {
		t0 = time.Now()
	}
	dl := c.deadline() // the latest a wait may end
	if hedge {
		dl = time.Now()
	}
	var (
		begun uint64 // the key's holds begun when the call last passed its gate
		token bool   // the attempt has its token
	)
	for {
		if paused {
			permit.release() // no probe lease is held through a pause
			probe, err := l.gates.wait(c.ctx, c.key, dl, c.throttled)
			if err != nil {
				return Permit{}, err
			}
			begun = l.gates.begun(c.key)
			c.gateProbe = probe
			t0 = l.waited(c, MechPause, t0)
			if permit, err = c.breaker.Allow(); err != nil {
				l.probeLost(c)
				return Permit{}, err
			}
		}
		if l.rate != nil && !token {
			if err := l.rate.m.Get(c.key).wait(c.ctx, dl); err != nil {
				l.probeLost(c)
				return permit, err
			}
			token = true
			t0 = l.waited(c, MechRateLimit, t0)
			if paused = l.heldSince(c.key, begun); paused {
				continue
			}
		}
		if l.bulk != nil {
			s, err := l.bulk.acquire(c.ctx, c.key, dl)
			if err != nil {
				l.probeLost(c)
				return permit, err
			}
			t0 = l.waited(c, MechConcurrency, t0)
			if paused = l.heldSince(c.key, begun); paused {
				s.Ignore() // no attempt was made: nothing for an adaptive limit to learn
				continue
			}
			r.slot = s
		}
		return permit, nil
	}
}

// heldSince reports whether a hold began at key since the call passed its
// gate, when key's gate had begun begun holds (0: the call found nothing
// held anywhere): it must pass the gate again. One atomic load while no
// gate holds anything.
func (l *limits) heldSince(key string, begun uint64) bool {
	return l.gates != nil && l.gates.latest.Load() != 0 && l.gates.begun(key) != begun
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
		notify(l.obs, c.ctx, &Event{Kind: EventWait, Key: c.name, Method: c.req.Method, Attempt: c.attempts, Mechanism: m, Duration: d, Endpoint: c.endpoint()})
	}
	return now
}

// observe feeds the result of c's latest attempt to the pause gate and the
// attempt's slot (see observeKey), and ends its probe after a pause.
func (l *limits) observe(c *call, a *attemptResult) {
	l.observeKey(c.key, &a.slot, a.resp, a.o)
	if l.gates != nil {
		if a.o.Status == 0 {
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
		var h http.Header
		if resp != nil {
			h = resp.Header
		}
		l.gates.Observe(key, o, h)
	}
	if slot.held() {
		slot.judge(o)
	}
}
