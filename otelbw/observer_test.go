package otelbw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/otelbw"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// exercise feeds o one event of every kind, so that every instrument has
// at least one data point.
func exercise(o bw.Observer) {
	ctx := context.Background()
	for _, e := range []bw.Event{
		{Kind: bw.EventCallStart, Key: "api.test", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "api.test", Attempt: 1, Category: bw.ServerError, Status: 503, Duration: 20 * time.Millisecond},
		{Kind: bw.EventRetry, Key: "api.test", Attempt: 1, Category: bw.ServerError, Status: 503, Delay: 50 * time.Millisecond},
		{Kind: bw.EventWait, Key: "api.test", Mechanism: bw.MechRateLimit, Duration: 30 * time.Millisecond},
		{Kind: bw.EventAttempt, Key: "api.test", Attempt: 2, Category: bw.ServerError, Status: 503, Duration: 20 * time.Millisecond},
		{Kind: bw.EventReject, Key: "api.test", Attempt: 2, Mechanism: bw.MechRetryBudget, Err: bw.ErrRetryBudget},
		{Kind: bw.EventTransition, Key: "api.test", Transition: &bw.Transition{Key: "api.test", From: bw.StateClosed, To: bw.StateOpen, Reason: bw.ReasonFailures, OpenFor: 5 * time.Second, At: time.Now()}},
		{Kind: bw.EventCallEnd, Key: "api.test", Attempts: 2, Category: bw.ServerError, Status: 503, Duration: 120 * time.Millisecond},
		{Kind: bw.EventReject, Key: "api.test", Mechanism: bw.MechBreaker, Err: bw.ErrCircuitOpen},
		{Kind: bw.EventRequest, Route: "/items/{id}", Method: "GET", Status: 200, Category: bw.Success, Duration: 3 * time.Millisecond},
		{Kind: bw.EventReject, Key: "/items/{id}", Route: "/items/{id}", Mechanism: bw.MechShed, Err: bw.ErrCallerDeadline, Criticality: bw.Critical},
		{Kind: bw.EventRequest, Route: "/items/{id}", Method: "GET", Status: 503, Category: bw.Rejected, Reason: bw.ReasonPushback, Criticality: bw.Critical},
		{Kind: bw.EventRetrySkipped, Key: "api.test", Attempt: 1, Category: bw.ServerError, Status: 503, Reason: bw.ReasonPushback},
		{Kind: bw.EventHedgeSkipped, Key: "api.test", Reason: bw.ReasonNotIdempotent},
		{Kind: bw.EventCallStart, Key: "svc.test", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "svc.test", Attempt: 1, Category: bw.ServerError, Status: 500, Duration: 10 * time.Millisecond, Endpoint: "http://a.test"},
		{Kind: bw.EventHealth, Key: "svc.test", Endpoint: "http://a.test", Health: bw.HealthEjected, Reason: bw.ReasonFailures},
		{Kind: bw.EventHedge, Key: "svc.test", Attempt: 2, Delay: 20 * time.Millisecond, Hedge: true, Endpoint: "http://b.test"},
		{Kind: bw.EventAttempt, Key: "svc.test", Attempt: 2, Category: bw.Success, Status: 200, Duration: 5 * time.Millisecond, Hedge: true, Endpoint: "http://b.test"},
		{Kind: bw.EventCallEnd, Key: "svc.test", Attempts: 2, Attempt: 2, Category: bw.Success, Status: 200, Duration: 25 * time.Millisecond, Hedge: true, Endpoint: "http://b.test"},
	} {
		o.Observe(ctx, e)
	}
}

// TestInstrumentsFollowConventions checks every instrument's kind, unit and
// attribute keys against the package documentation: dotted names in the
// breakwater namespace, seconds for durations, {annotations} for counts,
// non-monotonic sums for what goes up and down.
func TestInstrumentsFollowConventions(t *testing.T) {
	s := newSDK(t)
	exercise(s.obs)
	s.obs.Watch(exerciseSource{})
	type spec struct {
		unit  string
		kind  string // histogram, counter, updown, gauge
		attrs []string
	}
	want := map[string]spec{
		otelbw.MetricCallDuration:           {"s", "histogram", []string{"breakwater.category", "breakwater.key"}},
		otelbw.MetricAttemptDuration:        {"s", "histogram", []string{"breakwater.category", "breakwater.key"}},
		otelbw.MetricRetries:                {"{retry}", "counter", []string{"breakwater.category", "breakwater.key"}},
		otelbw.MetricRejections:             {"{rejection}", "counter", []string{"breakwater.key", "breakwater.mechanism"}},
		otelbw.MetricWaitDuration:           {"s", "histogram", []string{"breakwater.key", "breakwater.mechanism"}},
		otelbw.MetricCallActive:             {"{call}", "updown", []string{"breakwater.key"}},
		otelbw.MetricBreakerStatus:          {"1", "updown", []string{"breakwater.breaker.state", "breakwater.key"}},
		otelbw.MetricBreakerOpenTime:        {"s", "gauge", []string{"breakwater.key"}},
		otelbw.MetricBreakerTransitions:     {"{transition}", "counter", []string{"breakwater.breaker.from", "breakwater.breaker.reason", "breakwater.breaker.to", "breakwater.key"}},
		otelbw.MetricInboundRequests:        {"{request}", "counter", []string{"breakwater.category", "http.request.method", "http.response.status_code", "http.route"}},
		otelbw.MetricInboundRequestDuration: {"s", "histogram", []string{"http.route"}},
		otelbw.MetricHedges:                 {"{hedge}", "counter", []string{"breakwater.key"}},
		otelbw.MetricHedgeWins:              {"{call}", "counter", []string{"breakwater.key"}},
		otelbw.MetricEndpointAttempts:       {"{attempt}", "counter", []string{"breakwater.category", "breakwater.endpoint", "breakwater.key"}},
		otelbw.MetricEndpointEjected:        {"{endpoint}", "updown", []string{"breakwater.endpoint", "breakwater.key"}},
		otelbw.MetricEndpointEjections:      {"{ejection}", "counter", []string{"breakwater.endpoint", "breakwater.endpoint.reason", "breakwater.key"}},
		otelbw.MetricPaceRate:               {"{request}/s", "gauge", []string{"breakwater.key"}},
		otelbw.MetricBreakerProbes:          {"{probe}", "gauge", []string{"breakwater.key"}},
		otelbw.MetricInboundSheds:           {"{request}", "counter", []string{"breakwater.criticality", "breakwater.shed.reason", "http.route"}},
		otelbw.MetricInboundPushback:        {"{response}", "counter", []string{"breakwater.pushback", "http.route"}},
		otelbw.MetricRetriesSkipped:         {"{retry}", "counter", []string{"breakwater.key", "breakwater.skip.reason"}},
		otelbw.MetricHedgesSkipped:          {"{call}", "counter", []string{"breakwater.key", "breakwater.skip.reason"}},
	}
	seen := map[string]bool{}
	for _, m := range s.collect(t) {
		w, ok := want[m.Name]
		if !ok {
			t.Errorf("undocumented instrument %s", m.Name)
			continue
		}
		seen[m.Name] = true
		if !strings.HasPrefix(m.Name, "breakwater.") || strings.Contains(m.Name, "total") || m.Description == "" {
			t.Errorf("%s: name or description against the conventions (%q)", m.Name, m.Description)
		}
		if m.Unit != w.unit {
			t.Errorf("%s: unit %q, want %q", m.Name, m.Unit, w.unit)
		}
		var kind string
		var keys [][]string
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			kind = "histogram"
			for _, p := range d.DataPoints {
				keys = append(keys, attrKeys(p.Attributes.ToSlice()))
				if len(p.Bounds) != 12 || p.Bounds[0] != 0.005 || p.Bounds[11] != 30 {
					t.Errorf("%s: bounds %v, want the prom package's 5 ms to 30 s", m.Name, p.Bounds)
				}
			}
		case metricdata.Sum[int64]:
			kind = "updown"
			if d.IsMonotonic {
				kind = "counter"
			}
			for _, p := range d.DataPoints {
				keys = append(keys, attrKeys(p.Attributes.ToSlice()))
			}
		case metricdata.Gauge[float64]:
			kind = "gauge"
			for _, p := range d.DataPoints {
				keys = append(keys, attrKeys(p.Attributes.ToSlice()))
			}
		case metricdata.Gauge[int64]:
			kind = "gauge"
			for _, p := range d.DataPoints {
				keys = append(keys, attrKeys(p.Attributes.ToSlice()))
			}
		default:
			t.Errorf("%s: aggregation %T", m.Name, m.Data)
		}
		if kind != w.kind {
			t.Errorf("%s: %s, want %s", m.Name, kind, w.kind)
		}
		for _, k := range keys {
			if !slices.Equal(k, w.attrs) {
				t.Errorf("%s: attributes %v, want %v", m.Name, k, w.attrs)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no data for %s", name)
		}
	}
}

func attrKeys(kvs []attribute.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	slices.Sort(out)
	return out
}

// TestMetricsAfterOutage plays the prom package's outage on the bubble's
// clock (two calls fail every attempt and open the breaker, a third is
// rejected, the breaker recovers through one probe) and checks the
// instruments' values, the breaker gauges at three instants included.
func TestMetricsAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport(), bw.WithObserver(s.obs), bw.WithoutRetryBudget(),
			bw.WithPolicy(bw.Consecutive(2)), bw.WithHalfOpen(1, 1), bw.WithOpenJitter(0),
			bw.WithOpenTimeout(5*time.Second, time.Minute))
		ctx := context.Background()
		const key = `breakwater.key="http://upstream.test"`
		gauges := func(step string, state string, open float64) {
			t.Helper()
			got := s.series(t)
			for _, st := range []string{"closed", "half_open", "open"} {
				want := 0.0
				if st == state {
					want = 1
				}
				id := fmt.Sprintf(`breakwater.breaker.status{breakwater.breaker.state=%q,%s}`, st, key)
				if v, ok := got[id]; !ok || v != want {
					t.Errorf("%s: %s = %v (present %v), want %v", step, id, v, ok, want)
				}
			}
			if v := got["breakwater.breaker.open_time{"+key+"}"]; v != open {
				t.Errorf("%s: open time %v, want %v", step, v, open)
			}
		}

		for i := 1; i <= 2; i++ {
			if status, err := call(ctx, tr, "http://upstream.test/"); status != 503 || err != nil {
				t.Fatalf("call %d: %d %v, want the 503 after 3 attempts", i, status, err)
			}
		}
		if _, err := call(ctx, tr, "http://upstream.test/"); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Fatalf("call 3: %v, want ErrCircuitOpen", err)
		}
		time.Sleep(2 * time.Second)
		gauges("open for 2s", "open", 2)
		time.Sleep(time.Minute) // the 5 s open duration has long elapsed
		gauges("open duration elapsed", "half_open", 62)

		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{}))
		if status, err := call(ctx, tr, "http://upstream.test/"); status != 200 || err != nil {
			t.Fatalf("probe call: %d %v", status, err)
		}
		gauges("recovered", "closed", 0)

		got := s.series(t)
		for id, want := range map[string]float64{
			`breakwater.attempt.duration_count{breakwater.category="server_error",` + key + `}`:                                                                           6,
			`breakwater.attempt.duration_count{breakwater.category="success",` + key + `}`:                                                                                1,
			`breakwater.call.duration_count{breakwater.category="rejected",` + key + `}`:                                                                                  1,
			`breakwater.call.duration_count{breakwater.category="server_error",` + key + `}`:                                                                              2,
			`breakwater.call.duration_count{breakwater.category="success",` + key + `}`:                                                                                   1,
			`breakwater.call.active{` + key + `}`:                                                                                                                         0,
			`breakwater.rejections{` + key + `,breakwater.mechanism="breaker"}`:                                                                                           1,
			`breakwater.retries{breakwater.category="server_error",` + key + `}`:                                                                                          4,
			`breakwater.breaker.transitions{breakwater.breaker.from="closed",breakwater.breaker.reason="failures",breakwater.breaker.to="open",` + key + `}`:              1,
			`breakwater.breaker.transitions{breakwater.breaker.from="open",breakwater.breaker.reason="open_elapsed",breakwater.breaker.to="half_open",` + key + `}`:       1,
			`breakwater.breaker.transitions{breakwater.breaker.from="half_open",breakwater.breaker.reason="probes_succeeded",breakwater.breaker.to="closed",` + key + `}`: 1,
		} {
			if v, ok := got[id]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", id, v, ok, want)
			}
		}
		if n := got.sum("breakwater.rejections"); n != 1 {
			t.Errorf("rejections %v, want 1", n)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	o, err := otelbw.New(otelbw.WithMeterProvider(noop.NewMeterProvider()), otelbw.WithMaxKeys(0), otelbw.WithMaxRoutes(-1))
	if o != nil || err == nil || !strings.Contains(err.Error(), "max keys") || !strings.Contains(err.Error(), "max routes") {
		t.Fatalf("New: %v, %v; want both errors and no Observer", o, err)
	}
	if _, err := otelbw.New(nil, otelbw.WithMeterProvider(noop.NewMeterProvider())); err != nil {
		t.Fatalf("a nil option: %v", err)
	}
}

// TestNewUsesTheGlobalProvider checks the default: the global provider,
// which forwards to an SDK installed after New.
func TestNewUsesTheGlobalProvider(t *testing.T) {
	before := otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetMeterProvider(before) })
	o, err := otelbw.New()
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	otel.SetMeterProvider(mp)
	exercise(o)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Name != otelbw.ScopeName || len(rm.ScopeMetrics[0].Metrics) == 0 {
		t.Fatalf("the global provider got %+v", rm.ScopeMetrics)
	}
}

// TestOddEventsDoNotBreakCollection feeds events no transport sends:
// unknown kinds, categories, mechanisms, states and reasons, empty and
// invalid keys, negative durations, impossible statuses, a panicking key
// mapping. Nothing panics, and every attribute stays in its bounded set.
func TestOddEventsDoNotBreakCollection(t *testing.T) {
	s := newSDK(t, otelbw.WithKeyValue(func(k string) string {
		if k == "boom" {
			panic("mapping bug")
		}
		return k
	}))
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
		{Kind: bw.EventHedge, Key: ""},
		{Kind: bw.EventAttempt, Key: "k", Endpoint: "\xff" + long},
		{Kind: bw.EventHealth, Key: "k", Endpoint: "e", Health: bw.HealthEjected, Reason: "cosmic rays"},
		{Kind: bw.EventHealth, Key: "k", Endpoint: "e", Health: "unheard of"},
		{Kind: bw.EventCallEnd, Key: "k", Attempt: 3, Attempts: 1, Hedge: true},
	} {
		s.obs.Observe(ctx, e)
	}
	var nilObserver *otelbw.Observer
	nilObserver.Observe(ctx, bw.Event{Kind: bw.EventCallStart, Key: "k"})

	got := s.series(t)
	var categories []string
	for _, c := range bw.Categories() {
		categories = append(categories, c.String())
	}
	bounded := map[string][]string{
		"breakwater.category":        append(categories, "unknown"),
		"breakwater.mechanism":       {"breaker", "rate_limit", "pause", "concurrency", "retry_budget", "shed", "timeout", "route_breaker", "other"},
		"breakwater.breaker.from":    {"closed", "half_open", "open", "unknown"},
		"breakwater.breaker.to":      {"closed", "half_open", "open", "unknown"},
		"breakwater.breaker.state":   {"closed", "half_open", "open"},
		"breakwater.breaker.reason":  {"failures", "probe_failed", "open_elapsed", "probes_succeeded", "trip", "reset", "recovery_signal", "other"},
		"http.request.method":        {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "_OTHER"},
		"breakwater.endpoint.reason": {"failures", "outlier", "probe_failed", "other"},
	}
	names := map[string]bool{}
	for id := range got {
		n, _, _ := strings.Cut(id, "{")
		names[n] = true
	}
	for key, allowed := range bounded {
		for n := range names {
			for v := range got.values(n, key) {
				if !slices.Contains(allowed, v) {
					t.Errorf("%s: attribute %s has value %q outside its set", n, key, v)
				}
			}
		}
	}
	keys := map[string]bool{}
	for n := range names {
		for v := range got.values(n, "breakwater.key") {
			keys[v] = true
			if len(v) > 128 {
				t.Errorf("a key value of %d bytes", len(v))
			}
		}
	}
	for _, want := range []string{"none", "\ufffd", "other"} {
		if !keys[want] {
			t.Errorf("no key value %q among %v", want, keys)
		}
	}
	if v := got.sum("breakwater.attempt.duration_sum", "breakwater.key", "none"); v != 0 {
		t.Errorf("a negative duration summed to %v, want 0", v)
	}
	if v := got.sum("breakwater.inbound.requests", "http.request.method", "_OTHER"); v != 2 {
		t.Errorf("BREW and lower-case get: %v requests under _OTHER, want 2", v)
	}
	for id := range got {
		if strings.HasPrefix(id, "breakwater.inbound.requests{") && strings.Contains(id, "http.response.status_code") {
			t.Errorf("a status outside 100–599 was recorded: %s", id)
		}
	}
	if v := got[`breakwater.breaker.status{breakwater.breaker.state="closed",breakwater.key="k"}`]; v != 1 {
		t.Errorf("state after open→closed with no opening seen: closed = %v, want 1", v)
	}
}

// TestKeyValueMapsKeys checks WithKeyValue: the mapped value is the
// attribute, and keys mapping to one value add up.
func TestKeyValueMapsKeys(t *testing.T) {
	s := newSDK(t, otelbw.WithKeyValue(func(k string) string { return strings.TrimSuffix(strings.TrimPrefix(k, "shard-"), "-1") }))
	tr := newTransport(t, cannedOK{}, bw.WithObserver(s.obs), bw.WithKeyFunc(func(r *http.Request) string { return r.URL.Host }))
	for _, host := range []string{"shard-billing", "shard-billing-1", "shard-search"} {
		if _, err := call(context.Background(), tr, "https://"+host+"/"); err != nil {
			t.Fatal(err)
		}
	}
	got := s.series(t)
	if v := got.sum("breakwater.call.duration_count", "breakwater.key", "billing"); v != 2 {
		t.Errorf("billing calls %v, want 2", v)
	}
	if v := got.sum("breakwater.call.duration_count", "breakwater.key", "search"); v != 1 {
		t.Errorf("search calls %v, want 1", v)
	}
}

// TestInboundRequests serves requests through breakwater middleware: a
// handler timeout, and a shedder that turns one away.
func TestInboundRequests(t *testing.T) {
	s := newSDK(t)
	bh, err := bw.NewBulkheads(1)
	if err != nil {
		t.Fatal(err)
	}
	shed, err := bw.Shedder(bh, bw.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{})
	h := shed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/slow", nil))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/fast", nil))
	close(release)
	<-done
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("the second request got %d, want 503 from the shedder", rec.Code)
	}
	got := s.series(t)
	if v := got.sum("breakwater.inbound.requests", "http.request.method", "POST", "http.response.status_code", "418", "breakwater.category", "client_error"); v != 1 {
		t.Errorf("served POST: %v, want 1 (%v)", v, got)
	}
	if v := got.sum("breakwater.inbound.requests", "http.request.method", "GET", "http.response.status_code", "503", "breakwater.category", "rejected"); v != 1 {
		t.Errorf("shed GET: %v, want 1 (%v)", v, got)
	}
	if v := got.sum("breakwater.rejections", "breakwater.mechanism", "shed"); v != 1 {
		t.Errorf("shed rejections %v, want 1", v)
	}
	if v := got.sum("breakwater.inbound.request.duration_count"); v != 2 {
		t.Errorf("inbound durations %v, want 2", v)
	}
}
