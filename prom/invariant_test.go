package prom_test

import (
	"context"
	"net/http"
	"strings"
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

// tryBalance checks, for each key, the counting invariant of the package
// documentation: calls + retries = attempts + rejections other than
// retry_budget + abandoned[key], where abandoned counts the calls whose
// context ended while they waited before a retry.
func tryBalance(t *testing.T, got series, keys []string, abandoned map[string]float64) {
	t.Helper()
	for _, k := range keys {
		calls := got.sum(prom.MetricCalls, "key", k)
		retries := got.sum(prom.MetricRetries, "key", k)
		attempts := got.sum(prom.MetricAttempts, "key", k)
		refusals := got.sum(prom.MetricRejections, "key", k, "mechanism", "!retry_budget")
		if calls+retries != attempts+refusals+abandoned[k] {
			t.Errorf("%s: calls %v + retries %v != attempts %v + refusals %v + abandoned %v",
				k, calls, retries, attempts, refusals, abandoned[k])
		}
	}
}

// TestAttemptsBalanceCallsAndRetries runs a mixed workload against three
// hosts of one upstream, with concurrent callers over 20 s of the bubble's
// clock: "ok" always answers, "flaky" fails every other request (calls that
// succeed after a retry), "down" always fails (exhausted calls, the retry
// budget running out, the breaker opening, calls rejected whole or after a
// retry, failing half-open probes).
func TestAttemptsBalanceCallsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var flaky atomic.Int64
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			switch {
			case strings.HasPrefix(r.Host, "ok."):
				return breakwatertest.Step{}
			case strings.HasPrefix(r.Host, "flaky."):
				if flaky.Add(1)%2 == 1 {
					return breakwatertest.Step{Status: 502}
				}
				return breakwatertest.Step{}
			}
			return breakwatertest.Step{Status: 500, Delay: 10 * time.Millisecond}
		})
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		// midCall counts breaker rejections of a call's second or later
		// try: the breaker opened while the call was retrying.
		var midCall atomic.Int64
		spy := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			if e.Kind == bw.EventReject && e.Mechanism == bw.MechBreaker && e.Attempt > 1 {
				midCall.Add(1)
			}
		})
		tr := newTransport(t, u.Transport(), bw.WithObserver(c), bw.WithObserver(spy), bw.WithMaxAttempts(4))
		ctx := context.Background()
		var wg sync.WaitGroup
		for _, host := range []string{"ok.test", "flaky.test", "down.test"} {
			for range 8 {
				wg.Go(func() {
					for range 40 {
						_, _ = call(ctx, tr, "http://"+host+"/")
						time.Sleep(500 * time.Millisecond)
					}
				})
			}
		}
		wg.Wait()

		got := gather(t, reg)
		keys := []string{"http://ok.test", "http://flaky.test", "http://down.test"}
		tryBalance(t, got, keys, nil)

		// The workload covered what the invariant is about.
		for _, check := range []struct {
			what string
			v    float64
		}{
			{"successful calls of ok", got.sum(prom.MetricCalls, "key", "http://ok.test", "category", "success")},
			{"retries of flaky", got.sum(prom.MetricRetries, "key", "http://flaky.test")},
			{"exhausted calls of down", got.sum(prom.MetricCalls, "key", "http://down.test", "category", "server_error")},
			{"retry budget exhaustion of down", got.sum(prom.MetricRetryBudgetExhausted, "key", "http://down.test")},
			{"breaker rejections of down", got.sum(prom.MetricRejections, "key", "http://down.test", "mechanism", "breaker")},
			{"rejected calls of down", got.sum(prom.MetricCalls, "key", "http://down.test", "category", "rejected")},
			{"half-open probes of down", got.sum(prom.MetricBreakerTransitions, "key", "http://down.test", "to", "half_open")},
			{"calls rejected after a retry", float64(midCall.Load())},
		} {
			if check.v == 0 {
				t.Errorf("the workload produced no %s", check.what)
			}
		}
		if ok := got.sum(prom.MetricCalls, "key", "http://ok.test"); ok != 320 || got.sum(prom.MetricAttempts, "key", "http://ok.test") != 320 {
			t.Errorf("ok: %v calls, want 320 with as many attempts", ok)
		}
		// A rejected call makes no attempt.
		if got.sum(prom.MetricAttempts, "category", "rejected") != 0 {
			t.Error("an attempt was counted as rejected")
		}
	})
}

// TestCallCanceledInBackoffBreaksTheBalanceByOne pins the documented
// exception: a call canceled while waiting before a retry has a retry
// counted that it never tried.
func TestCallCanceledInBackoffBreaksTheBalanceByOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		reg := prometheus.NewPedanticRegistry()
		c, err := prom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		tr := newTransport(t, u.Transport(), bw.WithObserver(c), bw.WithBackoff(bw.Constant(time.Second)))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel) // during the first backoff
		if _, err := call(ctx, tr, upstreamURL); err == nil {
			t.Fatal("the canceled call succeeded")
		}
		got := gather(t, reg)
		if v := got.sum(prom.MetricCalls, "category", "canceled"); v != 1 {
			t.Fatalf("canceled calls %v, want 1", v)
		}
		if a, r := got.sum(prom.MetricAttempts), got.sum(prom.MetricRetries); a != 1 || r != 1 {
			t.Fatalf("attempts %v, retries %v; want 1, 1", a, r)
		}
		tryBalance(t, got, []string{upstreamKey}, map[string]float64{upstreamKey: 1})
	})
}
