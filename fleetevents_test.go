package breakwater_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// kindOf returns the events of kind k.
func kindOf(evs []bw.Event, k bw.EventKind) []bw.Event {
	var out []bw.Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// A Shedder's rejection says whether the caller's deadline could not be
// met, and the request's criticality; the request's event says that its
// answer told the caller to go elsewhere.
func TestFleetEventsSayWhyAndHowCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &eventLog{}
		bh, err := bw.NewBulkheads(1, bw.WithMaxQueue(4))
		if err != nil {
			t.Fatal(err)
		}
		sh, err := bw.Shedder(bh, bw.WithObserver(log))
		if err != nil {
			t.Fatal(err)
		}
		trust, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		h := trust(sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			time.Sleep(100 * time.Millisecond)
		})))
		call := func(header ...string) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, fleetRequest(header...))
			return rec.Code
		}
		var wg sync.WaitGroup
		for range 5 { // a queue that learns its pace: 100 ms a request
			wg.Go(func() {
				for range 6 {
					call("Breakwater-Timeout-Ms", "10000")
				}
			})
		}
		time.Sleep(time.Second)
		before := len(log.events())
		if code := call("Breakwater-Timeout-Ms", "250", "Breakwater-Criticality", "sheddable"); code != http.StatusServiceUnavailable {
			t.Fatalf("a request its deadline leaves no time for: %d, want 503", code)
		}
		late := log.events()[before:]
		before = len(log.events())
		// The queue full, a critical request turns a default one away.
		if code := call("Breakwater-Timeout-Ms", "10000", "Breakwater-Criticality", "critical"); code != http.StatusOK {
			t.Errorf("a critical request at a full queue: %d, want 200", code)
		}
		full := kindOf(log.events()[before:], bw.EventReject)
		wg.Wait()

		// Other requests end meanwhile: the late one is the sheddable one.
		late = slices.DeleteFunc(late, func(e bw.Event) bool { return e.Criticality != bw.Sheddable })
		rej := kindOf(late, bw.EventReject)
		if len(rej) != 1 || !errors.Is(rej[0].Err, bw.ErrCallerDeadline) || !errors.Is(rej[0].Err, bw.ErrConcurrencyLimit) || rej[0].Criticality != bw.Sheddable || rej[0].Mechanism != bw.MechShed {
			t.Fatalf("late request's rejections %+v, want one shed for the caller's deadline, sheddable", rej)
		}
		if msg := rej[0].Err.Error(); !strings.Contains(msg, "the caller's deadline cannot be met") {
			t.Errorf("its error %q does not say why", msg)
		}
		req := kindOf(late, bw.EventRequest)
		if len(req) != 1 || req[0].Reason != bw.ReasonPushback || req[0].Category != bw.Rejected || req[0].Criticality != bw.Sheddable {
			t.Errorf("late request's request events %+v, want one rejected with reason %q", req, bw.ReasonPushback)
		}
		if len(full) == 0 {
			t.Error("no request turned away for the critical one")
		}
		for _, e := range full {
			if errors.Is(e.Err, bw.ErrCallerDeadline) || e.Criticality != 0 {
				t.Errorf("a request turned away: %v, criticality %d; want no deadline's and the default", e.Err, e.Criticality)
			}
		}
	})
}

// A handler's 5xx after its own propagating call failed carries
// Breakwater-Pushback: none, and its request's event says so.
func TestFleetEventsPushbackNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport(), bw.WithPropagation(true), bw.WithoutRetryBudget())
		log := &eventLog{}
		bh, err := bw.NewBulkheads(4)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := bw.Shedder(bh, bw.WithObserver(log))
		if err != nil {
			t.Fatal(err)
		}
		trust, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		h := trust(sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			out, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://b.internal/", nil)
			if resp, err := tr.RoundTrip(out); err == nil {
				resp.Body.Close()
			}
			w.WriteHeader(http.StatusBadGateway)
		})))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, fleetRequest("Breakwater-Attempt", "1;max=3", "Breakwater-Criticality", "critical"))
		if got := rec.Header().Get("Breakwater-Pushback"); got != "none" {
			t.Fatalf("pushback %q, want none", got)
		}
		req := kindOf(log.events(), bw.EventRequest)
		if len(req) != 1 || req[0].Reason != bw.ReasonPushback || req[0].Category != bw.ServerError || req[0].Criticality != bw.Critical {
			t.Errorf("request events %+v, want one server error with reason %q, critical", req, bw.ReasonPushback)
		}
	})
}

// A route breaker's 503 to a breakwater caller says elsewhere: another
// replica's route may be whole.
func TestRouteBreakerPushesBackElsewhere(t *testing.T) {
	log := &eventLog{}
	bs, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(1)))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := bw.RouteBreaker(bs, bw.WithObserver(log))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := bw.CallerHeaders("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", trust(rb(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))))
	for range 2 { // the first opens the breaker
		mux.ServeHTTP(httptest.NewRecorder(), fleetRequest("Breakwater-Attempt", "1;max=3"))
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, fleetRequest("Breakwater-Attempt", "1;max=3"))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Breakwater-Pushback") != "elsewhere" {
		t.Fatalf("an open route breaker answered %d, pushback %q; want 503, elsewhere", rec.Code, rec.Header().Get("Breakwater-Pushback"))
	}
	evs := kindOf(log.events(), bw.EventRequest)
	if last := evs[len(evs)-1]; last.Reason != bw.ReasonPushback || last.Category != bw.Rejected {
		t.Errorf("its request event %+v, want reason %q, rejected", last, bw.ReasonPushback)
	}
	if first := evs[0]; first.Reason != "" {
		t.Errorf("the handler's own 500 (no call of its own failed) has reason %q", first.Reason)
	}
}
