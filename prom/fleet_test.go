package prom_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// A fleet's counters: a Shedder's sheds by criticality and reason, the
// pushback its server sends, and the retries its caller skips for it.
func TestFleetCounters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	bh, err := bw.NewBulkheads(1, bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := bw.Shedder(bh, bw.WithObserver(c))
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

	tr, err := bw.NewTransport(bw.WithPropagation(true), bw.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, crit := range []bw.Criticality{bw.Critical, bw.Critical, 0} {
		req, err := http.NewRequestWithContext(bw.ContextWithCriticality(context.Background(), crit), http.MethodGet, srv.URL+"/items/7", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// What middleware alone cannot make happen here: a refusal for the
	// caller's deadline, and a handler's 5xx after its own call failed.
	c.Observe(context.Background(), bw.Event{Kind: bw.EventReject, Key: "/items/{id}", Route: "/items/{id}", Mechanism: bw.MechShed, Err: bw.ErrCallerDeadline, Criticality: bw.Sheddable})
	c.Observe(context.Background(), bw.Event{Kind: bw.EventRequest, Route: "/items/{id}", Status: 502, Category: bw.ServerError, Reason: bw.ReasonPushback})

	got := gather(t, reg)
	const route = "GET /items/{id}"
	for _, tc := range []struct {
		name  string
		match []string
		want  float64
	}{
		{prom.MetricInboundSheds, []string{"route", route, "criticality", "critical", "reason", "capacity"}, 2},
		{prom.MetricInboundSheds, []string{"route", route, "criticality", "default", "reason", "capacity"}, 1},
		{prom.MetricInboundSheds, []string{"route", "/items/{id}", "criticality", "sheddable", "reason", "caller_deadline"}, 1},
		{prom.MetricInboundPushback, []string{"route", route, "value", "elsewhere"}, 3},
		{prom.MetricInboundPushback, []string{"route", "/items/{id}", "value", "none"}, 1},
		{prom.MetricRetriesSkipped, []string{"reason", "pushback"}, 3},
	} {
		if n := got.sum(tc.name, tc.match...); n != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.match, n, tc.want)
		}
	}
	if n := len(got.of(prom.MetricInboundSheds)); n != 3 {
		t.Errorf("%d shed series, want 3: %v", n, got.of(prom.MetricInboundSheds))
	}
}
