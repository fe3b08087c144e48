package otelbw

import (
	"context"
	"errors"
	"fmt"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Defaults of an [Observer].
const (
	// DefaultMaxKeys is the number of breakwater.key values kept before new
	// keys are reported as "other".
	DefaultMaxKeys = 100
	// DefaultMaxRoutes is the number of http.route values kept before new
	// routes are reported as "other".
	DefaultMaxRoutes = 100
)

// An Option configures [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	mp        metric.MeterProvider
	keyValue  func(key string) string
	maxKeys   int
	maxRoutes int
}

// WithMeterProvider sets where the metrics go. nil (the default) is the
// global provider, [otel.GetMeterProvider], which records nothing until an
// SDK is installed with otel.SetMeterProvider and then forwards to it.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.mp = mp })
}

// WithKeyValue maps each key (what the transport's KeyFunc returned: the
// host[:port] by default) to its breakwater.key attribute value, for example
// a service name, before the key cap applies. nil (the default) uses the key
// itself. fn must be safe for concurrent use; it runs outside the observer's
// locks, on the goroutine of an event whose key the observer does not
// remember. An empty result becomes "none" and a panic "other".
func WithKeyValue(fn func(key string) string) Option {
	return optionFunc(func(o *options) { o.keyValue = fn })
}

// WithMaxKeys caps the number of distinct breakwater.key values at n
// (n >= 1); events of further keys are reported under "other", so the
// attribute has at most n+1 values. Default: [DefaultMaxKeys].
func WithMaxKeys(n int) Option {
	return optionFunc(func(o *options) { o.maxKeys = n })
}

// WithMaxRoutes caps the number of distinct http.route values of the
// inbound metrics at n (n >= 1); further routes are reported under "other".
// Default: [DefaultMaxRoutes].
func WithMaxRoutes(n int) Option {
	return optionFunc(func(o *options) { o.maxRoutes = n })
}

func (o *options) validate() error {
	var errs []error
	if o.maxKeys < 1 {
		errs = append(errs, fmt.Errorf("breakwater/otelbw: max keys must be >= 1, got %d", o.maxKeys))
	}
	if o.maxRoutes < 1 {
		errs = append(errs, fmt.Errorf("breakwater/otelbw: max routes must be >= 1, got %d", o.maxRoutes))
	}
	return errors.Join(errs...)
}

// Observer turns breakwater events into OpenTelemetry metrics and span
// events. It is a [breakwater.Observer]: pass it with
// [breakwater.WithObserver] to a Transport, a middleware or a breaker
// registry. The metrics and span events are listed in the package
// documentation.
//
// An Observer is safe for concurrent use. Observing an event of a key or
// route it already knows costs one map lookup and one measurement per
// instrument it feeds, and allocates nothing beyond what the meter
// provider's instruments allocate (nothing for the no-op and the SDK's).
// A nil *Observer observes nothing.
//
// One Observer may observe several transports and middlewares: their
// events add up under the same attributes. Two Observers on one meter
// provider report the same instruments and attributes, the breaker gauges
// of one hiding the other's: give each its own meter provider (or a view
// that tells them apart), or share one Observer.
type Observer struct {
	inst  instruments
	fleet fleetInstruments

	keys   *labels.Table[*keySeries]
	routes *labels.Table[*routeSeries]

	keyValueFn func(string) string
	sources    labels.Sources[Snapshotter] // of Watch
}

var _ breakwater.Observer = (*Observer)(nil)

// A Snapshotter is a component whose state [Observer.Watch] reads: a
// [breakwater.Transport], or a registry ([breakwater.Breakers],
// [breakwater.PauseGates], …).
type Snapshotter interface {
	Snapshot() breakwater.Snapshot
}

// Watch makes the Observer read the state of srcs each time the SDK
// collects, besides those it watches already, for the gauges that no
// event carries: the learned rate of each paced key
// (breakwater.pace.rate) and the probes each half-open breaker lets
// through at once (breakwater.breaker.probes). Each collection takes one
// Snapshot of every source; a nil source is ignored. Without a source
// those gauges have no data points. Watch is safe for concurrent use,
// with collections too: a transport observed by the Observer is built
// after it, then watched.
func (ob *Observer) Watch(srcs ...Snapshotter) {
	if ob == nil {
		return
	}
	ob.sources.Add(srcs...)
}

// New returns an Observer configured by opts. It creates its instruments on
// the meter provider's meter named [ScopeName], and registers one callback
// there for the asynchronous ones (calls in flight and the breaker
// gauges). It returns an error describing every invalid option, or the
// meter's error when an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	o := options{maxKeys: DefaultMaxKeys, maxRoutes: DefaultMaxRoutes}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	ob := &Observer{keyValueFn: o.keyValue}
	ob.keys = labels.NewTable(o.maxKeys, ob.keyValue, newKeySeries)
	ob.routes = labels.NewTable(o.maxRoutes, labels.Clean, newRouteSeries)
	m := o.mp.Meter(ScopeName, metric.WithSchemaURL(schemaURL))
	if err := errors.Join(ob.inst.create(m, ob.observeKeys), ob.fleet.create(m)); err != nil {
		return nil, err
	}
	return ob, nil
}

// ScopeName is the name of the meter the instruments are created on: this
// package's import path, as the OpenTelemetry conventions ask of an
// instrumentation library.
const ScopeName = "github.com/breakwater-go/breakwater/otelbw"

// keyValue maps a key to its attribute value; it never panics.
func (ob *Observer) keyValue(key string) string { return labels.Key(ob.keyValueFn, key) }

// Observe records e. It implements [breakwater.Observer]: it is safe for
// concurrent use, never retains ctx, and ignores event kinds it does not
// know. Metrics are recorded with ctx (a meter provider may take exemplars
// from its span); retries, rejections, waits, hedges and the answer of a
// hedged call become events of the span in ctx when that span is
// recording.
func (ob *Observer) Observe(ctx context.Context, e breakwater.Event) {
	if ob == nil {
		return
	}
	in := &ob.inst
	switch e.Kind {
	case breakwater.EventCallStart:
		ob.keys.Get(e.Key).starts.Add(1)
	case breakwater.EventAttempt:
		ks, ci := ob.keys.Get(e.Key), labels.CategoryIndex(e.Category)
		in.attemptDur.Record(ctx, seconds(e.Duration), ks.byCategory[ci].rec...)
		if e.Endpoint != "" {
			ob.endpointAttempt(ctx, ks, e.Endpoint, ci)
		}
	case breakwater.EventHedge:
		ob.hedge(ctx, &e)
	case breakwater.EventRetry:
		in.retries.Add(ctx, 1, ob.keys.Get(e.Key).byCategory[labels.CategoryIndex(e.Category)].add...)
		addSpanEvent(ctx, e)
	case breakwater.EventCallEnd:
		ks := ob.keys.Get(e.Key)
		in.callDur.Record(ctx, seconds(e.Duration), ks.byCategory[labels.CategoryIndex(e.Category)].rec...)
		ks.ends.Add(1)
		if e.Attempts > 1 {
			ob.hedgedEnd(ctx, ks, &e)
		}
	case breakwater.EventReject:
		in.rejections.Add(ctx, 1, ob.keys.Get(e.Key).byMechanism[labels.MechanismIndex(e.Mechanism)].add...)
		addSpanEvent(ctx, e)
		if e.Mechanism == breakwater.MechShed {
			ob.shed(ctx, &e)
		}
	case breakwater.EventRetrySkipped, breakwater.EventHedgeSkipped:
		ob.skipped(ctx, &e)
	case breakwater.EventWait:
		in.waitDur.Record(ctx, seconds(e.Duration), ob.keys.Get(e.Key).byMechanism[labels.MechanismIndex(e.Mechanism)].rec...)
		addSpanEvent(ctx, e)
	case breakwater.EventTransition:
		if e.Transition == nil {
			return
		}
		key := e.Transition.Key
		if key == "" {
			key = e.Key
		}
		ks := ob.keys.Get(key)
		ks.breaker.record(*e.Transition)
		in.transitions.Add(ctx, 1, ks.transition(e.Transition).add...)
	case breakwater.EventHealth:
		ob.health(ctx, &e)
	case breakwater.EventRequest:
		rs := ob.routes.Get(e.Route)
		in.requests.Add(ctx, 1, rs.request(e.Method, e.Status, e.Category).add...)
		in.requestDur.Record(ctx, seconds(e.Duration), rs.route.rec...)
		if e.Reason == breakwater.ReasonPushback {
			ob.pushback(ctx, rs, &e)
		}
	}
}

// The failover and hedging events, kept out of Observe so that the events
// of every call do not pay for them.

// endpointAttempt counts an attempt at a failover endpoint.
func (ob *Observer) endpointAttempt(ctx context.Context, ks *keySeries, endpoint string, ci int) {
	ob.inst.epAttempts.Add(ctx, 1, ks.eps.get(endpoint).byCategory[ci].add...)
}

// hedge counts a hedge sent and puts it on the call's span.
func (ob *Observer) hedge(ctx context.Context, e *breakwater.Event) {
	ob.inst.hedges.Add(ctx, 1, ob.keys.Get(e.Key).key.add...)
	addSpanEvent(ctx, *e)
}

// hedgedEnd counts a call a hedge answered and, for a call that sent
// hedges, puts the attempt that answered on its span.
func (ob *Observer) hedgedEnd(ctx context.Context, ks *keySeries, e *breakwater.Event) {
	if e.Hedge {
		ob.inst.hedgeWins.Add(ctx, 1, ks.key.add...)
	}
	if hedged(e) {
		addSpanEvent(ctx, *e)
	}
}

// health follows an endpoint's ejections.
func (ob *Observer) health(ctx context.Context, e *breakwater.Event) {
	if set, ejected := ob.keys.Get(e.Key).eps.get(e.Endpoint).health(e.Health, e.Reason); ejected {
		ob.inst.ejections.Add(ctx, 1, set.add...)
	}
}
