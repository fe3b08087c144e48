package prom_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// serveRoute mounts mw around a handler answering status on the pattern
// "GET /items/{id}" of a real server, and sends it n requests.
func serveRoute(t *testing.T, mw func(http.Handler) http.Handler, status, n int) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	for range n {
		resp, err := client.Get(srv.URL + "/items/7")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// TestInboundSeriesOnlyForMechanismsPresent: a collector that observes only
// inbound middleware exports no series for a mechanism the middleware does
// not have. A client rate limiter's route gets its rejections and requests
// but no breaker state, open seconds, retry budget or in-flight series; a
// route breaker's route gets breaker series (it has a breaker) and still no
// retry budget or in-flight series.
func TestInboundSeriesOnlyForMechanismsPresent(t *testing.T) {
	const route = "GET /items/{id}"
	transportOnly := []string{prom.MetricRetryBudgetExhausted, prom.MetricInFlight}
	breakerSeries := []string{prom.MetricBreakerState, prom.MetricBreakerOpenSeconds}

	t.Run("client rate limit", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		rl, err := bw.NewRateLimiters(0.001, 1)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey, bw.WithObserver(c))
		if err != nil {
			t.Fatal(err)
		}
		serveRoute(t, mw, http.StatusOK, 3)
		got := gather(t, reg)
		if n := got.sum(prom.MetricRejections, "key", route, "mechanism", "rate_limit"); n != 2 {
			t.Errorf("rate_limit rejections %v, want 2", n)
		}
		if n := got.sum(prom.MetricInboundRequests, "route", route); n != 3 {
			t.Errorf("inbound requests %v, want 3", n)
		}
		for _, id := range got.of(append(transportOnly, breakerSeries...)...) {
			t.Errorf("a rate limiter's route exports %s", id)
		}
	})

	t.Run("route breaker", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(1)), bw.WithObserver(c))
		if err != nil {
			t.Fatal(err)
		}
		mw, err := bw.RouteBreaker(bs, bw.WithObserver(c))
		if err != nil {
			t.Fatal(err)
		}
		serveRoute(t, mw, http.StatusInternalServerError, 2)
		got := gather(t, reg)
		if n := got.sum(prom.MetricRejections, "key", route, "mechanism", "route_breaker"); n != 1 {
			t.Errorf("route_breaker rejections %v, want 1", n)
		}
		for _, name := range breakerSeries {
			if _, ok := got[name+`{key="`+route+`"}`]; !ok {
				t.Errorf("a route breaker's route has no %s series", name)
			}
		}
		for _, id := range got.of(transportOnly...) {
			t.Errorf("a route breaker's route exports %s", id)
		}
	})
}
