package otelbw

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// schemaURL is the semantic conventions' version the attributes follow.
const schemaURL = semconv.SchemaURL

// Instrument names; the package documentation lists their attributes.
const (
	MetricCallDuration           = "breakwater.call.duration"
	MetricAttemptDuration        = "breakwater.attempt.duration"
	MetricRetries                = "breakwater.retries"
	MetricRejections             = "breakwater.rejections"
	MetricWaitDuration           = "breakwater.wait.duration"
	MetricCallActive             = "breakwater.call.active"
	MetricBreakerStatus          = "breakwater.breaker.status"
	MetricBreakerOpenTime        = "breakwater.breaker.open_time"
	MetricBreakerTransitions     = "breakwater.breaker.transitions"
	MetricHedges                 = "breakwater.hedges"
	MetricHedgeWins              = "breakwater.hedge.wins"
	MetricEndpointAttempts       = "breakwater.endpoint.attempts"
	MetricEndpointEjected        = "breakwater.endpoint.ejected"
	MetricEndpointEjections      = "breakwater.endpoint.ejections"
	MetricPaceRate               = "breakwater.pace.rate"
	MetricBreakerProbes          = "breakwater.breaker.probes"
	MetricInboundRequests        = "breakwater.inbound.requests"
	MetricInboundRequestDuration = "breakwater.inbound.request.duration"
)

// durationBounds are the advised bucket bounds, in seconds, of every
// duration histogram: those of the prom package, 5 ms to 30 s (the default
// call timeout). A view in the SDK overrides them.
var durationBounds = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// instruments are the Observer's instruments.
type instruments struct {
	callDur, attemptDur, waitDur, requestDur metric.Float64Histogram
	retries, rejections, transitions         metric.Int64Counter
	hedges, hedgeWins                        metric.Int64Counter
	epAttempts, ejections                    metric.Int64Counter
	requests                                 metric.Int64Counter
	active, status, ejected                  metric.Int64ObservableUpDownCounter
	openTime, paceRate                       metric.Float64ObservableGauge
	probes                                   metric.Int64ObservableGauge
}

// create makes the instruments on m and registers observe for the
// asynchronous ones (calls in flight and the breaker gauges), reporting
// every error.
func (in *instruments) create(m metric.Meter, observe metric.Callback) error {
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBounds...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.callDur = hist(MetricCallDuration, "Duration of outbound calls until their response headers or error, retries and waits included; its count is the number of calls.")
	in.attemptDur = hist(MetricAttemptDuration, "Duration of outbound attempts until their response headers or error; its count is the number of attempts handed to the base transport.")
	in.waitDur = hist(MetricWaitDuration, "Time calls waited for a mechanism (rate limit, pause, concurrency slot).")
	in.requestDur = hist(MetricInboundRequestDuration, "Duration of inbound requests served through breakwater middleware.")
	in.retries = counter(MetricRetries, "{retry}", "Retries decided, by the category of the attempt that failed.")
	in.rejections = counter(MetricRejections, "{rejection}", "Work refused by a breakwater mechanism.")
	in.transitions = counter(MetricBreakerTransitions, "{transition}", "Circuit breaker state changes.")
	in.requests = counter(MetricInboundRequests, "{request}", "Inbound requests served through breakwater middleware.")
	in.hedges = counter(MetricHedges, "{hedge}", "Hedges sent: attempts started while an earlier attempt of the same call was still running.")
	in.hedgeWins = counter(MetricHedgeWins, "{call}", "Calls whose response came from a hedge.")
	in.epAttempts = counter(MetricEndpointAttempts, "{attempt}", "Attempts per failover endpoint, by outcome category.")
	in.ejections = counter(MetricEndpointEjections, "{ejection}", "Failover endpoints ejected by outlier detection, by reason.")
	var err error
	in.active, err = m.Int64ObservableUpDownCounter(MetricCallActive, metric.WithUnit("{call}"),
		metric.WithDescription("Outbound calls started and not yet ended (inside RoundTrip)."))
	errs = append(errs, err)
	in.status, err = m.Int64ObservableUpDownCounter(MetricBreakerStatus, metric.WithUnit("1"),
		metric.WithDescription("Circuit breaker state: 1 for the state the breaker is in, 0 for the others."))
	errs = append(errs, err)
	in.openTime, err = m.Float64ObservableGauge(MetricBreakerOpenTime, metric.WithUnit("s"),
		metric.WithDescription("Time since the circuit breaker last left the closed state; 0 while closed."))
	errs = append(errs, err)
	in.ejected, err = m.Int64ObservableUpDownCounter(MetricEndpointEjected, metric.WithUnit("{endpoint}"),
		metric.WithDescription("Failover endpoints ejected: 1 while outlier detection keeps the endpoint out, 0 otherwise."))
	errs = append(errs, err)
	in.paceRate, err = m.Float64ObservableGauge(MetricPaceRate, metric.WithUnit("{request}/s"),
		metric.WithDescription("Requests per second a paced key may send: the rate its 429s taught the pause gate (Observer.Watch)."))
	errs = append(errs, err)
	in.probes, err = m.Int64ObservableGauge(MetricBreakerProbes, metric.WithUnit("{probe}"),
		metric.WithDescription("Probes a half-open circuit breaker lets through at once, doubling per success; 0 unless half-open (Observer.Watch)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err = m.RegisterCallback(observe, in.active, in.status, in.openTime, in.ejected, in.paceRate, in.probes)
	return err
}

// seconds converts d to seconds; a negative d counts as 0.
func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// keySeries holds the attribute sets of one breakwater.key value, its calls
// in flight and the state of its breakers.
type keySeries struct {
	// Calls started and ended: in flight is their difference, read when the
	// SDK collects, so that a call costs two atomic additions rather than
	// two measurements.
	starts, ends atomic.Uint64

	value       string
	key         attrs   // the key alone
	byCategory  []attrs // key and category, by category index
	byMechanism []attrs // key and mechanism, by mechanism index
	byState     []attrs // key and breaker state, by state index
	transitions attrCache
	breaker     breakerAgg
	eps         endpoints // failover endpoints
	fl          atomic.Pointer[fleetKey]
}

func newKeySeries(value string) *keySeries {
	k := keyAttr.String(value)
	ks := &keySeries{value: value, key: newAttrs(k), eps: endpoints{key: value}}
	for _, c := range labels.Categories {
		ks.byCategory = append(ks.byCategory, newAttrs(k, categoryAttr.String(c)))
	}
	for _, m := range labels.Mechanisms {
		ks.byMechanism = append(ks.byMechanism, newAttrs(k, mechanismAttr.String(m)))
	}
	for _, s := range labels.States {
		ks.byState = append(ks.byState, newAttrs(k, stateAttr.String(s)))
	}
	return ks
}

// transition returns the attribute set of t's transitions counter.
func (ks *keySeries) transition(t *breakwater.Transition) attrs {
	from, to, reason := labels.StateIndex(t.From), labels.StateIndex(t.To), labels.ReasonIndex(t.Reason)
	code := uint32((from*len(labels.States)+to)*len(labels.Reasons) + reason)
	return ks.transitions.get(code, func() attrs {
		return newAttrs(keyAttr.String(ks.value), fromAttr.String(labels.States[from]),
			toAttr.String(labels.States[to]), reasonAttr.String(labels.Reasons[reason]))
	})
}

// routeSeries holds the attribute sets of one http.route value.
type routeSeries struct {
	value    string
	route    attrs
	requests attrCache // by method, status code and category
	fl       atomic.Pointer[fleetRoute]
}

func newRouteSeries(value string) *routeSeries {
	return &routeSeries{value: value, route: newAttrs(semconv.HTTPRoute(value))}
}

// request returns the attribute set of an inbound request's counter. A
// status outside 100–599 has no http.response.status_code.
func (rs *routeSeries) request(method string, status int, c breakwater.Category) attrs {
	if status < 100 || status > 599 {
		status = 0
	}
	m, ci := labels.MethodIndex(method), labels.CategoryIndex(c)
	code := uint32((m*600+status)*len(labels.Categories) + ci)
	return rs.requests.get(code, func() attrs {
		kvs := []attribute.KeyValue{semconv.HTTPRoute(rs.value), methodValues[m], categoryAttr.String(labels.Categories[ci])}
		if status != 0 {
			kvs = append(kvs, semconv.HTTPResponseStatusCode(status))
		}
		return newAttrs(kvs...)
	})
}

// observeKeys reports the asynchronous instruments of every key seen: its
// calls in flight, its breaker status (1 for the state its breakers are
// in, the worst of them, 0 for the other states), the time since they
// left closed, and whether each of its failover endpoints is ejected.
func (ob *Observer) observeKeys(_ context.Context, o metric.Observer) error {
	now := time.Now()
	in := &ob.inst
	ob.keys.Each(func(ks *keySeries) {
		// Read ends before starts, so that a call cannot be seen ending
		// without being seen starting.
		ends := ks.ends.Load()
		active := int64(0)
		if starts := ks.starts.Load(); starts > ends {
			active = int64(starts - ends)
		}
		o.ObserveInt64(in.active, active, ks.key.obs...)
		state, open := ks.breaker.read(now)
		for i := range len(labels.States) - 1 {
			v := int64(0)
			if i == labels.StateIndex(state) {
				v = 1
			}
			o.ObserveInt64(in.status, v, ks.byState[i].obs...)
		}
		o.ObserveFloat64(in.openTime, open, ks.key.obs...)
		ks.eps.Each(func(es *endpointSeries) {
			v := int64(0)
			if es.ejected.Load() {
				v = 1
			}
			o.ObserveInt64(in.ejected, v, es.ep.obs...)
		})
	})
	ob.observeSnapshots(o)
	return nil
}

// observeSnapshots reports the gauges read from the sources of Watch:
// keys that share a value add up (their rates, their probes).
func (ob *Observer) observeSnapshots(o metric.Observer) {
	srcs := ob.sources.Load()
	rates, probes := map[*keySeries]float64{}, map[*keySeries]int64{}
	for _, src := range srcs {
		snap := src.Snapshot()
		for _, p := range snap.Pauses {
			if p.Paced {
				rates[ob.keys.Get(p.Key)] += p.PaceRate
			}
		}
		for _, b := range snap.Breakers {
			probes[ob.keys.Get(b.Key)] += int64(b.ProbesAllowed)
		}
	}
	for ks, v := range rates {
		o.ObserveFloat64(ob.inst.paceRate, v, ks.key.obs...)
	}
	for ks, v := range probes {
		o.ObserveInt64(ob.inst.probes, v, ks.key.obs...)
	}
}
