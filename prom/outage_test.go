package prom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const upstreamKey = "http://upstream.test"

var upstreamURL = breakwatertest.PipeURL + "/"

func newTransport(t testing.TB, base http.RoundTripper, opts ...bw.Option) *bw.Transport {
	t.Helper()
	tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(base)}, opts...)...)
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	return tr
}

// call sends a GET for url through rt, drains and closes the body, and
// returns the status (0 on error) and the error.
func call(ctx context.Context, rt http.RoundTripper, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// scrape serves one scrape of h in memory and returns the exposition text.
func scrape(t testing.TB, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// requireLines fails unless every line of want is a line of text.
func requireLines(t testing.TB, step, text string, want ...string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("%s: the scrape has no line %q", step, w)
		}
	}
}

// TestScrapeAfterOutage plays an outage on the bubble's clock (two calls
// fail every attempt and open the breaker, a third is rejected, the
// breaker recovers through one probe), checking the breaker gauges by
// in-memory scrapes inside the bubble, then scrapes the registry over a
// real HTTP server outside it.
func TestScrapeAfterOutage(t *testing.T) {
	// The registry and the collector hold no channel or timer, so they may
	// be made here and used both inside the bubble and after it.
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}

	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport(), bw.WithObserver(c), bw.WithoutRetryBudget(),
			bw.WithPolicy(bw.Consecutive(2)), bw.WithHalfOpen(1, 1), bw.WithOpenJitter(0),
			bw.WithOpenTimeout(5*time.Second, time.Minute))
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
		ctx := context.Background()

		for i := 1; i <= 2; i++ {
			if status, err := call(ctx, tr, upstreamURL); status != 503 || err != nil {
				t.Fatalf("call %d: %d %v, want the 503 after 3 attempts", i, status, err)
			}
		}
		if _, err := call(ctx, tr, upstreamURL); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Fatalf("call 3: %v, want ErrCircuitOpen", err)
		}
		time.Sleep(2 * time.Second)
		requireLines(t, "open for 2s", scrape(t, h),
			`breakwater_breaker_state{key="http://upstream.test"} 2`,
			`breakwater_breaker_open_seconds{key="http://upstream.test"} 2`)

		time.Sleep(time.Minute) // the 5 s open duration has long elapsed
		requireLines(t, "open duration elapsed", scrape(t, h),
			`breakwater_breaker_state{key="http://upstream.test"} 1`,
			`breakwater_breaker_open_seconds{key="http://upstream.test"} 62`)

		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{}))
		if status, err := call(ctx, tr, upstreamURL); status != 200 || err != nil {
			t.Fatalf("probe call: %d %v", status, err)
		}
		requireLines(t, "recovered", scrape(t, h),
			`breakwater_breaker_state{key="http://upstream.test"} 0`,
			`breakwater_breaker_open_seconds{key="http://upstream.test"} 0`)
	})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	want := `
# HELP breakwater_attempts_total Outbound attempts handed to the base transport, by the category of their outcome.
# TYPE breakwater_attempts_total counter
breakwater_attempts_total{category="server_error",key="http://upstream.test"} 6
breakwater_attempts_total{category="success",key="http://upstream.test"} 1
# HELP breakwater_breaker_open_seconds Seconds since the circuit breaker last left the closed state; 0 while closed.
# TYPE breakwater_breaker_open_seconds gauge
breakwater_breaker_open_seconds{key="http://upstream.test"} 0
# HELP breakwater_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE breakwater_breaker_state gauge
breakwater_breaker_state{key="http://upstream.test"} 0
# HELP breakwater_breaker_transitions_total Circuit breaker state changes.
# TYPE breakwater_breaker_transitions_total counter
breakwater_breaker_transitions_total{from="closed",key="http://upstream.test",reason="failures",to="open"} 1
breakwater_breaker_transitions_total{from="half_open",key="http://upstream.test",reason="probes_succeeded",to="closed"} 1
breakwater_breaker_transitions_total{from="open",key="http://upstream.test",reason="open_elapsed",to="half_open"} 1
# HELP breakwater_calls_total Outbound calls that ended, by the category of their outcome.
# TYPE breakwater_calls_total counter
breakwater_calls_total{category="rejected",key="http://upstream.test"} 1
breakwater_calls_total{category="server_error",key="http://upstream.test"} 2
breakwater_calls_total{category="success",key="http://upstream.test"} 1
# HELP breakwater_in_flight Outbound calls started and not yet ended (inside RoundTrip).
# TYPE breakwater_in_flight gauge
breakwater_in_flight{key="http://upstream.test"} 0
# HELP breakwater_rejections_total Work refused by a breakwater mechanism.
# TYPE breakwater_rejections_total counter
breakwater_rejections_total{key="http://upstream.test",mechanism="breaker"} 1
# HELP breakwater_retries_total Retries decided, by the category of the attempt that failed.
# TYPE breakwater_retries_total counter
breakwater_retries_total{category="server_error",key="http://upstream.test"} 4
# HELP breakwater_retry_budget_exhausted_total Retries refused because the key's retry budget was spent.
# TYPE breakwater_retry_budget_exhausted_total counter
breakwater_retry_budget_exhausted_total{key="http://upstream.test"} 0
`
	names := []string{prom.MetricAttempts, prom.MetricBreakerOpenSeconds, prom.MetricBreakerState, prom.MetricBreakerTransitions,
		prom.MetricCalls, prom.MetricInFlight, prom.MetricRejections, prom.MetricRetries, prom.MetricRetryBudgetExhausted}
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	srv.Client().CloseIdleConnections()
	if err != nil {
		t.Fatal(err)
	}
	requireLines(t, "histograms", string(body),
		`breakwater_call_duration_seconds_count{category="server_error",key="http://upstream.test"} 2`,
		`breakwater_call_duration_seconds_count{category="rejected",key="http://upstream.test"} 1`,
		`breakwater_attempt_duration_seconds_count{category="server_error",key="http://upstream.test"} 6`)
	if got := gather(t, reg).sum(prom.MetricCalls, "key", upstreamKey); got != 4 {
		t.Fatalf("calls %v, want 4", got)
	}
}
