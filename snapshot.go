package breakwater

import (
	"encoding/json"
	"net/http"
	"time"
)

// Snapshot is a point-in-time view of the per-key state a component owns.
type Snapshot struct {
	Name     string            `json:"name,omitempty"`
	At       time.Time         `json:"at"`
	Breakers []BreakerSnapshot `json:"breakers"`
	// Bulkheads, RateLimiters and Pauses are set by the components that own
	// them (a [Transport] configured with them, a [Shedder], a
	// [ClientRateLimit]).
	Bulkheads    []BulkheadSnapshot  `json:"bulkheads,omitempty"`
	RateLimiters []RateLimitSnapshot `json:"rate_limiters,omitempty"`
	Pauses       []PauseSnapshot     `json:"pauses,omitempty"`
	// Insights are the findings of the [Insights] observing the
	// component: nil when none observes it, empty when it finds nothing.
	Insights []Insight `json:"insights,omitzero"`
	// Endpoints and Hedges are set by a Transport with [WithFailover] and
	// [WithHedging].
	Endpoints []EndpointSnapshot `json:"endpoints,omitempty"`
	Hedges    []HedgeSnapshot    `json:"hedges,omitempty"`
}

// A Snapshotter reports its state; [Transport] and the inbound middleware
// are Snapshotters.
type Snapshotter interface {
	Snapshot() Snapshot
}

// Snapshot returns the state of every breaker, token bucket, pause gate,
// bulkhead, failover endpoint and hedging key the transport holds, and the
// findings of the [Insights] among its observers.
func (t *Transport) Snapshot() Snapshot {
	s := Snapshot{At: time.Now(), Breakers: t.breakers.Snapshots()}
	if t.limits.rate != nil {
		s.RateLimiters = t.limits.rate.Snapshots()
	}
	if t.limits.gates != nil {
		s.Pauses = t.limits.gates.Snapshots()
	}
	if t.limits.bulk != nil {
		s.Bulkheads = t.limits.bulk.Snapshots()
	}
	for _, o := range t.cfg.observers {
		insightsOf(o, func(in *Insights) { s.Insights = append(s.Insights, in.Findings()...) })
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

// SnapshotHandler serves the snapshots of sources as a JSON array, for a
// status page or a debug endpoint (mount it on chi at /debug/breakwater).
// It answers GET and HEAD only.
func SnapshotHandler(sources ...Snapshotter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		out := make([]Snapshot, 0, len(sources))
		for _, s := range sources {
			if s != nil {
				out = append(out, s.Snapshot())
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
}

// insightsOf calls fn for every *Insights in o, composed ones included.
func insightsOf(o Observer, fn func(*Insights)) {
	switch o := o.(type) {
	case *Insights:
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
		insightsOf(o, func(*Insights) { found = true })
	}
	return found
}
