package otelbw_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// TestHedgingAndFailoverMatchPrometheus runs hedged calls over a failover
// of three endpoints, one of them down, with the Prometheus collector and
// an Observer on one transport, every call inside its own span: every
// OpenTelemetry data point (hedges, hedge wins, attempts per endpoint, the
// ejected endpoint and its ejection included) equals the Prometheus
// sample of the same meaning, the counting invariant holds with hedges,
// and the spans carry one breakwater.hedge event per hedge counted and one
// breakwater.answer event per hedged call that got a response, saying
// which attempt gave it.
func TestHedgingAndFailoverMatchPrometheus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.Host == "down.test" {
				return breakwatertest.Step{Status: 500}
			}
			if n.Add(1)%5 == 0 {
				return breakwatertest.Step{Delay: 200 * time.Millisecond}
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		reg := prometheus.NewPedanticRegistry()
		pc, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := newSDK(t)
		tr := newTransport(t, u.Transport(), bw.WithObserver(pc), bw.WithObserver(s.obs),
			bw.WithHedging(bw.Hedging{Delay: 20 * time.Millisecond, Budget: 0.5}),
			bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test", "http://down.test"}}))
		var (
			wg       sync.WaitGroup
			answered atomic.Int64
		)
		for range 4 {
			wg.Go(func() {
				for range 50 {
					ctx, span := s.tracer.Start(context.Background(), "call")
					if st, err := call(ctx, tr, "http://service.test/"); err == nil && st == 200 {
						answered.Add(1)
					}
					span.End()
				}
			})
		}
		wg.Wait()
		synctest.Wait()

		got := requireSameSeries(t, "after the run", s, reg)
		const key = "http://service.test"
		calls := got.sum("breakwater.call.duration_count", "breakwater.key", key)
		retries := got.sum("breakwater.retries", "breakwater.key", key)
		hedges := got.sum("breakwater.hedges", "breakwater.key", key)
		attempts := got.sum("breakwater.attempt.duration_count", "breakwater.key", key)
		refusals := got.sum("breakwater.rejections", "breakwater.key", key) - got.sum("breakwater.rejections", "breakwater.key", key, "breakwater.mechanism", "retry_budget")
		if calls != 200 || hedges == 0 || calls+retries+hedges != attempts+refusals {
			t.Errorf("calls %v + retries %v + hedges %v != attempts %v + refusals %v", calls, retries, hedges, attempts, refusals)
		}
		if wins := got.sum("breakwater.hedge.wins", "breakwater.key", key); wins == 0 || wins > hedges {
			t.Errorf("hedge wins %v of %v hedges", wins, hedges)
		}
		if v := got.sum("breakwater.endpoint.attempts", "breakwater.key", key); v != attempts {
			t.Errorf("endpoint attempts %v, attempts %v", v, attempts)
		}
		if v := got.sum("breakwater.endpoint.ejected", "breakwater.endpoint", "http://down.test"); v != 1 {
			t.Errorf("down.test ejected: %v, want 1", v)
		}
		if v := got.sum("breakwater.endpoint.ejections", "breakwater.endpoint", "http://down.test", "breakwater.endpoint.reason", "failures"); v != 1 {
			t.Errorf("down.test ejections for failures: %v, want 1", v)
		}
		requireSpanEventsMatch(t, s, got)

		// Each hedged call that got a response names the attempt that gave
		// it, on its own span, after the hedges it sent.
		var hedgedCalls int
		for _, sp := range s.spans.Ended() {
			sent, answers := 0, 0
			for _, e := range sp.Events() {
				switch e.Name {
				case "breakwater.hedge":
					if answers > 0 {
						t.Errorf("span %s: a hedge after the answer", sp.SpanContext().SpanID())
					}
					if d, _ := attr(e.Attributes, "breakwater.delay"); d.AsFloat64() != 0.02 {
						t.Errorf("hedge event delay %v, want the hedge delay 0.02", d.AsFloat64())
					}
					if ep, ok := attr(e.Attributes, "breakwater.endpoint"); !ok || ep.AsString() == "" {
						t.Errorf("hedge event without its endpoint: %v", e.Attributes)
					}
					sent++
				case "breakwater.answer":
					answers++
				}
			}
			if sent > 0 && answers > 1 || sent == 0 && answers > 0 {
				t.Errorf("span with %d hedges and %d answer events", sent, answers)
			}
			hedgedCalls += answers
		}
		if hedgedCalls == 0 || int64(hedgedCalls) > answered.Load() {
			t.Errorf("%d answer events for %d calls answered", hedgedCalls, answered.Load())
		}
	})
}
