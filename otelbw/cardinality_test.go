package otelbw_test

import (
	"context"
	"fmt"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
)

// TestKeyCapBoundsAttributes sends calls to 10 000 distinct hosts through a
// transport whose observer keeps 100 keys, the prom package's default cap:
// every instrument has at most 101 breakwater.key values, the overflow ones
// add up under "other", and no call is lost.
func TestKeyCapBoundsAttributes(t *testing.T) {
	const hosts, maxKeys = 10_000, otelbw.DefaultMaxKeys
	s := newSDK(t)
	tr := newTransport(t, cannedOK{}, bw.WithObserver(s.obs))
	ctx := context.Background()
	for round := range 2 { // the second round meets keys known and overflowed
		for i := range hosts {
			if status, err := call(ctx, tr, fmt.Sprintf("https://h%d.example/", i)); status != 200 || err != nil {
				t.Fatalf("round %d call %d: %d %v", round, i, status, err)
			}
		}
	}
	got := s.series(t)
	for _, m := range s.collect(t) {
		if keys := got.values(m.Name, "breakwater.key"); len(keys) > maxKeys+1 {
			t.Errorf("%s has %d key values, want at most %d", m.Name, len(keys), maxKeys+1)
		}
	}
	keys := got.values(otelbw.MetricCallDuration+"_count", "breakwater.key")
	if len(keys) != maxKeys+1 || !keys["other"] {
		t.Fatalf("%d key values (other: %v), want %d including other", len(keys), keys["other"], maxKeys+1)
	}
	if v := got.sum(otelbw.MetricCallDuration + "_count"); v != 2*hosts {
		t.Fatalf("calls %v, want %d", v, 2*hosts)
	}
	if v := got.sum(otelbw.MetricCallDuration+"_count", "breakwater.key", "other"); v != 2*(hosts-maxKeys) {
		t.Fatalf("calls under other %v, want %d", v, 2*(hosts-maxKeys))
	}
	if v := got[`breakwater.call.duration_count{breakwater.category="success",breakwater.key="h0.example"}`]; v != 2 {
		t.Fatalf("calls of the first host %v, want 2", v)
	}
}

// TestRouteCapBoundsAttributes reports 10 000 distinct routes with a cap of
// 100.
func TestRouteCapBoundsAttributes(t *testing.T) {
	s := newSDK(t, otelbw.WithMaxRoutes(100))
	for i := range 10_000 {
		s.obs.Observe(context.Background(), bw.Event{Kind: bw.EventRequest, Route: fmt.Sprintf("/r%d/{id}", i), Method: "GET", Status: 200})
	}
	got := s.series(t)
	for _, name := range []string{otelbw.MetricInboundRequests, otelbw.MetricInboundRequestDuration + "_count"} {
		if routes := got.values(name, "http.route"); len(routes) != 101 || !routes["other"] {
			t.Fatalf("%s: %d route values, want 101 including other", name, len(routes))
		}
	}
	if v := got.sum(otelbw.MetricInboundRequests); v != 10_000 {
		t.Fatalf("inbound requests %v, want 10000", v)
	}
}

// TestEndpointCapBoundsAttributes reports attempts and ejections of 200
// endpoints under one key: breakwater.endpoint keeps 64 values, then
// "other", and no attempt is lost.
func TestEndpointCapBoundsAttributes(t *testing.T) {
	s := newSDK(t)
	ctx := context.Background()
	for i := range 200 {
		ep := fmt.Sprintf("https://e%d.example", i)
		s.obs.Observe(ctx, bw.Event{Kind: bw.EventAttempt, Key: "svc", Category: bw.Success, Endpoint: ep})
		s.obs.Observe(ctx, bw.Event{Kind: bw.EventHealth, Key: "svc", Endpoint: ep, Health: bw.HealthEjected, Reason: bw.ReasonOutlier})
	}
	got := s.series(t)
	for _, name := range []string{otelbw.MetricEndpointAttempts, otelbw.MetricEndpointEjected, otelbw.MetricEndpointEjections} {
		if eps := got.values(name, "breakwater.endpoint"); len(eps) != 65 || !eps["other"] {
			t.Errorf("%s: %d endpoint values, want 65 including other", name, len(eps))
		}
	}
	if v := got.sum(otelbw.MetricEndpointAttempts); v != 200 {
		t.Errorf("endpoint attempts %v, want 200", v)
	}
	if v := got.sum(otelbw.MetricEndpointEjections, "breakwater.endpoint", "other"); v != 200-64 {
		t.Errorf("ejections under other %v, want %d", v, 200-64)
	}
}
