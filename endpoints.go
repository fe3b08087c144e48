package breakwater

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/window"
)

// Outlier detection and health tiers, as documented on [Failover].
const (
	outlierWindow       = 10 * time.Second
	outlierMinVolume    = 20  // attempts, of the endpoint and of the others
	outlierFactor       = 2   // failure rate at least this times the others'…
	outlierMargin       = 0.1 // …plus this
	ejectionJitter      = 0.1 // positive jitter on each ejection
	defaultThrottleTime = time.Second
)

// tier orders the health tiers for choosing, best first.
type tier uint8

const (
	tierHealthy tier = iota
	tierDegraded
	tierEjected
)

var tierHealth = [...]Health{HealthHealthy, HealthDegraded, HealthEjected}

// endpoint is one endpoint of an endpointSet and its health.
type endpoint struct {
	i    int
	url  *url.URL
	name string // the base URL, for events and snapshots
	key  string // what its state is kept under; set by the owner
	// breaker is the endpoint's breaker (nil without breakers), set by the
	// owner and kept in its registry for the owner's life: endpoints are
	// configuration, not keys that come and go, and an attempt's outcome
	// must reach the breaker later attempts ask.
	breaker *Breaker

	inflight atomic.Int32
	consec   atomic.Int32
	rate     window.Rate  // attempts and failures, for the failure rate
	ejected  atomic.Bool  // by outlier detection, until a probe brings it back
	until    atomic.Int64 // the ejection's end
	probe    atomic.Int64 // a probe's lease: its expiry + 1; 0 when none
	degraded atomic.Int64 // throttled: degraded until this time

	period atomic.Int64 // the current ejection's length

	// Guarded by endpointSet.mu.
	ejections int   // ejections in a row
	outSince  int64 // when the outage they belong to began
	returned  int64 // when it last came back
}

// rewrite returns a shallow copy of req addressed to the endpoint.
func (ep *endpoint) rewrite(req *http.Request) *http.Request {
	r := new(http.Request)
	*r = *req
	u := *req.URL
	u.Scheme, u.Host = ep.url.Scheme, ep.url.Host
	if ep.url.User != nil {
		u.User = ep.url.User
	}
	if p := ep.url.Path; p != "" {
		if u.RawPath != "" {
			u.RawPath = ep.url.EscapedPath() + u.RawPath
		}
		u.Path = p + u.Path
	}
	if req.Host == "" || req.Host == req.URL.Host {
		r.Host = "" // net/http sends the endpoint's host
	}
	r.URL = &u
	return r
}

// extState is what the owner of an endpointSet knows of an endpoint from
// elsewhere: its breaker and pause gate.
type extState uint8

const (
	extNone     extState = iota
	extDegraded          // held by its pause gate: degraded, and chosen last in its tier
	extHalfOpen          // its breaker is half-open: degraded, and probes go to it
	extOpen              // its breaker is open: out
)

// endpointSet chooses endpoints and keeps their health. Safe for
// concurrent use: choosing and recording are lock-free; ejections and
// returns take a mutex.
type endpointSet struct {
	cfg      failover
	eps      []*endpoint
	rr       atomic.Uint32
	start    time.Time
	probeTTL int64 // how long a probe lease lasts without an outcome
	maxOut   int   // endpoints that may be ejected at once

	mu  sync.Mutex
	out int // endpoints ejected; guarded by mu

	// report, when set, is told of ejections and returns, outside mu,
	// with the key of the call whose attempt caused them.
	report func(key string, ep *endpoint, to Health, why Reason)
}

func newEndpointSet(cfg failover, probeTTL time.Duration) *endpointSet {
	s := &endpointSet{cfg: cfg, start: time.Now(), probeTTL: int64(orDefault(probeTTL, defaultProbeTimeout))}
	for i, u := range cfg.eps {
		s.eps = append(s.eps, &endpoint{i: i, url: u, name: u.String(), key: u.String(), rate: window.NewRate(outlierWindow)})
	}
	if n := len(s.eps); n >= 2 {
		s.maxOut = max(1, int(cfg.maxEjected*float64(n)))
	}
	return s
}

func (s *endpointSet) now() int64 { return int64(time.Since(s.start)) }

// pick chooses the endpoint of an attempt. tried has bit i set for the
// endpoints the call already tried (or that refused it); repeatable says
// whether the attempt could be repeated elsewhere if it failed, which a
// probe needs; ext reports what the owner knows of an endpoint. probe
// reports that the attempt holds the endpoint's probe lease: its outcome
// decides whether the endpoint comes back.
func (s *endpointSet) pick(now int64, tried uint64, repeatable bool, ext func(*endpoint) extState) (ep *endpoint, probe bool) {
	if len(s.eps) == 1 {
		return s.eps[0], false
	}
	var xs [maxEndpoints]extState
	for _, e := range s.eps {
		xs[e.i] = ext(e)
	}
	if ep := s.probeCandidate(now, tried, repeatable, xs[:len(s.eps)]); ep != nil {
		return ep, true
	}
	var ties [maxEndpoints]uint8
	nties := 0
	best := uint64(1<<64 - 1)
	for _, e := range s.eps {
		rank := s.rank(e, now, tried, xs[e.i])
		if rank < best {
			best, nties = rank, 0
		}
		if rank == best {
			ties[nties] = uint8(e.i)
			nties++
		}
	}
	return s.eps[ties[int(s.rr.Add(1)-1)%nties]], false
}

// rank orders the endpoints for pick, lowest first: by tier, then those
// their pause gate does not hold before those it holds (an attempt sent to
// a held endpoint would wait, or be refused, while another could go at
// once), then untried before tried, then (ejected ones) by when their
// ejection ends, or (with LeastInFlight) by attempts in flight.
func (s *endpointSet) rank(e *endpoint, now int64, tried uint64, x extState) uint64 {
	tr := uint64(s.tier(e, now, x))
	var t, held uint64
	if tried&(1<<e.i) != 0 {
		t = 1
	}
	if x == extDegraded {
		held = 1
	}
	var within uint64
	switch {
	case tr == uint64(tierEjected):
		within = 1<<40 - 1 // an open breaker: last
		if x != extOpen {
			within = uint64(min(max(e.until.Load()-now, 0)/int64(time.Millisecond), 1<<40-2))
		}
	case s.cfg.leastInFlight:
		within = uint64(max(e.inflight.Load(), 0))
	}
	return tr<<62 | held<<61 | t<<60 | within
}

// freeLeft reports whether an endpoint that the call has not tried (tried)
// could take an attempt at once: not ejected, its breaker not open, and
// not held by its pause gate. A retry after a throttled answer goes there
// without waiting for the throttled endpoint's hint.
func (s *endpointSet) freeLeft(now int64, tried uint64, ext func(*endpoint) extState) bool {
	if len(s.eps) == 1 {
		return false
	}
	for _, e := range s.eps {
		if tried&(1<<e.i) != 0 {
			continue
		}
		if x := ext(e); x != extDegraded && s.tier(e, now, x) != tierEjected {
			return true
		}
	}
	return false
}

// tier returns e's tier at now given what the owner knows of it.
func (s *endpointSet) tier(e *endpoint, now int64, x extState) tier {
	switch {
	case x == extOpen:
		return tierEjected
	case e.ejected.Load():
		if now >= e.until.Load() {
			return tierDegraded // awaiting its probe
		}
		return tierEjected
	case x != extNone || now < e.degraded.Load():
		return tierDegraded
	}
	return tierHealthy
}

// probeCandidate claims the probe lease of an untried endpoint due for a
// probe and returns it, or nil. An ejected endpoint is due when its
// ejection is over (a period later for an attempt that cannot be
// repeated) and its breaker is not open; one whose breaker is half-open is
// due for attempts that can be repeated.
func (s *endpointSet) probeCandidate(now int64, tried uint64, repeatable bool, xs []extState) *endpoint {
	for _, e := range s.eps {
		if tried&(1<<e.i) != 0 {
			continue
		}
		switch x := xs[e.i]; {
		case e.ejected.Load():
			until := e.until.Load()
			if !repeatable {
				until += e.period.Load()
			}
			if now < until || x == extOpen {
				continue
			}
		case repeatable && x == extHalfOpen:
		default:
			continue
		}
		if s.claimProbe(e, now) {
			return e
		}
	}
	return nil
}

func (s *endpointSet) claimProbe(e *endpoint, now int64) bool {
	l := e.probe.Load()
	if l != 0 && now < l-1 {
		return false // a probe is in flight
	}
	return e.probe.CompareAndSwap(l, now+s.probeTTL+1)
}

// begin counts an attempt sent to e as in flight; end, once, when it is
// over (its response body closed).
func (e *endpoint) begin() { e.inflight.Add(1) }
func (e *endpoint) end()   { e.inflight.Add(-1) }

// verdict is how an attempt's outcome counts for outlier detection.
type epVerdict uint8

const (
	epNeutral epVerdict = iota
	epSuccess
	epFailure
)

// record reports the outcome of an attempt sent to e at now. probe says
// whether the attempt held e's probe lease, which is given back. A
// throttled outcome degrades e for hint (or a second), neutrally.
func (s *endpointSet) record(key string, e *endpoint, now int64, probe bool, v epVerdict, throttled bool, hint time.Duration) {
	if throttled {
		e.degraded.Store(now + int64(orDefault(hint, defaultThrottleTime)))
	}
	switch v {
	case epSuccess:
		e.consec.Store(0)
		e.rate.Add(now, 1, 0)
		if e.ejected.Load() && (probe || now >= e.until.Load()) {
			s.restore(key, e, now)
		}
	case epFailure:
		c := e.consec.Add(1)
		e.rate.Add(now, 1, 1)
		switch {
		case probe:
			s.eject(key, e, now, ReasonProbeFailed)
		case int(c) >= s.cfg.consecutive:
			s.eject(key, e, now, ReasonFailures)
		case s.outlier(e, now):
			s.eject(key, e, now, ReasonOutlier)
		}
	}
	if probe {
		e.probe.Store(0)
	}
}

// outlier reports whether e's failure rate over the window is well above
// the other endpoints' (those in, pooled), both with enough attempts.
func (s *endpointSet) outlier(e *endpoint, now int64) bool {
	calls, fails := e.rate.Sum(now)
	if calls < outlierMinVolume || fails == 0 {
		return false
	}
	var oc, of int64
	for _, o := range s.eps {
		if o == e || o.ejected.Load() {
			continue
		}
		c, f := o.rate.Sum(now)
		oc, of = oc+c, of+f
	}
	if oc < outlierMinVolume {
		return false
	}
	return float64(fails)/float64(calls) >= outlierFactor*float64(of)/float64(oc)+outlierMargin
}

// eject takes e out (or keeps it out, for a failed probe) unless that would
// put more than maxOut endpoints out at once.
func (s *endpointSet) eject(key string, e *endpoint, now int64, why Reason) {
	s.mu.Lock()
	again := e.ejected.Load()
	if !again && s.out >= s.maxOut {
		s.mu.Unlock()
		return
	}
	if !again && (e.ejections == 0 || now-e.returned >= int64(s.cfg.maxEjection)) {
		e.ejections, e.outSince = 0, now // it stayed in long enough: a new outage
	}
	d := probeEvery(time.Duration(now-e.outSince), s.cfg.ejection, s.cfg.maxEjection)
	d += time.Duration(rand.Float64() * ejectionJitter * float64(d))
	e.ejections++
	e.period.Store(int64(d))
	e.until.Store(now + int64(d))
	e.rate.Clear()
	e.consec.Store(0)
	if !again {
		s.out++
		e.ejected.Store(true)
	}
	s.mu.Unlock()
	if s.report != nil {
		s.report(key, e, HealthEjected, why)
	}
}

// restore brings e back after a successful probe.
func (s *endpointSet) restore(key string, e *endpoint, now int64) {
	s.mu.Lock()
	if !e.ejected.Load() {
		s.mu.Unlock()
		return
	}
	e.ejected.Store(false)
	e.returned = now
	s.out--
	s.mu.Unlock()
	if s.report != nil {
		s.report(key, e, HealthHealthy, ReasonProbesSucceeded)
	}
}

// snapshots returns the state of every endpoint.
func (s *endpointSet) snapshots(ext func(*endpoint) extState) []EndpointSnapshot {
	now := s.now()
	out := make([]EndpointSnapshot, 0, len(s.eps))
	for _, e := range s.eps {
		h := tierHealth[s.tier(e, now, ext(e))]
		calls, fails := e.rate.Sum(now)
		s.mu.Lock()
		k := e.ejections
		s.mu.Unlock()
		snap := EndpointSnapshot{
			Endpoint: e.name, Key: e.key, Health: h,
			InFlight: int(e.inflight.Load()), ConsecutiveFailures: int(e.consec.Load()),
			Attempts: calls, Failures: fails, Ejections: k,
		}
		if until := e.until.Load(); e.ejected.Load() && until > now {
			snap.EjectedUntil = s.start.Add(time.Duration(until))
			snap.RemainingSeconds = time.Duration(until - now).Seconds()
		}
		out = append(out, snap)
	}
	return out
}
