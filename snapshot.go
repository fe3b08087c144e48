package breakwater

import (
	"time"
)

// Snapshot is a point-in-time view of the per-key state a [Transport] or
// a registry holds ([Breakers], [RateLimiters], [PauseGates],
// [Bulkheads]), each of which has a Snapshot method: the sources of the
// status page (package status), and of anything that serves or checks
// state as JSON.
type Snapshot struct {
	At       time.Time         `json:"at"`
	Breakers []BreakerSnapshot `json:"breakers"`
	// Bulkheads, RateLimiters and Pauses are set by the Transport or the
	// registry that holds them.
	Bulkheads    []BulkheadSnapshot  `json:"bulkheads,omitempty"`
	RateLimiters []RateLimitSnapshot `json:"rate_limiters,omitempty"`
	Pauses       []PauseSnapshot     `json:"pauses,omitempty"`
	// Insights are the findings of [WithInsights] about the
	// component: nil when none observes it, empty when it finds nothing.
	Insights []Insight `json:"insights,omitzero"`
	// Endpoints and Hedges are set by a Transport with [WithFailover] and
	// [WithHedging].
	Endpoints []EndpointSnapshot `json:"endpoints,omitempty"`
	Hedges    []HedgeSnapshot    `json:"hedges,omitempty"`
}

// Snapshot returns the state of every breaker, token bucket, pause gate,
// bulkhead, failover endpoint and hedging key the transport holds, and the
// findings of [WithInsights].
func (t *Transport) Snapshot() Snapshot {
	s := Snapshot{At: time.Now(), Breakers: t.breakers.snapshots()}
	if t.limits.rate != nil {
		s.RateLimiters = t.limits.rate.snapshots()
	}
	if t.limits.gates != nil {
		s.Pauses = t.limits.gates.snapshots()
	}
	if t.limits.bulk != nil {
		s.Bulkheads = t.limits.bulk.snapshots()
	}
	for _, o := range t.cfg.observers {
		insightsOf(o, func(in *insights) { s.Insights = append(s.Insights, in.findings(s.Pauses)...) })
	}
	if s.Insights == nil && t.hasInsights() {
		s.Insights = []Insight{}
	}
	if t.eps != nil {
		s.Endpoints = t.eps.snapshots(t.endpointState)
	}
	if t.cfg.hedging != nil {
		s.Hedges = t.hedgeSnapshots()
	}
	return s
}

// insightsOf calls fn for every *insights in o, composed ones included.
func insightsOf(o Observer, fn func(*insights)) {
	switch o := o.(type) {
	case *insights:
		fn(o)
	case multiObserver:
		for _, m := range o {
			insightsOf(m, fn)
		}
	}
}

func (t *Transport) hasInsights() bool {
	found := false
	for _, o := range t.cfg.observers {
		insightsOf(o, func(*insights) { found = true })
	}
	return found
}
