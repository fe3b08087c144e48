package prom_test

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

// TestHedgingAndFailoverMetrics: hedges, the calls they answered, attempts
// per endpoint and ejections are exported, and the counting invariant
// holds with hedges counted as tries: calls + retries + hedges = attempts
// + rejections other than retry_budget.
func TestHedgingAndFailoverMetrics(t *testing.T) {
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
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		tr := newTransport(t, u.Transport(), bw.WithObserver(c),
			bw.WithHedging(bw.Hedging{Delay: 20 * time.Millisecond, Budget: 0.5}),
			bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test", "http://down.test"}}))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					_, _ = call(context.Background(), tr, "http://service.test/")
				}
			})
		}
		wg.Wait()
		synctest.Wait()

		got := gather(t, reg)
		const key = "http://service.test"
		calls := got.sum(prom.MetricCalls, "key", key)
		retries := got.sum(prom.MetricRetries, "key", key)
		hedges := got.sum(prom.MetricHedges, "key", key)
		attempts := got.sum(prom.MetricAttempts, "key", key)
		refusals := got.sum(prom.MetricRejections, "key", key, "mechanism", "!retry_budget")
		if calls != 200 || hedges == 0 || calls+retries+hedges != attempts+refusals {
			t.Errorf("calls %v + retries %v + hedges %v != attempts %v + refusals %v", calls, retries, hedges, attempts, refusals)
		}
		if wins := got.sum(prom.MetricHedgeWins, "key", key); wins == 0 || wins > hedges {
			t.Errorf("hedge wins %v of %v hedges", wins, hedges)
		}
		for _, ep := range []string{"http://a.test", "http://b.test", "http://down.test"} {
			if got.sum(prom.MetricEndpointAttempts, "key", key, "endpoint", ep) == 0 {
				t.Errorf("no attempts counted for %s", ep)
			}
		}
		if got.sum(prom.MetricEndpointAttempts, "key", key) != attempts {
			t.Errorf("endpoint attempts %v, attempts %v", got.sum(prom.MetricEndpointAttempts, "key", key), attempts)
		}
		if v := got.sum(prom.MetricEndpointEjected, "key", key, "endpoint", "http://down.test"); v != 1 {
			t.Errorf("down.test ejected gauge %v, want 1", v)
		}
		if v := got.sum(prom.MetricEndpointEjected, "key", key, "endpoint", "http://a.test"); v != 0 {
			t.Errorf("a.test ejected gauge %v, want 0", v)
		}
		if v := got.sum(prom.MetricEndpointEjections, "key", key, "endpoint", "http://down.test", "reason", "failures"); v != 1 {
			t.Errorf("down.test ejections for failures %v, want 1", v)
		}
	})
}

// TestHedgeCountedAsSent: a hedge counts when it is sent, while it is
// still running, not when its attempt ends.
func TestHedgeCountedAsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 100 * time.Millisecond})
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		tr := newTransport(t, u.Transport(), bw.WithObserver(c), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = call(context.Background(), tr, "http://service.test/")
		}()
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		const key = "http://service.test"
		got := gather(t, reg)
		if hedges, attempts := got.sum(prom.MetricHedges, "key", key), got.sum(prom.MetricAttempts, "key", key); hedges != 1 || attempts != 0 {
			t.Errorf("mid-call: %v hedges, %v attempts; want the hedge sent and no attempt ended", hedges, attempts)
		}
		<-done
		synctest.Wait()
		if hedges := gather(t, reg).sum(prom.MetricHedges, "key", key); hedges != 1 {
			t.Errorf("after the call: %v hedges, want 1", hedges)
		}
	})
}
