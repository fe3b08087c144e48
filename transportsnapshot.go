package breakwater

import (
	"slices"
	"strings"
	"time"
)

// Snapshot returns the state of every breaker, token bucket, pause gate,
// bulkhead, retry budget, failover endpoint and hedging key the transport
// holds, and the findings of [WithInsights].
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
	if !t.cfg.noCongestion {
		s.Bulkheads = append(s.Bulkheads, t.congestionSnapshots()...)
	}
	if t.cfg.budget {
		now := t.now()
		t.keys.Each(func(key string, u *upstream) {
			if u.budget != nil {
				s.RetryBudgets = append(s.RetryBudgets, u.budget.snapshot(key, now))
			}
		})
		slices.SortFunc(s.RetryBudgets, func(a, b RetryBudgetSnapshot) int { return strings.Compare(a.Key, b.Key) })
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

// congestionSnapshots returns the keys whose congestion limit is engaged,
// by key.
func (t *Transport) congestionSnapshots() []BulkheadSnapshot {
	var out []BulkheadSnapshot
	t.keys.Each(func(key string, u *upstream) {
		if lim := u.cong.limit.Load(); lim > 0 {
			n := flightOf(u.cong.state.Load())
			out = append(out, BulkheadSnapshot{Key: key, Limit: int(lim), InFlight: int(n), Saturated: n >= lim, Congestion: true})
		}
	})
	slices.SortFunc(out, func(a, b BulkheadSnapshot) int { return strings.Compare(a.Key, b.Key) })
	return out
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
