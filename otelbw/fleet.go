package otelbw

import (
	"context"
	"errors"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Instrument names of a fleet of breakwater services; the package
// documentation lists their attributes.
const (
	MetricInboundSheds    = "breakwater.inbound.sheds"
	MetricInboundPushback = "breakwater.inbound.pushback"
	MetricRetriesSkipped  = "breakwater.retries.skipped"
	MetricHedgesSkipped   = "breakwater.hedges.skipped"
)

// Attribute keys of the fleet's instruments.
const (
	criticalityAttr = attribute.Key("breakwater.criticality")
	shedReasonAttr  = attribute.Key("breakwater.shed.reason")
	pushbackAttr    = attribute.Key("breakwater.pushback")
	skipReasonAttr  = attribute.Key("breakwater.skip.reason")
)

// fleetInstruments are the instruments of a fleet's sheds, pushback and
// skipped retries and hedges.
type fleetInstruments struct {
	sheds, pushback, retriesSkipped, hedgesSkipped metric.Int64Counter
}

func (in *fleetInstruments) create(m metric.Meter) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.sheds = counter(MetricInboundSheds, "{request}", "Inbound requests a Shedder refused, by criticality and reason (caller_deadline: the caller's deadline could not be met; capacity: no room).")
	in.pushback = counter(MetricInboundPushback, "{response}", "Inbound answers that carried Breakwater-Pushback, by value (elsewhere: a shed or route breaker's 503; none: a 5xx after the handler's own call failed).")
	in.retriesSkipped = counter(MetricRetriesSkipped, "{retry}", "Retries a call did not make although its attempt's outcome called for one, by the rule that kept it (pushback: the server asked).")
	in.hedgesSkipped = counter(MetricHedgesSkipped, "{call}", "Calls not hedged because of a safety rule, by the rule.")
	return errors.Join(errs...)
}

// fleetRoute holds a route's attribute sets of sheds and pushback.
type fleetRoute struct {
	sheds    []attrs // by [criticality][shed reason], flattened
	pushback []attrs // by labels.Pushbacks
}

func newFleetRoute(route string) *fleetRoute {
	r := semconv.HTTPRoute(route)
	fr := &fleetRoute{}
	for _, c := range labels.Criticalities {
		for _, why := range labels.ShedReasons {
			fr.sheds = append(fr.sheds, newAttrs(r, criticalityAttr.String(c), shedReasonAttr.String(why)))
		}
	}
	for _, v := range labels.Pushbacks {
		fr.pushback = append(fr.pushback, newAttrs(r, pushbackAttr.String(v)))
	}
	return fr
}

// fleetKey holds a key's attribute sets of skipped retries and hedges.
type fleetKey struct {
	skipped []attrs // by labels.SkipReasons
}

func newFleetKey(key string) *fleetKey {
	k := keyAttr.String(key)
	fk := &fleetKey{}
	for _, why := range labels.SkipReasons {
		fk.skipped = append(fk.skipped, newAttrs(k, skipReasonAttr.String(why)))
	}
	return fk
}

// shed counts a Shedder's refusal.
func (ob *Observer) shed(ctx context.Context, e *breakwater.Event) {
	i := labels.CriticalityIndex(e.Criticality)*len(labels.ShedReasons) + labels.ShedReasonIndex(e.Err)
	ob.fleet.sheds.Add(ctx, 1, ob.routes.Get(e.Route).fleet().sheds[i].add...)
}

// pushback counts an answer that carried Breakwater-Pushback.
func (ob *Observer) pushback(ctx context.Context, rs *routeSeries, e *breakwater.Event) {
	ob.fleet.pushback.Add(ctx, 1, rs.fleet().pushback[labels.PushbackIndex(e.Category)].add...)
}

// skipped counts a retry or a hedge a rule kept a call from.
func (ob *Observer) skipped(ctx context.Context, e *breakwater.Event) {
	c := ob.fleet.retriesSkipped
	if e.Kind == breakwater.EventHedgeSkipped {
		c = ob.fleet.hedgesSkipped
	}
	c.Add(ctx, 1, ob.keys.Get(e.Key).fleet().skipped[labels.SkipReasonIndex(e.Reason)].add...)
}

// fleet returns rs's fleet attribute sets, made on first use.
func (rs *routeSeries) fleet() *fleetRoute {
	if f := rs.fl.Load(); f != nil {
		return f
	}
	rs.fl.CompareAndSwap(nil, newFleetRoute(rs.value))
	return rs.fl.Load()
}

// fleet returns ks's fleet attribute sets, made on first use.
func (ks *keySeries) fleet() *fleetKey {
	if f := ks.fl.Load(); f != nil {
		return f
	}
	ks.fl.CompareAndSwap(nil, newFleetKey(ks.value))
	return ks.fl.Load()
}
