package otelbw_test

import (
	"context"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
)

// TestOutageMatchesPrometheus plays a scripted outage on the bubble's clock
// with the Prometheus collector and an Observer on one transport, every
// call inside its own span: healthy traffic paced by a rate limit, a 429
// that pauses the key, a run of 503s (retries, the retry budget running
// out, the breaker opening and rejecting, failing probes), then recovery.
// Mid-outage and at the end, every OpenTelemetry data point equals the
// Prometheus sample of the same meaning (histogram buckets included), and
// the span events count what the collector counts.
func TestOutageMatchesPrometheus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, _ *http.Request) breakwatertest.Step {
			switch at := time.Since(start); {
			case at < 3*time.Second:
				return breakwatertest.Step{Delay: 10 * time.Millisecond}
			case at < 6500*time.Millisecond: // 429s past three pauses, so that a caller that can wait gets one
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			case at < 12*time.Second:
				return breakwatertest.Step{Status: 503, Delay: 5 * time.Millisecond}
			}
			return breakwatertest.Step{Delay: 20 * time.Millisecond}
		})
		reg := prometheus.NewPedanticRegistry()
		pc, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := newSDK(t)
		tr := newTransport(t, u.Transport(), bw.WithObserver(pc), bw.WithObserver(s.obs),
			bw.WithRateLimit(12, 2), bw.WithRetryBudget(0.2, 0.2, 10*time.Second),
			bw.WithPolicy(bw.Consecutive(30)), bw.WithHalfOpen(1, 1))

		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				for n := 0; time.Since(start) < 30*time.Second; n++ {
					ctx, span := s.tracer.Start(context.Background(), "call")
					cancel := context.CancelFunc(func() {})
					if i%3 == 0 { // a third of the callers cannot wait long
						ctx, cancel = context.WithTimeout(ctx, 400*time.Millisecond)
					}
					_, _ = call(ctx, tr, "http://upstream.test/")
					cancel()
					span.End()
					time.Sleep(250 * time.Millisecond)
				}
			})
		}

		time.Sleep(11 * time.Second) // the breaker has opened
		synctest.Wait()
		mid := requireSameSeries(t, "mid-outage", s, reg)
		if mid[`breakwater.breaker.status{breakwater.breaker.state="closed",breakwater.key="http://upstream.test"}`] != 0 {
			t.Error("mid-outage: the breaker reads closed")
		}
		wg.Wait()
		got := requireSameSeries(t, "after recovery", s, reg)

		// The run covered what the comparison is about.
		for _, check := range []struct {
			what string
			v    float64
		}{
			{"successful calls", got.sum("breakwater.call.duration_count", "breakwater.category", "success")},
			{"retries after 503", got.sum("breakwater.retries", "breakwater.category", "server_error")},
			{"retries after 429", got.sum("breakwater.retries", "breakwater.category", "throttled")},
			{"breaker rejections", got.sum("breakwater.rejections", "breakwater.mechanism", "breaker")},
			{"retry budget rejections", got.sum("breakwater.rejections", "breakwater.mechanism", "retry_budget")},
			{"waits for the pause", got.sum("breakwater.wait.duration_count", "breakwater.mechanism", "pause")},
			{"waits for the rate limit", got.sum("breakwater.wait.duration_count", "breakwater.mechanism", "rate_limit")},
			{"breaker openings", got.sum("breakwater.breaker.transitions", "breakwater.breaker.to", "open")},
			{"breaker closings", got.sum("breakwater.breaker.transitions", "breakwater.breaker.to", "closed")},
		} {
			if check.v == 0 {
				t.Errorf("the outage produced no %s", check.what)
			}
		}
		requireSpanEventsMatch(t, s, got)
	})
}

// requireSameSeries collects s and gathers reg at the same instant and
// fails unless the two hold the same samples (see promAsOTel); it returns
// the OpenTelemetry samples.
func requireSameSeries(t *testing.T, step string, s *sdk, reg prometheus.Gatherer) series {
	t.Helper()
	got, want := s.series(t), promAsOTel(t, reg)
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		g, gok := got[id]
		w, wok := want[id]
		switch {
		case !gok:
			t.Errorf("%s: OpenTelemetry has no %s (Prometheus: %v)", step, id, w)
		case !wok:
			t.Errorf("%s: Prometheus has no %s (OpenTelemetry: %v)", step, id, g)
		case math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)):
			t.Errorf("%s: %s = %v, Prometheus says %v", step, id, g, w)
		}
	}
	return got
}

// promAsOTel gathers reg and names each sample as the OpenTelemetry
// instrument of the same meaning would: calls_total and attempts_total are
// the counts of the duration histograms and retry_budget_exhausted_total a
// rejections series, so they are checked against those and left out; the
// state gauge becomes the status state set; cumulative buckets become
// per-bucket counts.
func promAsOTel(t *testing.T, reg prometheus.Gatherer) series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		prom.MetricRetries:            "breakwater.retries",
		prom.MetricRejections:         "breakwater.rejections",
		prom.MetricWait:               "breakwater.wait.duration",
		prom.MetricAttemptDuration:    "breakwater.attempt.duration",
		prom.MetricCallDuration:       "breakwater.call.duration",
		prom.MetricInFlight:           "breakwater.call.active",
		prom.MetricBreakerOpenSeconds: "breakwater.breaker.open_time",
		prom.MetricBreakerTransitions: "breakwater.breaker.transitions",
		prom.MetricHedges:             "breakwater.hedges",
		prom.MetricHedgeWins:          "breakwater.hedge.wins",
		prom.MetricEndpointAttempts:   "breakwater.endpoint.attempts",
		prom.MetricEndpointEjected:    "breakwater.endpoint.ejected",
		prom.MetricEndpointEjections:  "breakwater.endpoint.ejections",
	}
	labels := map[string]string{
		"key": "breakwater.key", "category": "breakwater.category", "mechanism": "breakwater.mechanism",
		"from": "breakwater.breaker.from", "to": "breakwater.breaker.to", "reason": "breakwater.breaker.reason",
		"endpoint": "breakwater.endpoint",
	}
	attrsOf := func(m *dto.Metric, extra ...attribute.KeyValue) string {
		var kvs []attribute.KeyValue
		for _, lp := range m.GetLabel() {
			name := labels[lp.GetName()]
			if lp.GetName() == "reason" && hasLabel(m, "endpoint") {
				name = "breakwater.endpoint.reason" // an ejection's, not a transition's
			}
			kvs = append(kvs, attribute.String(name, lp.GetValue()))
		}
		return attrString(attribute.NewSet(append(kvs, extra...)...))
	}
	byName := map[string]*dto.MetricFamily{}
	out := series{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
		if mf.GetName() == prom.MetricBreakerState {
			for _, m := range mf.GetMetric() {
				for v, state := range []string{"closed", "half_open", "open"} {
					val := 0.0
					if m.GetGauge().GetValue() == float64(v) {
						val = 1
					}
					out["breakwater.breaker.status"+attrsOf(m, attribute.String("breakwater.breaker.state", state))] = val
				}
			}
			continue
		}
		name, ok := names[mf.GetName()]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				if name == "breakwater.hedge.wins" && m.GetCounter().GetValue() == 0 {
					continue // prom shows it beside hedges; an OTel counter appears with its first win
				}
				out[name+attrsOf(m)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+attrsOf(m)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[name+"_count"+attrsOf(m)] = float64(h.GetSampleCount())
				out[name+"_sum"+attrsOf(m)] = h.GetSampleSum()
				prev := uint64(0)
				for i, b := range h.GetBucket() {
					out[name+"_bucket"+attrsOf(m, attribute.Int("bucket", i))] = float64(b.GetCumulativeCount() - prev)
					prev = b.GetCumulativeCount()
				}
				out[name+"_bucket"+attrsOf(m, attribute.Int("bucket", len(h.GetBucket())))] = float64(h.GetSampleCount() - prev)
			}
		}
	}
	// The left-out counters agree with what stands for them.
	same := func(counter, stand string, match ...string) {
		for _, m := range byName[counter].GetMetric() {
			var lv []string
			for _, lp := range m.GetLabel() {
				lv = append(lv, labels[lp.GetName()], lp.GetValue())
			}
			if got := out.sum(stand, append(lv, match...)...); got != m.GetCounter().GetValue() {
				t.Errorf("%s%s = %v, but %s says %v", counter, attrsOf(m), m.GetCounter().GetValue(), stand, got)
			}
		}
	}
	same(prom.MetricCalls, "breakwater.call.duration_count")
	same(prom.MetricAttempts, "breakwater.attempt.duration_count")
	same(prom.MetricRetryBudgetExhausted, "breakwater.rejections", "breakwater.mechanism", "retry_budget")
	return out
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return true
		}
	}
	return false
}

// requireSpanEventsMatch checks the span events of the run against the
// metrics: one breakwater.retry event per retry counted, one
// breakwater.rejection per rejection, one breakwater.wait per wait, one
// breakwater.hedge per hedge, one breakwater.answer with breakwater.hedge
// true per hedge win, with the same attributes and, for waits, the same
// total time.
func requireSpanEventsMatch(t *testing.T, s *sdk, got series) {
	t.Helper()
	events := series{}
	for _, e := range s.spanEvents() {
		key, _ := attr(e.Attributes, "breakwater.key")
		kv := []attribute.KeyValue{attribute.String("breakwater.key", key.AsString())}
		switch e.Name {
		case "breakwater.retry":
			c, _ := attr(e.Attributes, "breakwater.category")
			events["breakwater.retries"+attrString(attribute.NewSet(append(kv, attribute.String("breakwater.category", c.AsString()))...))]++
			if d, ok := attr(e.Attributes, "breakwater.delay"); !ok || d.AsFloat64() <= 0 {
				t.Errorf("a retry event without its delay: %v", e.Attributes)
			}
			if st, ok := attr(e.Attributes, "http.response.status_code"); !ok || st.AsInt64() < 429 {
				t.Errorf("a retry event without the status that caused it: %v", e.Attributes)
			}
		case "breakwater.rejection":
			m, _ := attr(e.Attributes, "breakwater.mechanism")
			events["breakwater.rejections"+attrString(attribute.NewSet(append(kv, attribute.String("breakwater.mechanism", m.AsString()))...))]++
		case "breakwater.wait":
			m, _ := attr(e.Attributes, "breakwater.mechanism")
			id := attrString(attribute.NewSet(append(kv, attribute.String("breakwater.mechanism", m.AsString()))...))
			events["breakwater.wait.duration_count"+id]++
			d, _ := attr(e.Attributes, "breakwater.delay")
			events["breakwater.wait.duration_sum"+id] += d.AsFloat64()
		case "breakwater.hedge":
			events["breakwater.hedges"+attrString(attribute.NewSet(kv...))]++
			if n, ok := attr(e.Attributes, "breakwater.attempt"); !ok || n.AsInt64() < 2 {
				t.Errorf("a hedge event without the hedge's attempt number: %v", e.Attributes)
			}
			if d, ok := attr(e.Attributes, "breakwater.delay"); !ok || d.AsFloat64() <= 0 {
				t.Errorf("a hedge event without its delay: %v", e.Attributes)
			}
		case "breakwater.answer":
			if n, ok := attr(e.Attributes, "breakwater.attempt"); !ok || n.AsInt64() < 1 {
				t.Errorf("an answer event without the attempt that answered: %v", e.Attributes)
			}
			if h, ok := attr(e.Attributes, "breakwater.hedge"); !ok {
				t.Errorf("an answer event that does not say whether a hedge answered: %v", e.Attributes)
			} else if h.AsBool() {
				events["breakwater.hedge.wins"+attrString(attribute.NewSet(kv...))]++
			}
		default:
			t.Errorf("unexpected span event %q", e.Name)
		}
	}
	want := series{}
	for id, v := range got {
		for _, prefix := range []string{"breakwater.retries{", "breakwater.rejections{", "breakwater.wait.duration_count{", "breakwater.wait.duration_sum{",
			"breakwater.hedges{", "breakwater.hedge.wins{"} {
			if strings.HasPrefix(id, prefix) && v != 0 {
				want[id] = v
			}
		}
	}
	for id, w := range want {
		if g := events[id]; math.Abs(g-w) > 1e-9*math.Max(1, w) {
			t.Errorf("span events %s: %v, the metrics say %v", id, g, w)
		}
	}
	for id, g := range events {
		if _, ok := want[id]; !ok {
			t.Errorf("span events %s: %v, the metrics have none", id, g)
		}
	}
	t.Logf("span events: %d retries, %d rejections, %d waits, %d hedges (%d won) over %d spans",
		int(events.sum("breakwater.retries")), int(events.sum("breakwater.rejections")),
		int(events.sum("breakwater.wait.duration_count")), int(events.sum("breakwater.hedges")),
		int(events.sum("breakwater.hedge.wins")), len(s.spans.Ended()))
}
