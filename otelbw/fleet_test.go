package otelbw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
)

// A fleet's instruments: a Shedder's sheds by criticality and reason, the
// pushback its server sends, and the retries its caller skips for it.
func TestFleetInstruments(t *testing.T) {
	s := newSDK(t)
	bh, err := bw.NewBulkheads(1, bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := bw.Shedder(bh, bw.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := bw.CallerHeaders("127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", trust(shed(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	slot, err := bh.Acquire(context.Background(), "") // the one slot, taken: every request is shed
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	tr, err := bw.NewTransport(bw.WithPropagation(true), bw.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	for _, crit := range []bw.Criticality{bw.Sheddable, bw.Sheddable, bw.Critical} {
		req, err := http.NewRequestWithContext(bw.ContextWithCriticality(context.Background(), crit), http.MethodGet, srv.URL+"/items/7", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s.obs.Observe(context.Background(), bw.Event{Kind: bw.EventReject, Route: "GET /items/{id}", Mechanism: bw.MechShed, Err: bw.ErrCallerDeadline})
	s.obs.Observe(context.Background(), bw.Event{Kind: bw.EventRequest, Route: "GET /items/{id}", Status: 502, Category: bw.ServerError, Reason: bw.ReasonPushback})

	got := s.series(t)
	const route = "GET /items/{id}"
	for _, tc := range []struct {
		name  string
		match []string
		want  float64
	}{
		{otelbw.MetricInboundSheds, []string{"http.route", route, "breakwater.criticality", "sheddable", "breakwater.shed.reason", "capacity"}, 2},
		{otelbw.MetricInboundSheds, []string{"http.route", route, "breakwater.criticality", "critical", "breakwater.shed.reason", "capacity"}, 1},
		{otelbw.MetricInboundSheds, []string{"http.route", route, "breakwater.criticality", "default", "breakwater.shed.reason", "caller_deadline"}, 1},
		{otelbw.MetricInboundPushback, []string{"http.route", route, "breakwater.pushback", "elsewhere"}, 3},
		{otelbw.MetricInboundPushback, []string{"http.route", route, "breakwater.pushback", "none"}, 1},
		{otelbw.MetricRetriesSkipped, []string{"breakwater.skip.reason", "pushback"}, 3},
	} {
		if n := got.sum(tc.name, tc.match...); n != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.match, n, tc.want)
		}
	}
}
