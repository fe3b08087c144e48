package breakwater_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

// stack is every inbound middleware on one chi router, in the recommended
// order, all reporting to one observer.
type stack struct {
	router http.Handler
	obs    *eventLog
	crl    func(http.Handler) http.Handler
	rb     func(http.Handler) http.Handler
	sh     func(http.Handler) http.Handler
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{obs: &eventLog{}}
	observe := bw.WithObserver(s.obs)
	var rl *bw.RateLimiters
	s.crl, rl = newClientRateLimit(t, 0.01, 3, bw.RemoteAddrKey, observe)
	bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(2)), bw.WithOpenJitter(0))
	s.rb = newRouteBreaker(t, bs, observe)
	bh, err := bw.NewBulkheads(2)
	if err != nil {
		t.Fatal(err)
	}
	if s.sh, err = bw.Shedder(bh, observe); err != nil {
		t.Fatal(err)
	}
	ht := newTimeout(t, time.Second, observe)

	r := chi.NewRouter()
	r.Use(s.crl, s.rb, s.sh, ht)
	r.Get("/ok/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	r.Get("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r.Get("/debug/breakwater", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]bw.Snapshot{rl.Snapshot(), bs.Snapshot(), bh.Snapshot()})
	})
	s.router = r
	return s
}

func TestStackedMiddlewareReportOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStack(t)
		type want struct {
			status int
			cat    bw.Category
			mech   bw.Mechanism
			route  string
		}
		for i, tc := range []struct {
			path   string
			remote string
			want   want
		}{
			{"/ok/1", "192.0.2.1:1", want{200, bw.Success, "", "/ok/{id}"}},
			{"/slow", "192.0.2.2:1", want{503, bw.Timeout, bw.MechTimeout, "/slow"}},
			{"/slow", "192.0.2.2:1", want{503, bw.Timeout, bw.MechTimeout, "/slow"}},
			{"/slow", "192.0.2.2:1", want{503, bw.Rejected, bw.MechRouteBreaker, "/slow"}}, // two timeouts opened it
			{"/ok/2", "192.0.2.2:1", want{429, bw.Rejected, bw.MechRateLimit, "/ok/{id}"}}, // a burst of 3 spent
		} {
			s.obs.mu.Lock()
			s.obs.evs = nil
			s.obs.mu.Unlock()
			rec := serveFrom(s.router, tc.path, tc.remote)
			evs := s.obs.events()
			var requests, rejects []bw.Event
			for _, e := range evs {
				switch e.Kind {
				case bw.EventRequest:
					requests = append(requests, e)
				case bw.EventReject:
					rejects = append(rejects, e)
				}
			}
			if rec.Code != tc.want.status || len(requests) != 1 {
				t.Fatalf("request %d %s: %d with %d EventRequest, want %d and exactly one", i, tc.path, rec.Code, len(requests), tc.want.status)
			}
			if e := requests[0]; e.Status != tc.want.status || e.Category != tc.want.cat || e.Route != tc.want.route {
				t.Errorf("request %d: %+v, want %+v", i, e, tc.want)
			}
			if tc.want.mech == "" && len(rejects) != 0 || tc.want.mech != "" && (len(rejects) != 1 || rejects[0].Mechanism != tc.want.mech) {
				t.Errorf("request %d: rejections %+v, want %q", i, rejects, tc.want.mech)
			}
		}

		rec := serveFrom(s.router, "/debug/breakwater", "192.0.2.9:1")
		var snaps []bw.Snapshot
		if err := json.Unmarshal(rec.Body.Bytes(), &snaps); err != nil || len(snaps) != 3 {
			t.Fatalf("snapshots %v: %s", err, rec.Body)
		}
		if len(snaps[0].RateLimiters) == 0 || len(snaps[1].Breakers) == 0 || len(snaps[2].Bulkheads) != 1 {
			t.Fatalf("snapshots %s", rec.Body)
		}
	})
}

// serveFrom serves a GET of path from remote through h.
func serveFrom(h http.Handler, path, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}
