package prom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// exercise feeds c the events of exerciseEvents.
func exercise(c *prom.Collector) {
	ctx := context.Background()
	for _, e := range exerciseEvents() {
		c.Observe(ctx, e)
	}
}

// exerciseEvents returns events of every kind, so that every metric family
// has at least one series: a call to api.test that fails, retries, waits,
// is refused a retry and opens the breaker; a call to pool.test over
// failover endpoints that a hedge answers while an endpoint is ejected; an
// inbound request, a shed and a deployment warning. Each transport key makes
// one call.
func exerciseEvents() []bw.Event {
	now := time.Now()
	return []bw.Event{
		{Kind: bw.EventCallStart, Key: "api.test", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "api.test", Attempt: 1, Category: bw.ServerError, Status: 503, Duration: 20 * time.Millisecond},
		{Kind: bw.EventRetry, Key: "api.test", Attempt: 1, Category: bw.ServerError, Status: 503, Delay: 50 * time.Millisecond},
		{Kind: bw.EventWait, Key: "api.test", Mechanism: bw.MechRateLimit, Duration: 30 * time.Millisecond},
		{Kind: bw.EventAttempt, Key: "api.test", Attempt: 2, Category: bw.ServerError, Status: 503, Duration: 20 * time.Millisecond},
		{Kind: bw.EventReject, Key: "api.test", Attempt: 2, Mechanism: bw.MechRetryBudget, Err: bw.ErrRetryBudget},
		{Kind: bw.EventTransition, Key: "api.test", Transition: &bw.Transition{Key: "api.test", From: bw.StateClosed, To: bw.StateOpen, Reason: bw.ReasonFailures, OpenFor: 5 * time.Second, At: now}},
		{Kind: bw.EventCallEnd, Key: "api.test", Attempts: 2, Category: bw.ServerError, Status: 503, Duration: 120 * time.Millisecond},
		{Kind: bw.EventReject, Key: "api.test", Mechanism: bw.MechBreaker, Err: bw.ErrCircuitOpen},
		{Kind: bw.EventCallStart, Key: "pool.test", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "pool.test", Attempt: 1, Category: bw.NetworkError, Duration: 2 * time.Millisecond, Endpoint: "http://a.pool.test"},
		{Kind: bw.EventHealth, Key: "pool.test", Endpoint: "http://a.pool.test", Health: bw.HealthEjected, Reason: bw.ReasonFailures},
		{Kind: bw.EventRetry, Key: "pool.test", Attempt: 1, Category: bw.NetworkError, Endpoint: "http://a.pool.test"},
		{Kind: bw.EventHedge, Key: "pool.test", Attempt: 3, Delay: 20 * time.Millisecond, Hedge: true, Endpoint: "http://c.pool.test"},
		{Kind: bw.EventAttempt, Key: "pool.test", Attempt: 2, Category: bw.Timeout, Duration: 40 * time.Millisecond, Endpoint: "http://b.pool.test"},
		{Kind: bw.EventAttempt, Key: "pool.test", Attempt: 3, Category: bw.Success, Status: 200, Duration: 15 * time.Millisecond, Hedge: true, Endpoint: "http://c.pool.test"},
		{Kind: bw.EventCallEnd, Key: "pool.test", Attempt: 3, Attempts: 3, Retries: 1, Category: bw.Success, Status: 200, Duration: 60 * time.Millisecond, Hedge: true, Endpoint: "http://c.pool.test"},
		{Kind: bw.EventRequest, Route: "/items/{id}", Method: "GET", Status: 200, Category: bw.Success, Duration: 3 * time.Millisecond},
		{Kind: bw.EventReject, Key: "/items/{id}", Route: "/items/{id}", Method: "GET", Status: 503, Mechanism: bw.MechShed, Err: bw.ErrCallerDeadline, Criticality: bw.Sheddable},
		{Kind: bw.EventRequest, Route: "/items/{id}", Method: "GET", Status: 503, Category: bw.Rejected, Reason: bw.ReasonPushback, Criticality: bw.Sheddable},
		{Kind: bw.EventWarning, Mechanism: bw.MechShed, Err: errors.New("shedder behind a server without ReadTimeout")},
		{Kind: bw.EventRetrySkipped, Key: "api.test", Method: "POST", Attempt: 1, Category: bw.ServerError, Status: 503, Reason: bw.ReasonNotIdempotent},
		{Kind: bw.EventHedgeSkipped, Key: "pool.test", Method: "POST", Reason: bw.ReasonNotIdempotent},
	}
}

func TestPedanticRegistryAcceptsCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	exercise(c)
	got := gather(t, reg)
	if len(got) == 0 {
		t.Fatal("nothing gathered")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestNewNeverTouchesTheDefaultRegistry(t *testing.T) {
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	exercise(c)
	if _, err := prom.New(nil); err != nil {
		t.Fatal(err)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "breakwater_") {
			t.Errorf("%s is on the default registry", mf.GetName())
		}
	}
}

func TestNilRegistererRegistersNothing(t *testing.T) {
	c, err := prom.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	exercise(c)
	if n, err := testutil.GatherAndCount(reg, prom.MetricCalls); err != nil || n != 2 { // one per key
		t.Fatalf("calls series: %d, %v", n, err)
	}
}

func TestSecondCollectorNeedsDistinctLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := prom.New(reg); err != nil {
		t.Fatal(err)
	}
	_, err := prom.New(reg)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second New on one registry: %v, want AlreadyRegisteredError", err)
	}

	reg = prometheus.NewPedanticRegistry()
	var cs []*prom.Collector
	for _, client := range []string{"billing", "search"} {
		c, err := prom.New(prometheus.WrapRegistererWith(prometheus.Labels{"client": client}, reg))
		if err != nil {
			t.Fatalf("wrapped registerer %s: %v", client, err)
		}
		cs = append(cs, c)
	}
	exercise(cs[0])
	exercise(cs[0])
	exercise(cs[1])
	got := gather(t, reg)
	if b, s := got.sum(prom.MetricCalls, "client", "billing", "key", "api.test"), got.sum(prom.MetricCalls, "client", "search", "key", "api.test"); b != 2 || s != 1 {
		t.Fatalf("api.test calls: billing %v, search %v; want 2, 1", b, s)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opt  prom.Option
		want string
	}{
		{"zero keys", prom.WithMaxKeys(0), "max keys"},
		{"zero routes", prom.WithMaxRoutes(0), "max routes"},
		{"no buckets", prom.WithDurationBuckets(), "must not be empty"},
		{"unsorted buckets", prom.WithDurationBuckets(1, 0.5), "strictly increasing"},
		{"negative bucket", prom.WithDurationBuckets(-1, 1), "positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c, err := prom.New(reg, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error about %q", err, tc.want)
			}
			if c != nil {
				t.Fatal("a Collector came with the error")
			}
			if n, _ := testutil.GatherAndCount(reg); n != 0 {
				t.Fatal("a rejected Collector was registered")
			}
		})
	}
	if _, err := prom.New(prometheus.NewRegistry(), prom.WithDurationBuckets(0.1, 1, 10)); err != nil {
		t.Fatalf("valid buckets: %v", err)
	}
}

func TestCustomBuckets(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithDurationBuckets(0.1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
		c.Observe(context.Background(), bw.Event{Kind: bw.EventAttempt, Key: "k", Duration: d})
	}
	want := `
# HELP breakwater_attempt_duration_seconds Duration of outbound attempts until their response headers or error.
# TYPE breakwater_attempt_duration_seconds histogram
breakwater_attempt_duration_seconds_bucket{category="success",key="k",le="0.1"} 2
breakwater_attempt_duration_seconds_bucket{category="success",key="k",le="1"} 3
breakwater_attempt_duration_seconds_bucket{category="success",key="k",le="+Inf"} 4
breakwater_attempt_duration_seconds_sum{category="success",key="k"} 2.65
breakwater_attempt_duration_seconds_count{category="success",key="k"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), prom.MetricAttemptDuration); err != nil {
		t.Fatal(err)
	}
}

// TestOddEventsDoNotBreakScrapes feeds events no transport sends: unknown
// kinds, categories and mechanisms, empty and invalid keys, negative
// durations, impossible statuses. Nothing panics, and the registry still
// gathers with every label inside its bounded set.
func TestOddEventsDoNotBreakScrapes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithKeyLabel(func(k string) string {
		if k == "boom" {
			panic("mapping bug")
		}
		return k
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("é", 200)
	for _, e := range []bw.Event{
		{},
		{Kind: 0xff, Key: "k"},
		{Kind: bw.EventAttempt, Key: "", Category: 200, Duration: -time.Second},
		{Kind: bw.EventCallEnd, Key: "\xff\xfe", Category: 42, Duration: -1},
		{Kind: bw.EventCallEnd, Key: "never-started"},
		{Kind: bw.EventRetry, Key: long, Category: 99},
		{Kind: bw.EventReject, Key: "k", Mechanism: "made-up"},
		{Kind: bw.EventReject, Key: "k"},
		{Kind: bw.EventWait, Key: "k", Mechanism: "", Duration: time.Duration(1 << 62)},
		{Kind: bw.EventTransition},
		{Kind: bw.EventTransition, Key: "k", Transition: &bw.Transition{From: 7, To: 9, Reason: "cosmic rays"}},
		{Kind: bw.EventTransition, Key: "k", Transition: &bw.Transition{From: bw.StateOpen, To: bw.StateClosed, Reason: bw.ReasonReset}},
		{Kind: bw.EventRequest, Route: "", Method: "BREW", Status: 999, Category: 77, Duration: -5},
		{Kind: bw.EventRequest, Route: "/x", Method: "get", Status: 0},
		{Kind: bw.EventAttempt, Key: "boom"},
	} {
		c.Observe(ctx, e)
	}
	var nilCollector *prom.Collector
	nilCollector.Observe(ctx, bw.Event{Kind: bw.EventCallStart, Key: "k"})

	got := gather(t, reg)
	bounded := map[string]map[string]bool{
		"category":     setOf(append(categoryNames(), "unknown")...),
		"mechanism":    setOf("breaker", "rate_limit", "pause", "concurrency", "retry_budget", "shed", "timeout", "route_breaker", "other"),
		"from":         setOf("closed", "half_open", "open", "unknown"),
		"to":           setOf("closed", "half_open", "open", "unknown"),
		"reason":       setOf("failures", "probe_failed", "open_elapsed", "probes_succeeded", "trip", "reset", "recovery_signal", "other"),
		"method":       setOf("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "other"),
		"status_class": setOf("1xx", "2xx", "3xx", "4xx", "5xx", "other"),
	}
	for label, allowed := range bounded {
		for v := range got.values(label) {
			if !allowed[v] {
				t.Errorf("label %s has value %q outside its set", label, v)
			}
		}
	}
	for v := range got.values("key") {
		if len(v) > prom.MaxLabelLen {
			t.Errorf("key label of %d bytes", len(v))
		}
	}
	keys := got.values("key")
	for _, want := range []string{prom.NoneLabel, "\ufffd", prom.OtherLabel} {
		if !keys[want] {
			t.Errorf("no key label %q among %v", want, keys)
		}
	}
	if v := got[`breakwater_in_flight{key="never-started"}`]; v != 0 {
		t.Errorf("in flight after an end without a start: %v, want 0", v)
	}
	if v := got.sum(prom.MetricAttemptDuration+"_sum", "key", prom.NoneLabel); v != 0 {
		t.Errorf("a negative duration summed to %v, want 0", v)
	}
	if v := got.sum(prom.MetricInboundRequests, "method", "GET", "status_class", "other"); v != 1 {
		t.Errorf("lower-case get with status 0: %v, want 1 under GET/other", v)
	}
	if v := got.sum(prom.MetricBreakerState, "key", "k"); v != 0 {
		t.Errorf("state after open→closed with no opening seen: %v, want 0", v)
	}
}

func setOf(vs ...string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func categoryNames() []string {
	var out []string
	for _, c := range bw.Categories() {
		out = append(out, c.String())
	}
	return out
}

// TestBreakerGauges follows one breaker through its transitions on the
// bubble's clock: the state, the open seconds computed at scrape time, the
// lapsed open state read as half-open, and the transition counts.
func TestBreakerGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		tr := func(from, to bw.State, r bw.Reason, openFor time.Duration) {
			c.Observe(context.Background(), bw.Event{Kind: bw.EventTransition, Key: "k",
				Transition: &bw.Transition{Key: "k", From: from, To: to, Reason: r, OpenFor: openFor, At: time.Now()}})
		}
		check := func(step string, state, open float64) {
			t.Helper()
			got := gather(t, reg)
			if s, o := got[`breakwater_breaker_state{key="k"}`], got[`breakwater_breaker_open_seconds{key="k"}`]; s != state || o != open {
				t.Errorf("%s: state %v, open seconds %v; want %v, %v", step, s, o, state, open)
			}
		}
		c.Observe(context.Background(), bw.Event{Kind: bw.EventCallStart, Key: "k"})
		check("first seen", 0, 0)
		tr(bw.StateClosed, bw.StateOpen, bw.ReasonFailures, 5*time.Second)
		time.Sleep(3 * time.Second)
		check("open 3s", 2, 3)
		time.Sleep(3 * time.Second)
		check("open duration elapsed, no admission yet", 1, 6)
		tr(bw.StateOpen, bw.StateHalfOpen, bw.ReasonOpenElapsed, 0)
		time.Sleep(time.Second)
		tr(bw.StateHalfOpen, bw.StateOpen, bw.ReasonProbeFailed, 10*time.Second)
		time.Sleep(4 * time.Second)
		check("reopened", 2, 11)
		time.Sleep(20 * time.Second)
		tr(bw.StateOpen, bw.StateHalfOpen, bw.ReasonOpenElapsed, 0)
		check("half-open again", 1, 31)
		tr(bw.StateHalfOpen, bw.StateClosed, bw.ReasonProbesSucceeded, 0)
		check("closed", 0, 0)
		want := `
# HELP breakwater_breaker_transitions_total Circuit breaker state changes.
# TYPE breakwater_breaker_transitions_total counter
breakwater_breaker_transitions_total{from="closed",key="k",reason="failures",to="open"} 1
breakwater_breaker_transitions_total{from="half_open",key="k",reason="probe_failed",to="open"} 1
breakwater_breaker_transitions_total{from="half_open",key="k",reason="probes_succeeded",to="closed"} 1
breakwater_breaker_transitions_total{from="open",key="k",reason="open_elapsed",to="half_open"} 2
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), prom.MetricBreakerTransitions); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSharedKeyLabelShowsTheWorstBreaker maps two keys to one label: the
// gauge shows the worst state, and open seconds count from the first
// opening until both are closed.
func TestSharedKeyLabelShowsTheWorstBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg, prom.WithKeyLabel(func(string) string { return "payments" }))
		if err != nil {
			t.Fatal(err)
		}
		tr := func(key string, from, to bw.State) {
			c.Observe(context.Background(), bw.Event{Kind: bw.EventTransition, Key: key,
				Transition: &bw.Transition{Key: key, From: from, To: to, Reason: bw.ReasonTrip, OpenFor: time.Hour, At: time.Now()}})
		}
		read := func() (float64, float64) {
			got := gather(t, reg)
			return got[`breakwater_breaker_state{key="payments"}`], got[`breakwater_breaker_open_seconds{key="payments"}`]
		}
		tr("a", bw.StateClosed, bw.StateHalfOpen)
		time.Sleep(time.Second)
		tr("b", bw.StateClosed, bw.StateOpen)
		time.Sleep(time.Second)
		if s, o := read(); s != 2 || o != 2 {
			t.Fatalf("one half-open, one open: state %v, open seconds %v; want 2, 2", s, o)
		}
		tr("b", bw.StateOpen, bw.StateClosed)
		if s, o := read(); s != 1 || o != 2 {
			t.Fatalf("one half-open: state %v, open seconds %v; want 1, 2", s, o)
		}
		tr("a", bw.StateHalfOpen, bw.StateClosed)
		if s, o := read(); s != 0 || o != 0 {
			t.Fatalf("all closed: state %v, open seconds %v; want 0, 0", s, o)
		}
	})
}

func TestKeyLabelMapping(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithKeyLabel(func(key string) string {
		host, _, _ := strings.Cut(key, ".")
		return strings.TrimRight(host, "0123456789")
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		c.Observe(context.Background(), bw.Event{Kind: bw.EventCallEnd, Key: fmt.Sprintf("search%d.internal", i)})
		c.Observe(context.Background(), bw.Event{Kind: bw.EventCallEnd, Key: fmt.Sprintf("billing%d.internal", i)})
	}
	got := gather(t, reg)
	if keys := got.values("key"); len(keys) != 2 || !keys["search"] || !keys["billing"] {
		t.Fatalf("key labels %v, want search and billing", keys)
	}
	if v := got.sum(prom.MetricCalls, "key", "search"); v != 50 {
		t.Fatalf("search calls %v, want 50", v)
	}
}

// TestConcurrentObserveAndCollect hammers one collector from many
// goroutines while scraping; run with -race.
func TestConcurrentObserveAndCollect(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg, prom.WithMaxKeys(8), prom.WithMaxRoutes(4))
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range rounds {
				key := fmt.Sprintf("h%d", (w*rounds+i)%32)
				c.Observe(ctx, bw.Event{Kind: bw.EventCallStart, Key: key})
				c.Observe(ctx, bw.Event{Kind: bw.EventAttempt, Key: key, Category: bw.Category(i % 12), Duration: time.Millisecond})
				c.Observe(ctx, bw.Event{Kind: bw.EventRetry, Key: key})
				c.Observe(ctx, bw.Event{Kind: bw.EventReject, Key: key, Mechanism: bw.MechBreaker})
				c.Observe(ctx, bw.Event{Kind: bw.EventTransition, Key: key, Transition: &bw.Transition{Key: key, From: bw.StateClosed, To: bw.StateOpen, At: time.Now()}})
				c.Observe(ctx, bw.Event{Kind: bw.EventTransition, Key: key, Transition: &bw.Transition{Key: key, From: bw.StateOpen, To: bw.StateClosed, At: time.Now()}})
				c.Observe(ctx, bw.Event{Kind: bw.EventRequest, Route: fmt.Sprintf("/r%d", i%16), Method: "POST", Status: 201})
				c.Observe(ctx, bw.Event{Kind: bw.EventCallEnd, Key: key, Duration: time.Millisecond})
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	got := gather(t, reg)
	if v := got.sum(prom.MetricCalls); v != workers*rounds {
		t.Fatalf("calls %v, want %d", v, workers*rounds)
	}
	if v := got.sum(prom.MetricInFlight); v != 0 {
		t.Fatalf("in flight %v after every call ended", v)
	}
	if v := got.sum(prom.MetricBreakerState); v != 0 {
		t.Fatalf("breaker state %v after every breaker closed", v)
	}
	if n := len(got.values("key")); n > 9 {
		t.Fatalf("%d key labels with a cap of 8", n)
	}
	if n := len(got.values("route")); n > 5 {
		t.Fatalf("%d route labels with a cap of 4", n)
	}
}

// TestCountsBesidePanickingObserver attaches the collector next to an
// observer that panics on every event: calls go through and the collector
// still sees every event.
func TestCountsBesidePanickingObserver(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	boom := bw.ObserverFunc(func(context.Context, bw.Event) { panic("observer bug") })
	tr := newTransport(t, cannedOK{}, bw.WithObserver(boom), bw.WithObserver(c), bw.WithObserver(boom))
	for range 5 {
		if status, err := call(context.Background(), tr, "https://api.example.com/"); status != 200 || err != nil {
			t.Fatalf("call: %d %v", status, err)
		}
	}
	got := gather(t, reg)
	if v := got[`breakwater_calls_total{category="success",key="api.example.com"}`]; v != 5 {
		t.Fatalf("calls %v, want 5", v)
	}
	if v := got[`breakwater_in_flight{key="api.example.com"}`]; v != 0 {
		t.Fatalf("in flight %v, want 0", v)
	}
}
