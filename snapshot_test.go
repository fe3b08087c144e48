package breakwater_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestSnapshotHandlerShowsAnOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithBreaker(bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0)))
		get(tr)
		time.Sleep(2 * time.Second)

		rec := httptest.NewRecorder()
		bw.SnapshotHandler(tr).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/breakwater", nil))
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		var got []struct {
			Breakers []struct {
				Key              string  `json:"key"`
				State            string  `json:"state"`
				RemainingSeconds float64 `json:"remaining_seconds"`
				LastFailure      string  `json:"last_failure"`
			} `json:"breakers"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%v in %s", err, rec.Body)
		}
		if len(got) != 1 || len(got[0].Breakers) != 1 {
			t.Fatalf("snapshot %s", rec.Body)
		}
		b := got[0].Breakers[0]
		if b.Key != upstreamKey || b.State != "open" || b.RemainingSeconds != 3 || b.LastFailure != "server_error" {
			t.Fatalf("breaker %+v, want open with 3s remaining after a server error", b)
		}
	})
}

func TestSnapshotShowsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"30"}}})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithRateLimit(10, 10), bw.WithConcurrencyLimit(4))
		get(tr)
		s := tr.Snapshot()
		if len(s.Pauses) != 1 || !s.Pauses[0].Paused || s.Pauses[0].Remaining != 30*time.Second {
			t.Fatalf("pauses %+v, want one of 30s", s.Pauses)
		}
		if len(s.RateLimiters) != 1 || s.RateLimiters[0].Tokens != 9 || len(s.Bulkheads) != 1 || s.Bulkheads[0].InFlight != 0 {
			t.Fatalf("limiters %+v, bulkheads %+v", s.RateLimiters, s.Bulkheads)
		}
	})
}
