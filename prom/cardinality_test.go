package prom_test

import (
	"context"
	"fmt"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// TestKeyCapBoundsLabels sends calls to 10 000 distinct hosts through a
// transport whose collector keeps 100 keys: every metric has at most 101
// key label values, the overflow ones add up under "other", and no call is
// lost.
func TestKeyCapBoundsLabels(t *testing.T) {
	const hosts, maxKeys = 10_000, 100
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithMaxKeys(maxKeys))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, cannedOK{}, bw.WithObserver(c))
	ctx := context.Background()
	for round := range 2 { // the second round meets keys known and overflowed
		for i := range hosts {
			if status, err := call(ctx, tr, fmt.Sprintf("https://h%d.example/", i)); status != 200 || err != nil {
				t.Fatalf("round %d call %d: %d %v", round, i, status, err)
			}
		}
	}
	got := gather(t, reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		keys := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "key" {
					keys[lp.GetValue()] = true
				}
			}
		}
		if len(keys) > maxKeys+1 {
			t.Errorf("%s has %d key label values, want at most %d", mf.GetName(), len(keys), maxKeys+1)
		}
	}
	keys := got.values("key")
	if len(keys) != maxKeys+1 || !keys[prom.OtherLabel] {
		t.Fatalf("%d key label values (other: %v), want %d including other", len(keys), keys[prom.OtherLabel], maxKeys+1)
	}
	if v := got.sum(prom.MetricCalls); v != 2*hosts {
		t.Fatalf("calls %v, want %d", v, 2*hosts)
	}
	if v := got.sum(prom.MetricCalls, "key", prom.OtherLabel); v != 2*(hosts-maxKeys) {
		t.Fatalf("calls under other %v, want %d", v, 2*(hosts-maxKeys))
	}
	if v := got[`breakwater_calls_total{category="success",key="h0.example"}`]; v != 2 {
		t.Fatalf("calls of the first host %v, want 2", v)
	}
}

// TestRouteCapBoundsLabels reports 10 000 distinct routes with a cap of 100.
func TestRouteCapBoundsLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithMaxRoutes(100))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		c.Observe(context.Background(), bw.Event{Kind: bw.EventRequest, Route: fmt.Sprintf("/r%d/{id}", i), Method: "GET", Status: 200})
	}
	got := gather(t, reg)
	if routes := got.values("route"); len(routes) != 101 || !routes[prom.OtherLabel] {
		t.Fatalf("%d route label values, want 101 including other", len(routes))
	}
	if v := got.sum(prom.MetricInboundRequests); v != 10_000 {
		t.Fatalf("inbound requests %v, want 10000", v)
	}
}
