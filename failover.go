package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Failover spreads a [Transport]'s calls over several endpoints of one
// logical upstream (regions, replicas, providers), set with
// [WithFailover]. Each attempt goes to one endpoint, chosen before it is
// admitted: breakers, retry budgets, pause gates, rate and concurrency
// limits are kept per endpoint, and a retry or a hedge goes to an endpoint
// the call has not tried yet when a healthy one is left.
//
// Endpoints are sorted into health tiers, in the manner of [Lasso]:
// healthy; degraded (its breaker half-open, paused by the upstream, or
// just throttled); ejected (its breaker open, or taken out by outlier
// detection). Attempts go to the best tier, in turns or to the endpoint
// with the fewest attempts in flight; within a tier, an endpoint that its
// pause gate holds comes last. A throttled answer (a 429, or a 503 with
// Retry-After) speaks for its endpoint alone: its hint pauses that
// endpoint's gate, and the call's retry goes at once, without waiting for
// the hint or backing off, to an endpoint the call has not tried, when one
// is neither ejected nor held; only when none is does the retry wait for
// the hint as without failover. Outlier detection works in the manner
// of [Envoy's]: an endpoint is ejected after Consecutive failing attempts in
// a row, or when over the last 10 s (at least 20 attempts) its failure rate
// is at least twice the other endpoints' plus 10 points. An ejection lasts
// Ejection while the outage is young, then 1/32 of the outage's age (the
// time since it was first ejected; a return that fails again within
// MaxEjection is the same outage), up to MaxEjection, plus up to 10 %
// jitter: a restarted endpoint gets traffic back within Ejection of its
// return while its outage is young, and within about 3 % of how long it
// was out after that. When an ejection ends, one attempt that can be
// repeated elsewhere probes the endpoint: a success brings it
// back, a failure ejects it again for longer. (An endpoint that only sees
// requests that cannot be repeated is probed by one of them once it has
// waited a second ejection period.) Never more than MaxEjected of the
// endpoints are ejected at once; a single endpoint is never ejected (its
// breaker is what protects it).
//
// With every endpoint out, an attempt goes to the least bad one: the
// ejected endpoint whose ejection ends soonest, where its breaker decides.
// Endpoints whose breaker is open refuse at once, so a call fails fast with
// [ErrCircuitOpen] only when every endpoint's breaker is open.
//
// The zero value of every field but Endpoints is a sound default.
//
// [Lasso]: https://docs.lasso.sh/
// [Envoy's]: https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier
type Failover struct {
	// Endpoints are the base URLs, "http[s]://host[:port][/path]", at
	// least one and at most 64. An attempt replaces the request URL's
	// scheme and host with an endpoint's and puts the endpoint's path in
	// front of the request's. The Host header follows the endpoint unless
	// the caller set a Host different from the request URL's host.
	Endpoints []string
	// LeastInFlight sends each attempt to the endpoint of the best tier
	// with the fewest attempts in flight (a response counts until its body
	// is closed) instead of taking turns.
	LeastInFlight bool
	// Consecutive is the number of failing attempts in a row that eject an
	// endpoint. Zero means 5.
	Consecutive int
	// Ejection is how long an ejection lasts while the endpoint's outage
	// is young; zero means 500 ms. Later ejections of one outage (failed
	// probes, and returns that fail again within MaxEjection) last 1/32 of
	// its age, the time since it was first ejected, as the breaker's
	// openings do: an endpoint down for a minute is probed every 1.9 s.
	// MaxEjection caps them; zero means 60 s.
	Ejection, MaxEjection time.Duration
	// MaxEjected is the largest share of the endpoints ejected at once,
	// in (0, 1]; zero means 0.5. With two or more endpoints one may always
	// be ejected.
	MaxEjected float64
}

// Defaults of failover. They are documented on [Failover].
const (
	defaultConsecutive = 5
	defaultEjection    = 500 * time.Millisecond
	defaultMaxEjection = 60 * time.Second
	defaultMaxEjected  = 0.5
	maxEndpoints       = 64 // a call's tried endpoints fit in a uint64
)

// failover is a validated [Failover].
type failover struct {
	eps           []*url.URL
	leastInFlight bool
	consecutive   int
	ejection      time.Duration
	maxEjection   time.Duration
	maxEjected    float64
}

// resolve validates f and fills in its defaults.
func (f Failover) resolve() (failover, error) {
	var errs []error
	r := failover{
		leastInFlight: f.LeastInFlight,
		consecutive:   f.Consecutive,
		ejection:      orDefault(f.Ejection, defaultEjection),
		maxEjection:   orDefault(f.MaxEjection, defaultMaxEjection),
		maxEjected:    f.MaxEjected,
	}
	switch n := len(f.Endpoints); {
	case n == 0:
		errs = append(errs, errors.New("breakwater: failover needs at least one endpoint"))
	case n > maxEndpoints:
		errs = append(errs, fmt.Errorf("breakwater: failover takes at most %d endpoints, got %d", maxEndpoints, n))
	}
	seen := map[string]bool{}
	for _, s := range f.Endpoints {
		u, err := parseEndpoint(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[u.String()] {
			errs = append(errs, fmt.Errorf("breakwater: failover endpoint %q is listed twice", s))
		}
		seen[u.String()] = true
		r.eps = append(r.eps, u)
	}
	if r.consecutive == 0 {
		r.consecutive = defaultConsecutive
	}
	if r.maxEjected == 0 {
		r.maxEjected = defaultMaxEjected
	}
	if f.Consecutive < 0 {
		errs = append(errs, fmt.Errorf("breakwater: failover consecutive failures must be >= 0, got %d", f.Consecutive))
	}
	if f.Ejection < 0 || f.MaxEjection < 0 || r.maxEjection < r.ejection {
		errs = append(errs, fmt.Errorf("breakwater: failover ejection times need 0 <= Ejection <= MaxEjection, got %s and %s", r.ejection, r.maxEjection))
	}
	if !(f.MaxEjected >= 0 && f.MaxEjected <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: failover MaxEjected must be in [0, 1], got %v", f.MaxEjected))
	}
	return r, errors.Join(errs...)
}

// parseEndpoint parses a base URL: http or https, a host, an optional path,
// nothing else.
func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("breakwater: failover endpoint %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("breakwater: failover endpoint %q: scheme must be http or https", s)
	case u.Host == "":
		return nil, fmt.Errorf("breakwater: failover endpoint %q has no host", s)
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("breakwater: failover endpoint %q: only scheme, host and path are allowed", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// WithFailover sends the transport's calls to the endpoints of f, choosing
// one per attempt; see [Failover] for the choice, the health tiers and the
// ejections. Every request the Transport carries goes to one of the
// endpoints, whatever its URL's scheme and host: use one Transport per
// logical upstream. Per-endpoint state (breaker, retry budget, pause gate,
// rate and concurrency limits) is kept under the [KeyFunc]'s key of a
// request to the endpoint's base URL ([HostKey]: its host and port). The
// endpoints' breakers stay in the breaker registry for as long as it lives
// (they are never evicted to make room for other keys), so what one
// attempt shows always reaches the breaker the next one asks.
func WithFailover(f Failover) Option {
	return option(func(s *settings) {
		r, err := f.resolve()
		if err != nil {
			s.errs = append(s.errs, err)
			return
		}
		if c := s.forTransport("WithFailover", false); c != nil {
			c.failover = &r
		}
	})
}

// newEndpoints builds the transport's endpoint set.
func (t *Transport) newEndpoints(f failover) *endpointSet {
	s := newEndpointSet(f, t.cfg.attemptTimeout)
	for _, ep := range s.eps {
		u := *ep.url
		ep.key = t.cfg.key(&http.Request{Method: http.MethodGet, URL: &u, Host: u.Host, Header: http.Header{}})
		ep.breaker, _ = t.breakers.acquire(ep.key) // pinned for good
	}
	if t.obs != nil {
		s.report = func(key string, ep *endpoint, h Health, why Reason) {
			notify(t.obs, context.Background(), &Event{Kind: EventHealth, Key: key, Endpoint: ep.name, Health: h, Reason: why})
		}
	}
	return s
}

// endpointState reports what the transport knows of an endpoint from its
// breaker and pause gate: an open breaker first, then a hold of its gate
// (a half-open breaker held by its gate gets no probe until the hold
// ends), then a half-open breaker.
func (t *Transport) endpointState(e *endpoint) extState {
	st := e.breaker.State() // the registry's own: pinned for good
	switch {
	case st == StateOpen:
		return extOpen
	case t.held(e.key):
		return extDegraded
	case st == StateHalfOpen:
		return extHalfOpen
	}
	return extNone
}

// held reports whether key's pause gate holds it: paused, or held by its
// overload admission. One atomic load while no gate holds anything.
func (t *Transport) held(key string) bool {
	g := t.limits.gates
	return g != nil && g.latest.Load() != 0 && g.remainingFor(key) > 0
}

// allow picks the attempt's endpoint (with failover) and asks its breaker
// to admit the attempt. With failover, an endpoint whose breaker refuses is
// passed over for the next best, so that the call fails only when every
// endpoint's breaker refuses (with the last refusal).
func (t *Transport) allow(c *call, r *attemptResult, hedge bool) (Permit, error) {
	if t.eps == nil {
		if hedge {
			return c.breaker.Allow()
		}
		return c.breaker.allowWait(c.ctx, c.deadline())
	}
	var (
		refused uint64
		last    error
	)
	for range len(t.eps.eps) {
		ep, probe := t.eps.pick(t.now(), c.tried|refused, c.repeatable, t.endpointState)
		if refused&(1<<ep.i) != 0 {
			break // every endpoint refused already
		}
		b := ep.breaker
		p, err := b.Allow()
		if err != nil {
			if probe {
				ep.probe.Store(0)
			}
			refused |= 1 << ep.i
			last = err
			continue
		}
		up := t.keys.Get(ep.key)
		if !t.cfg.noCongestion && !up.cong.admits() {
			// A congested endpoint is passed over for another.
			p.release()
			if probe {
				ep.probe.Store(0)
			}
			refused |= 1 << ep.i
			last = rejected(ErrConcurrencyLimit, ep.key, time.Time{})
			continue
		}
		c.tried |= 1 << ep.i
		c.key, c.breaker, c.ep = ep.key, b, ep
		c.up = up
		if c.up.budget != nil && c.pol.MaxAttempts > 1 {
			c.budget = c.up.budget
			if !c.deposited {
				c.budget.deposit(t.now())
				c.deposited = true
			}
		}
		r.ep, r.probe, r.key = ep, probe, ep.key
		return p, nil
	}
	return Permit{}, last
}

// unprobe gives back the endpoint probe lease of an attempt that is not
// made.
func (t *Transport) unprobe(r *attemptResult) {
	if r.probe {
		r.ep.probe.Store(0)
		r.probe = false
	}
}
