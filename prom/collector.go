package prom

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of a [Collector].
const (
	// DefaultMaxKeys is the number of key label values kept before new keys
	// are reported as OtherLabel.
	DefaultMaxKeys = 100
	// DefaultMaxRoutes is the number of route label values kept before new
	// routes are reported as OtherLabel.
	DefaultMaxRoutes = 100
)

// DefaultDurationBuckets returns the default upper bounds, in seconds, of
// the duration and wait histograms: 5 ms to 30 s, the default call timeout.
func DefaultDurationBuckets() []float64 {
	return []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
}

// Metric names, as exported; the package documentation lists their labels.
const (
	MetricCalls                  = "breakwater_calls_total"
	MetricAttempts               = "breakwater_attempts_total"
	MetricRetries                = "breakwater_retries_total"
	MetricRetryBudgetExhausted   = "breakwater_retry_budget_exhausted_total"
	MetricRejections             = "breakwater_rejections_total"
	MetricWait                   = "breakwater_wait_seconds"
	MetricAttemptDuration        = "breakwater_attempt_duration_seconds"
	MetricCallDuration           = "breakwater_call_duration_seconds"
	MetricInFlight               = "breakwater_in_flight"
	MetricBreakerState           = "breakwater_breaker_state"
	MetricBreakerOpenSeconds     = "breakwater_breaker_open_seconds"
	MetricBreakerTransitions     = "breakwater_breaker_transitions_total"
	MetricInboundRequests        = "breakwater_inbound_requests_total"
	MetricInboundRequestDuration = "breakwater_inbound_request_duration_seconds"
	MetricHedges                 = "breakwater_hedges_total"
	MetricHedgeWins              = "breakwater_hedge_wins_total"
	MetricEndpointAttempts       = "breakwater_endpoint_attempts_total"
	MetricEndpointEjected        = "breakwater_endpoint_ejected"
	MetricEndpointEjections      = "breakwater_endpoint_ejections_total"
	MetricPaceRate               = "breakwater_pace_rate"
	MetricBreakerProbes          = "breakwater_breaker_probes"
)

// Metric names of a fleet of breakwater services, as exported; the package
// documentation lists their labels.
const (
	MetricInboundSheds    = "breakwater_inbound_sheds_total"
	MetricInboundPushback = "breakwater_inbound_pushback_total"
	MetricRetriesSkipped  = "breakwater_retries_skipped_total"
	MetricHedgesSkipped   = "breakwater_hedges_skipped_total"
)

// An Option configures [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	keyLabel  func(key string) string
	maxKeys   int
	maxRoutes int
	buckets   []float64
}

// A Snapshotter is a component whose state [Collector.Watch] reads: a
// [breakwater.Transport], or a registry ([breakwater.Breakers],
// [breakwater.PauseGates], …).
type Snapshotter interface {
	Snapshot() breakwater.Snapshot
}

// WithKeyLabel maps each key (what the transport's KeyFunc returned: the
// host[:port] by default) to its label value, for example a service name,
// before the key cap applies. nil (the default) uses the key itself. fn must
// be safe for concurrent use; it runs outside the collector's locks, on the
// goroutine of an event whose key the collector does not remember (see the
// package documentation). An empty result becomes [NoneLabel] and a panic
// [OtherLabel].
func WithKeyLabel(fn func(key string) string) Option {
	return optionFunc(func(o *options) { o.keyLabel = fn })
}

// WithMaxKeys caps the number of distinct key label values at n (n >= 1);
// events of further keys are reported under [OtherLabel], so the key label
// has at most n+1 values. Default: [DefaultMaxKeys].
func WithMaxKeys(n int) Option {
	return optionFunc(func(o *options) { o.maxKeys = n })
}

// WithMaxRoutes caps the number of distinct route label values of the
// inbound metrics at n (n >= 1); further routes are reported under
// [OtherLabel]. Default: [DefaultMaxRoutes].
func WithMaxRoutes(n int) Option {
	return optionFunc(func(o *options) { o.maxRoutes = n })
}

// WithDurationBuckets sets the upper bounds, in seconds, of every histogram
// (attempt, call, wait and inbound request durations). They must be
// positive and strictly increasing; a final +Inf bucket is always added.
// Default: [DefaultDurationBuckets].
func WithDurationBuckets(bounds ...float64) Option {
	return optionFunc(func(o *options) { o.buckets = append([]float64(nil), bounds...) })
}

func (o *options) validate() error {
	var errs []error
	if o.maxKeys < 1 {
		errs = append(errs, fmt.Errorf("breakwater/prom: max keys must be >= 1, got %d", o.maxKeys))
	}
	if o.maxRoutes < 1 {
		errs = append(errs, fmt.Errorf("breakwater/prom: max routes must be >= 1, got %d", o.maxRoutes))
	}
	if n := len(o.buckets); n > 0 && math.IsInf(o.buckets[n-1], +1) {
		o.buckets = o.buckets[:n-1]
	}
	if len(o.buckets) == 0 {
		errs = append(errs, errors.New("breakwater/prom: duration buckets must not be empty"))
	}
	for i, b := range o.buckets {
		if !(b > 0) || math.IsInf(b, 0) || (i > 0 && b <= o.buckets[i-1]) {
			errs = append(errs, fmt.Errorf("breakwater/prom: duration buckets must be positive, finite and strictly increasing, got %v", o.buckets))
			break
		}
	}
	return errors.Join(errs...)
}

// Collector turns breakwater events into Prometheus metrics. It is both a
// [breakwater.Observer] (pass it to [breakwater.WithObserver], or to the middleware's
// observer option) and a [prometheus.Collector] (registered by [New]). The
// metrics are listed in the package documentation.
//
// A Collector is safe for concurrent use. Observing an event of a key or
// route it already knows costs one map lookup and a few atomic additions,
// and allocates nothing; the Prometheus metrics are built at collection
// time. A nil *Collector observes nothing.
//
// One Collector may observe several transports and middlewares: their
// events add up under the same labels. To tell them apart, give each its
// own Collector and register each through [prometheus.WrapRegistererWith]
// with its own value of one constant label (a registry requires every
// Collector exporting a metric name to use the same label names).
type Collector struct {
	bounds   []float64 // histogram upper bounds, seconds
	boundsNs []int64   // the same in nanoseconds, for the hot path

	descs descs

	keys   *labels.Table[*keySeries]
	routes *labels.Table[*routeSeries]

	keyLabelFn func(string) string
	sources    labels.Sources[Snapshotter] // of Watch
}

type descs struct {
	calls, attempts, retries, budget, rejections *prometheus.Desc
	callDur, attemptDur, wait                    *prometheus.Desc
	inFlight, state, openSeconds, transitions    *prometheus.Desc
	inbound, inboundDur                          *prometheus.Desc
	hedges, hedgeWins                            *prometheus.Desc
	epAttempts, epEjected, epEjections           *prometheus.Desc
	paceRate, probes                             *prometheus.Desc
	fleet                                        fleetDescs
}

// fleetDescs are the descriptors of the fleet's metrics.
type fleetDescs struct {
	sheds, pushback, retriesSkipped, hedgesSkipped *prometheus.Desc
}

var (
	_ breakwater.Observer  = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// New returns a Collector configured by opts and registers it on reg. A
// nil reg registers nothing (register the Collector yourself). New never
// touches the global registry. It returns an error describing every invalid
// option, or reg's error when registration fails: a second Collector on the
// same registry needs distinguishing labels (see [Collector]).
func New(reg prometheus.Registerer, opts ...Option) (*Collector, error) {
	o := options{maxKeys: DefaultMaxKeys, maxRoutes: DefaultMaxRoutes, buckets: DefaultDurationBuckets()}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	c := &Collector{bounds: o.buckets, keyLabelFn: o.keyLabel}
	c.boundsNs = make([]int64, len(o.buckets))
	for i, b := range o.buckets {
		// Bounds are compared with whole nanoseconds: round away the
		// representation error of decimal fractions (0.3 s is 3e8 ns).
		c.boundsNs[i] = int64(math.MaxInt64)
		if ns := math.Round(b * 1e9); ns < math.MaxInt64 {
			c.boundsNs[i] = int64(ns)
		}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c.descs = descs{
		calls:       desc(MetricCalls, "Outbound calls that ended, by the category of their outcome.", "key", "category"),
		attempts:    desc(MetricAttempts, "Outbound attempts handed to the base transport, by the category of their outcome.", "key", "category"),
		retries:     desc(MetricRetries, "Retries decided, by the category of the attempt that failed.", "key", "category"),
		budget:      desc(MetricRetryBudgetExhausted, "Retries refused because the key's retry budget was spent.", "key"),
		rejections:  desc(MetricRejections, "Work refused by a breakwater mechanism.", "key", "mechanism"),
		callDur:     desc(MetricCallDuration, "Duration of outbound calls until their response headers or error, retries and waits included.", "key", "category"),
		attemptDur:  desc(MetricAttemptDuration, "Duration of outbound attempts until their response headers or error.", "key", "category"),
		wait:        desc(MetricWait, "Time calls waited for a mechanism (rate limit, pause, concurrency slot).", "key", "mechanism"),
		inFlight:    desc(MetricInFlight, "Outbound calls started and not yet ended (inside RoundTrip).", "key"),
		state:       desc(MetricBreakerState, "Circuit breaker state: 0 closed, 1 half-open, 2 open.", "key"),
		openSeconds: desc(MetricBreakerOpenSeconds, "Seconds since the circuit breaker last left the closed state; 0 while closed.", "key"),
		transitions: desc(MetricBreakerTransitions, "Circuit breaker state changes.", "key", "from", "to", "reason"),
		inbound:     desc(MetricInboundRequests, "Inbound requests served through breakwater middleware.", "route", "method", "status_class", "category"),
		inboundDur:  desc(MetricInboundRequestDuration, "Duration of inbound requests served through breakwater middleware.", "route"),
		hedges:      desc(MetricHedges, "Hedges sent: attempts started while an earlier attempt of the same call was still running.", "key"),
		hedgeWins:   desc(MetricHedgeWins, "Calls whose response came from a hedge.", "key"),
		epAttempts:  desc(MetricEndpointAttempts, "Outbound attempts by failover endpoint and the category of their outcome.", "key", "endpoint", "category"),
		epEjected:   desc(MetricEndpointEjected, "1 while a failover endpoint is ejected by outlier detection, else 0.", "key", "endpoint"),
		epEjections: desc(MetricEndpointEjections, "Ejections of a failover endpoint, by reason.", "key", "endpoint", "reason"),
		paceRate:    desc(MetricPaceRate, "Requests per second a paced key may send: the rate its 429s taught the pause gate (Collector.Watch).", "key"),
		probes:      desc(MetricBreakerProbes, "Probes a half-open circuit breaker lets through at once, doubling per success; 0 unless half-open (Collector.Watch).", "key"),
		fleet: fleetDescs{
			sheds:          desc(MetricInboundSheds, "Inbound requests a Shedder refused, by criticality and reason (caller_deadline: the caller's deadline could not be met; capacity: no room).", "route", "criticality", "reason"),
			pushback:       desc(MetricInboundPushback, "Inbound answers that carried Breakwater-Pushback, by value (elsewhere: a shed or route breaker's 503; none: a 5xx after the handler's own call failed).", "route", "value"),
			retriesSkipped: desc(MetricRetriesSkipped, "Retries a call did not make although its attempt's outcome called for one, by the rule that kept it (pushback: the server asked).", "key", "reason"),
			hedgesSkipped:  desc(MetricHedgesSkipped, "Calls not hedged because of a safety rule, by the rule.", "key", "reason"),
		},
	}
	c.keys = labels.NewTable(o.maxKeys, c.keyLabel, c.newKeySeries)
	c.routes = labels.NewTable(o.maxRoutes, labels.Clean, c.newRouteSeries)
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// keyLabel maps a key to its label value; it never panics.
func (c *Collector) keyLabel(key string) string { return labels.Key(c.keyLabelFn, key) }

// histogram counts observations by bucket; the last bucket is +Inf. Its
// count is the sum of its buckets, so a counter that counts the same events
// (calls, attempts) is read from it rather than kept twice.
//
// The sum is kept in whole nanoseconds, so that adding to it is one atomic
// addition; wraps of the 64-bit sum (every 584 years of accumulated
// durations) are counted in carries.
type histogram struct {
	counts  []atomic.Uint64
	sum     atomic.Uint64 // nanoseconds, modulo 2^64
	carries atomic.Uint64 // wraps of sum
}

func (c *Collector) newHistograms(n int) []histogram {
	hs := make([]histogram, n)
	for i := range hs {
		hs[i].counts = make([]atomic.Uint64, len(c.bounds)+1)
	}
	return hs
}

// observe records d (a negative d counts as 0).
func (h *histogram) observe(boundsNs []int64, d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(boundsNs) && int64(d) > boundsNs[i] {
		i++
	}
	h.counts[i].Add(1)
	if h.sum.Add(uint64(d)) < uint64(d) {
		h.carries.Add(1)
	}
}

// snapshot reads h into counts (len(bounds)+1) and returns the total and
// the sum in seconds. An observation made during the read may be in the
// counts and not in the sum, or the reverse.
func (h *histogram) snapshot(counts []uint64) (total uint64, sum float64) {
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		total += counts[i]
	}
	const wrapSeconds = 1 << 64 / 1e9
	return total, float64(h.carries.Load())*wrapSeconds + float64(h.sum.Load())/1e9
}

// keySeries holds the state of one key label.
type keySeries struct {
	label    string
	has      atomic.Uint32                     // the sources seen: hasCalls, hasBreaker
	starts   atomic.Uint64                     // call starts; in flight = starts - calls
	calls    []histogram                       // by category; their counts are calls_total
	attempts []histogram                       // by category; their counts are attempts_total
	retries  []atomic.Uint64                   // by category
	rejects  []atomic.Uint64                   // by mechanism; retry_budget's is also budget exhaustion
	waits    []histogram                       // by mechanism
	breaker  breakerAgg                        // state, open seconds and transitions
	hedges   atomic.Uint64                     // hedges sent
	wins     atomic.Uint64                     // calls a hedge answered
	eps      labels.Endpoints[*endpointSeries] // failover endpoints
	// Retries and hedges skipped, by labels.SkipReasons.
	retriesSkipped, hedgesSkipped []atomic.Uint64
}

// What a key label's events showed it has, so that it exports series only
// for the mechanisms of its sources: a key whose only events are an inbound
// middleware's rejections has neither a breaker nor a retry budget.
const (
	// hasCalls: a Transport's calls (any event of a call), so in-flight
	// calls, a retry budget and a breaker.
	hasCalls uint32 = 1 << iota
	// hasBreaker: a breaker's transitions (a Transport's, a Breakers
	// registry's, a route breaker's).
	hasBreaker
)

// mark records that ks has what bit says; one atomic load once it is known.
func (ks *keySeries) mark(bit uint32) *keySeries {
	if ks.has.Load()&bit == 0 {
		ks.has.Or(bit)
	}
	return ks
}

func (c *Collector) newKeySeries(label string) *keySeries {
	nc, nm := len(labels.Categories), len(labels.Mechanisms)
	return &keySeries{
		label:    label,
		calls:    c.newHistograms(nc),
		attempts: c.newHistograms(nc),
		retries:  make([]atomic.Uint64, nc),
		rejects:  make([]atomic.Uint64, nm),
		waits:    c.newHistograms(nm),

		retriesSkipped: make([]atomic.Uint64, len(labels.SkipReasons)),
		hedgesSkipped:  make([]atomic.Uint64, len(labels.SkipReasons)),
	}
}

// routeSeries holds the inbound state of one route label.
type routeSeries struct {
	label    string
	duration histogram
	// requests by [method][status class][category], flattened.
	requests []atomic.Uint64
	// sheds by [criticality][shed reason], flattened.
	sheds []atomic.Uint64
	// pushback sent, by labels.Pushbacks.
	pushback []atomic.Uint64
}

func (c *Collector) newRouteSeries(label string) *routeSeries {
	rs := &routeSeries{
		label:    label,
		requests: make([]atomic.Uint64, len(methodNames)*len(statusClassNames)*len(labels.Categories)),
		sheds:    make([]atomic.Uint64, len(labels.Criticalities)*len(labels.ShedReasons)),
		pushback: make([]atomic.Uint64, len(labels.Pushbacks)),
	}
	rs.duration.counts = make([]atomic.Uint64, len(c.bounds)+1)
	return rs
}

// Observe records e. It implements [breakwater.Observer]: it is safe for
// concurrent use, never retains ctx, and ignores event kinds it does not
// know. It takes a lock only for the first event of a key or route it does
// not remember and for breaker transitions, and never calls out while
// holding one.
func (c *Collector) Observe(_ context.Context, e breakwater.Event) {
	if c == nil {
		return
	}
	switch e.Kind {
	case breakwater.EventCallStart:
		c.keys.Get(e.Key).mark(hasCalls).starts.Add(1)
	case breakwater.EventAttempt:
		ks := c.keys.Get(e.Key).mark(hasCalls)
		ks.attempts[labels.CategoryIndex(e.Category)].observe(c.boundsNs, e.Duration)
		if e.Endpoint != "" {
			ks.eps.Get(e.Endpoint, newEndpointSeries).attempts[labels.CategoryIndex(e.Category)].Add(1)
		}
	case breakwater.EventRetry:
		c.keys.Get(e.Key).mark(hasCalls).retries[labels.CategoryIndex(e.Category)].Add(1)
	case breakwater.EventCallEnd:
		ks := c.keys.Get(e.Key).mark(hasCalls)
		ks.calls[labels.CategoryIndex(e.Category)].observe(c.boundsNs, e.Duration)
		if e.Hedge {
			ks.wins.Add(1)
		}
	case breakwater.EventHedge:
		c.keys.Get(e.Key).mark(hasCalls).hedges.Add(1)
	case breakwater.EventHealth:
		c.keys.Get(e.Key).eps.Get(e.Endpoint, newEndpointSeries).health(e)
	case breakwater.EventReject:
		c.keys.Get(e.Key).rejects[labels.MechanismIndex(e.Mechanism)].Add(1)
		if e.Mechanism == breakwater.MechShed {
			c.shed(&e)
		}
	case breakwater.EventRetrySkipped:
		c.keys.Get(e.Key).retriesSkipped[labels.SkipReasonIndex(e.Reason)].Add(1)
	case breakwater.EventHedgeSkipped:
		c.keys.Get(e.Key).hedgesSkipped[labels.SkipReasonIndex(e.Reason)].Add(1)
	case breakwater.EventWait:
		c.keys.Get(e.Key).mark(hasCalls).waits[labels.MechanismIndex(e.Mechanism)].observe(c.boundsNs, e.Duration)
	case breakwater.EventTransition:
		if e.Transition == nil {
			return
		}
		key := e.Transition.Key
		if key == "" {
			key = e.Key
		}
		c.keys.Get(key).mark(hasBreaker).breaker.record(*e.Transition)
	case breakwater.EventRequest:
		rs := c.routes.Get(e.Route)
		i := (methodIndex(e.Method)*len(statusClassNames)+statusClassIndex(e.Status))*len(labels.Categories) + labels.CategoryIndex(e.Category)
		rs.requests[i].Add(1)
		rs.duration.observe(c.boundsNs, e.Duration)
		if e.Reason == breakwater.ReasonPushback {
			rs.pushback[labels.PushbackIndex(e.Category)].Add(1)
		}
	}
}

// shed counts a Shedder's refusal under its route, criticality and reason.
func (c *Collector) shed(e *breakwater.Event) {
	i := labels.CriticalityIndex(e.Criticality)*len(labels.ShedReasons) + labels.ShedReasonIndex(e.Err)
	c.routes.Get(e.Route).sheds[i].Add(1)
}

// collectKeyFleet sends a key's skipped retries and hedges.
func (c *Collector) collectKeyFleet(ch chan<- prometheus.Metric, ks *keySeries) {
	d := &c.descs.fleet
	for i := range ks.retriesSkipped {
		if n := ks.retriesSkipped[i].Load(); n > 0 {
			ch <- c.constMetric(d.retriesSkipped, prometheus.CounterValue, float64(n), ks.label, labels.SkipReasons[i])
		}
	}
	for i := range ks.hedgesSkipped {
		if n := ks.hedgesSkipped[i].Load(); n > 0 {
			ch <- c.constMetric(d.hedgesSkipped, prometheus.CounterValue, float64(n), ks.label, labels.SkipReasons[i])
		}
	}
}

// collectRouteFleet sends a route's sheds and pushback.
func (c *Collector) collectRouteFleet(ch chan<- prometheus.Metric, rs *routeSeries) {
	d := &c.descs.fleet
	for i := range rs.sheds {
		if n := rs.sheds[i].Load(); n > 0 {
			crit, reason := i/len(labels.ShedReasons), i%len(labels.ShedReasons)
			ch <- c.constMetric(d.sheds, prometheus.CounterValue, float64(n), rs.label, labels.Criticalities[crit], labels.ShedReasons[reason])
		}
	}
	for i := range rs.pushback {
		if n := rs.pushback[i].Load(); n > 0 {
			ch <- c.constMetric(d.pushback, prometheus.CounterValue, float64(n), rs.label, labels.Pushbacks[i])
		}
	}
}

// Describe implements [prometheus.Collector].
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.descs
	for _, desc := range []*prometheus.Desc{
		d.calls, d.attempts, d.retries, d.budget, d.rejections, d.callDur, d.attemptDur, d.wait,
		d.inFlight, d.state, d.openSeconds, d.transitions, d.inbound, d.inboundDur,
		d.hedges, d.hedgeWins, d.epAttempts, d.epEjected, d.epEjections,
		d.paceRate, d.probes,
		d.fleet.sheds, d.fleet.pushback, d.fleet.retriesSkipped, d.fleet.hedgesSkipped,
	} {
		ch <- desc
	}
}

// Collect implements [prometheus.Collector]. A series appears with its first
// observation; the retry budget and in-flight series exist for every key a
// Transport's call was seen for, and the state and open-seconds series for
// those and every key a breaker transition was seen for. The breaker state
// and open seconds are computed at collection time (see the package
// documentation).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.collectSnapshots(ch)
	now := time.Now()
	counts := make([]uint64, len(c.bounds)+1)
	d := &c.descs
	c.keys.Each(func(ks *keySeries) {
		var ends uint64
		for i := range ks.calls {
			n, sum := ks.calls[i].snapshot(counts)
			ends += n
			if n > 0 {
				ch <- c.constMetric(d.calls, prometheus.CounterValue, float64(n), ks.label, labels.Categories[i])
				ch <- c.constHistogram(d.callDur, counts, n, sum, ks.label, labels.Categories[i])
			}
		}
		// Read starts after the ends: a call counted as ended started
		// before that read, so it is counted as started too, and in flight
		// is never under-reported.
		starts := ks.starts.Load()
		for i := range ks.attempts {
			if n, sum := ks.attempts[i].snapshot(counts); n > 0 {
				ch <- c.constMetric(d.attempts, prometheus.CounterValue, float64(n), ks.label, labels.Categories[i])
				ch <- c.constHistogram(d.attemptDur, counts, n, sum, ks.label, labels.Categories[i])
			}
		}
		for i := range ks.retries {
			if n := ks.retries[i].Load(); n > 0 {
				ch <- c.constMetric(d.retries, prometheus.CounterValue, float64(n), ks.label, labels.Categories[i])
			}
		}
		for i := range ks.rejects {
			if n := ks.rejects[i].Load(); n > 0 {
				ch <- c.constMetric(d.rejections, prometheus.CounterValue, float64(n), ks.label, labels.Mechanisms[i])
			}
		}
		has := ks.has.Load()
		if has&hasCalls != 0 {
			budget := ks.rejects[labels.MechanismIndex(breakwater.MechRetryBudget)].Load()
			ch <- c.constMetric(d.budget, prometheus.CounterValue, float64(budget), ks.label)
		}
		for i := range ks.waits {
			if n, sum := ks.waits[i].snapshot(counts); n > 0 {
				ch <- c.constHistogram(d.wait, counts, n, sum, ks.label, labels.Mechanisms[i])
			}
		}
		if has&hasCalls != 0 {
			inFlight := 0.0
			if starts > ends {
				inFlight = float64(starts - ends)
			}
			ch <- c.constMetric(d.inFlight, prometheus.GaugeValue, inFlight, ks.label)
		}
		state, open, transitions := ks.breaker.read(now)
		if has != 0 {
			ch <- c.constMetric(d.state, prometheus.GaugeValue, state, ks.label)
			ch <- c.constMetric(d.openSeconds, prometheus.GaugeValue, open, ks.label)
		}
		for t, n := range transitions {
			ch <- c.constMetric(d.transitions, prometheus.CounterValue, float64(n), ks.label, t.from, t.to, t.reason)
		}
		if n := ks.hedges.Load(); n > 0 {
			ch <- c.constMetric(d.hedges, prometheus.CounterValue, float64(n), ks.label)
			ch <- c.constMetric(d.hedgeWins, prometheus.CounterValue, float64(ks.wins.Load()), ks.label)
		}
		ks.eps.Each(func(es *endpointSeries) {
			for i := range es.attempts {
				if n := es.attempts[i].Load(); n > 0 {
					ch <- c.constMetric(d.epAttempts, prometheus.CounterValue, float64(n), ks.label, es.label, labels.Categories[i])
				}
			}
			es.mu.Lock()
			ejected := 0.0
			if es.ejected {
				ejected = 1
			}
			ejections := maps.Clone(es.ejections)
			es.mu.Unlock()
			ch <- c.constMetric(d.epEjected, prometheus.GaugeValue, ejected, ks.label, es.label)
			for reason, n := range ejections {
				ch <- c.constMetric(d.epEjections, prometheus.CounterValue, float64(n), ks.label, es.label, reason)
			}
		})
		c.collectKeyFleet(ch, ks)
	})
	c.routes.Each(func(rs *routeSeries) {
		for i := range rs.requests {
			n := rs.requests[i].Load()
			if n == 0 {
				continue
			}
			k := i % len(labels.Categories)
			s := i / len(labels.Categories) % len(statusClassNames)
			m := i / len(labels.Categories) / len(statusClassNames)
			ch <- c.constMetric(d.inbound, prometheus.CounterValue, float64(n), rs.label, methodNames[m], statusClassNames[s], labels.Categories[k])
		}
		if n, sum := rs.duration.snapshot(counts); n > 0 {
			ch <- c.constHistogram(d.inboundDur, counts, n, sum, rs.label)
		}
		c.collectRouteFleet(ch, rs)
	})
}

// Watch makes the Collector read the state of srcs at each collection,
// besides those it watches already, for the gauges that no event carries:
// the learned rate of each paced key (breakwater_pace_rate) and the
// probes each half-open breaker lets through at once
// (breakwater_breaker_probes). Each collection takes one Snapshot of
// every source; a nil source is ignored. Without a source those gauges
// have no series. Watch is safe for concurrent use, with collections too:
// a transport observed by the Collector is built after it, then watched.
func (c *Collector) Watch(srcs ...Snapshotter) {
	if c == nil {
		return
	}
	c.sources.Add(srcs...)
}

// collectSnapshots reports the gauges read from the sources of Watch:
// keys that share a label add up (their rates, their probes).
func (c *Collector) collectSnapshots(ch chan<- prometheus.Metric) {
	srcs := c.sources.Load()
	rates, probes := map[string]float64{}, map[string]float64{}
	for _, src := range srcs {
		snap := src.Snapshot()
		for _, p := range snap.Pauses {
			if p.Paced {
				rates[c.keys.Get(p.Key).label] += p.PaceRate
			}
		}
		for _, b := range snap.Breakers {
			probes[c.keys.Get(b.Key).label] += float64(b.ProbesAllowed)
		}
	}
	for label, v := range rates {
		ch <- c.constMetric(c.descs.paceRate, prometheus.GaugeValue, v, label)
	}
	for label, v := range probes {
		ch <- c.constMetric(c.descs.probes, prometheus.GaugeValue, v, label)
	}
}

func (c *Collector) constMetric(desc *prometheus.Desc, t prometheus.ValueType, v float64, lvs ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(desc, t, v, lvs...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// constHistogram builds a histogram from per-bucket counts (the last one
// being +Inf).
func (c *Collector) constHistogram(desc *prometheus.Desc, counts []uint64, total uint64, sum float64, lvs ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(c.bounds))
	var cum uint64
	for i, b := range c.bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	m, err := prometheus.NewConstHistogram(desc, total, sum, buckets, lvs...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
