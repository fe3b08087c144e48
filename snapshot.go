package breakwater

import (
	"slices"
	"strings"
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
	// RetryBudgets are set by a Transport with a retry budget.
	RetryBudgets []RetryBudgetSnapshot `json:"retry_budgets,omitempty"`
	// Insights are the findings of [WithInsights] about the
	// component: nil when none observes it, empty when it finds nothing.
	Insights []Insight `json:"insights,omitzero"`
	// Endpoints and Hedges are set by a Transport with [WithFailover] and
	// [WithHedging].
	Endpoints []EndpointSnapshot `json:"endpoints,omitempty"`
	Hedges    []HedgeSnapshot    `json:"hedges,omitempty"`
}

// RetryBudgetSnapshot is the state of one key's retry budget
// ([WithRetryBudget]).
type RetryBudgetSnapshot struct {
	Key string `json:"key"`
	// Calls and Retries are counted over the budget's window; Allowed is
	// the retries it grants over that window now: its ratio of the calls,
	// plus its floor unless the key's last attempts all failed.
	Calls   int64   `json:"calls"`
	Retries int64   `json:"retries"`
	Allowed float64 `json:"allowed"`
	// Spent reports that retries used it up: it holds retries and refuses
	// the key another one now.
	Spent bool `json:"spent"`
}

// snapshot returns the budget's state at now, as withdraw judges it.
func (b *retryBudget) snapshot(key string, now int64) RetryBudgetSnapshot {
	reserve := b.reserve
	if b.failing.Load() >= failingStreak {
		reserve = 0
	}
	calls, retries := b.w.Sum(now)
	s := RetryBudgetSnapshot{Key: key, Calls: calls, Retries: retries, Allowed: b.ratio*float64(calls) + reserve}
	s.Spent = retries > 0 && float64(retries+1) > s.Allowed
	return s
}

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
