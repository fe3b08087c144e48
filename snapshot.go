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
}

// A Snapshotter reports its state; [Transport] and the inbound middleware
// are Snapshotters.
type Snapshotter interface {
	Snapshot() Snapshot
}

// Snapshot returns the state of every breaker, token bucket, pause gate
// and bulkhead the transport holds.
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
