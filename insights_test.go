package breakwater_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// finding returns the insight of check for the upstream, if any.
func finding(in []bw.Insight, check string) (bw.Insight, bool) {
	for _, i := range in {
		if i.Check == check && i.Key == upstreamKey {
			return i, true
		}
	}
	return bw.Insight{}, false
}

// Each insight appears when live traffic shows it, with its number in the
// message, and not otherwise.
func TestInsights(t *testing.T) {
	never := bw.WithPolicy(bw.Window(1000, time.Minute))
	for _, tc := range []struct {
		name  string
		check string
		step  func(n int, now time.Duration) breakwatertest.Step
		opts  []bw.Option
		calls int
		every time.Duration
		value float64
		words string
	}{
		{
			name: "40 % of calls fail, breaker stays closed", check: "breaker_never_opened",
			step: func(n int, _ time.Duration) breakwatertest.Step {
				if n%5 < 2 {
					return breakwatertest.Step{Status: http.StatusBadGateway}
				}
				return breakwatertest.Step{}
			},
			opts: []bw.Option{bw.WithMaxAttempts(1), never}, calls: 50, every: 500 * time.Millisecond,
			value: 0.4, words: "40 % of calls failed in the last minute (20 of 50)",
		},
		{
			name: "a third of attempts hang past the attempt timeout", check: "attempt_timeouts",
			step: func(n int, _ time.Duration) breakwatertest.Step {
				if n%3 == 0 {
					return breakwatertest.Step{Hang: true}
				}
				return breakwatertest.Step{}
			},
			opts:  []bw.Option{bw.WithMaxAttempts(1), bw.WithAttemptTimeout(100 * time.Millisecond), never},
			calls: 30, every: time.Second, value: 10.0 / 30, words: "attempt timeout fired on 33 % of attempts",
		},
		{
			name: "the upstream keeps asking to pause", check: "pause_held",
			step: func(int, time.Duration) breakwatertest.Step {
				return breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}}
			},
			opts: []bw.Option{bw.WithMaxAttempts(1), bw.WithMaxWait(0)},
			// Every 30 s a call is let through, answered 429 and held
			// again; the calls refused in between cover the rest.
			calls: 120, every: time.Second, value: 116.0 / 300, words: "pause gate held calls for 39 % of the last 5 minutes (116s)",
		},
		{
			name: "the retry budget runs out", check: "retry_budget_exhausted",
			step: func(int, time.Duration) breakwatertest.Step {
				return breakwatertest.Step{Status: http.StatusInternalServerError}
			},
			opts: []bw.Option{bw.WithBackoff(bw.Constant(0)), bw.WithRetryBudget(0, 0.5, 10*time.Second),
				bw.WithoutBreaker()},
			// The first call's retries have the floor; after five failing
			// attempts in a row the key has only the ratio (0).
			calls: 20, every: time.Second, value: 19, words: "retry budget exhausted 19 times in the last minute",
		},
		{
			name: "the upstream recovers and fails again", check: "breaker_flapping",
			step: func(_ int, now time.Duration) breakwatertest.Step {
				if now/(4*time.Second)%2 == 0 {
					return breakwatertest.Step{Status: http.StatusInternalServerError}
				}
				return breakwatertest.Step{}
			},
			opts: []bw.Option{bw.WithMaxAttempts(1), bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(time.Second, time.Second), bw.WithOpenJitter(0), bw.WithHalfOpen(1, 1)},
			// It opens on each of the 4 outages, and reopens on the probes
			// of the 3 seconds each lasts after the first opening.
			calls: 60, every: 500 * time.Millisecond, value: 16, words: "breaker opened 16 times in the last 5 minutes, 12 of them when a probe found the upstream still failing",
		},
		{
			name: "every call needs a retry", check: "retries_absorb_failures",
			step: func(n int, _ time.Duration) breakwatertest.Step {
				if n%2 == 1 { // the first attempt of every call
					return breakwatertest.Step{Status: http.StatusServiceUnavailable}
				}
				return breakwatertest.Step{}
			},
			opts:  []bw.Option{bw.WithBackoff(bw.Constant(10 * time.Millisecond)), bw.WithoutRetryBudget()},
			calls: 30, every: time.Second, value: 1, words: "100 % of successful calls needed a retry in the last minute (30 of 30)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
					return tc.step(n, time.Since(start))
				})
				tr := newTransport(t, u.Transport(), append(tc.opts, bw.WithInsights(true))...)
				if _, ok := finding(tr.Snapshot().Insights, tc.check); ok {
					t.Fatal("a finding before any traffic")
				}
				for range tc.calls {
					get(tr)
					time.Sleep(tc.every)
				}
				got, ok := finding(tr.Snapshot().Insights, tc.check)
				if !ok {
					t.Fatalf("no %s finding in %+v", tc.check, tr.Snapshot().Insights)
				}
				if diff := got.Value - tc.value; diff > 1e-9 || diff < -1e-9 || !strings.Contains(got.Message, tc.words) {
					t.Fatalf("finding %.3f %q, want %.3f and %q", got.Value, got.Message, tc.value, tc.words)
				}
				// Five quiet minutes later, nothing is left to report.
				time.Sleep(5 * time.Minute)
				if f, ok := finding(tr.Snapshot().Insights, tc.check); ok {
					t.Fatalf("still reported after five quiet minutes: %q", f.Message)
				}
			})
		})
	}
}

// A healthy upstream yields no finding, and a snapshot says whether an
// Insights observes the transport at all.
func TestInsightsQuietWhenHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithInsights(true))
		for range 100 {
			get(tr)
			time.Sleep(100 * time.Millisecond)
		}
		s := tr.Snapshot()
		if s.Insights == nil || len(s.Insights) != 0 {
			t.Fatalf("insights %#v, want an empty list", s.Insights)
		}
		b, _ := json.Marshal(s)
		if !strings.Contains(string(b), `"insights":[]`) {
			t.Fatalf("JSON %s lacks an empty insights list", b)
		}
		plain := newTransport(t, u.Transport())
		if s := plain.Snapshot(); s.Insights != nil {
			t.Fatalf("insights %#v without an Insights observer", s.Insights)
		}
		b, _ = json.Marshal(plain.Snapshot())
		if strings.Contains(string(b), `"insights"`) {
			t.Fatalf("JSON %s has insights without an observer", b)
		}
	})
}

// With insights, a transport's snapshot reports its traffic in plain words.
func ExampleWithInsights() {
	tr, err := bw.NewTransport(bw.WithInsights(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... after some traffic through tr:
	for _, i := range tr.Snapshot().Insights {
		fmt.Printf("%s: %s\n", i.Key, i.Message)
	}
	fmt.Println(len(tr.Snapshot().Insights), "findings")
	// Output: 0 findings
}

// A breaker that reopens on every failed probe of a long outage opens as
// often as one that closes in between: both are openings, and the
// message tells them apart.
func TestInsightsFlappingCountsReopenings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: http.StatusInternalServerError})
		tr := newTransport(t, u.Transport(), bw.WithInsights(true), bw.WithMaxAttempts(1), bw.WithPolicy(bw.Consecutive(1)),
			bw.WithOpenTimeout(time.Second, time.Second), bw.WithOpenJitter(0), bw.WithHalfOpen(1, 1))
		for range 20 {
			get(tr)
			time.Sleep(500 * time.Millisecond)
		}
		got, ok := finding(tr.Snapshot().Insights, "breaker_flapping")
		// One opening on the first failure, then one on the probe of every
		// second after it.
		if !ok || got.Value != 10 || !strings.Contains(got.Message, "breaker opened 10 times in the last 5 minutes, 9 of them when a probe found the upstream still failing") {
			t.Fatalf("finding %+v (found %v), want 10 openings, 9 on a failed probe", got, ok)
		}
	})
}

// Tripping a breaker by hand is not the upstream flapping.
func TestInsightsFlappingIgnoresTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithInsights(true))
		get(tr)
		b := tr.Breakers().Get(upstreamKey)
		for range 5 {
			b.Trip(time.Minute)
			time.Sleep(time.Second)
			b.Reset()
			time.Sleep(time.Second)
		}
		if got, ok := finding(tr.Snapshot().Insights, "breaker_flapping"); ok {
			t.Fatalf("five trips by hand reported as flapping: %q", got.Message)
		}
	})
}

// A pause under way counts from the answer that asked for it, before any
// call it holds is let go; a minute of pauses is not a fifth of five
// minutes.
func TestInsightsPauseHeldOngoing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"120"}}})
		tr := newTransport(t, u.Transport(), bw.WithInsights(true), bw.WithMaxAttempts(1))
		get(tr)
		time.Sleep(50 * time.Second)
		if got, ok := finding(tr.Snapshot().Insights, "pause_held"); ok {
			t.Fatalf("50s of a pause reported as a fifth of 5 minutes: %q", got.Message)
		}
		time.Sleep(40 * time.Second)
		got, ok := finding(tr.Snapshot().Insights, "pause_held")
		if !ok || got.Value != 0.3 || !strings.Contains(got.Message, "pause gate held calls for 30 % of the last 5 minutes (90s, and holds them still)") {
			t.Fatalf("finding %+v (found %v), want 90s of 5 minutes, under way", got, ok)
		}
		// Once it is over, what it held still counts, and no longer as
		// under way.
		time.Sleep(time.Minute)
		got, ok = finding(tr.Snapshot().Insights, "pause_held")
		if !ok || got.Value != 0.4 || !strings.Contains(got.Message, "(120s)") {
			t.Fatalf("finding %+v (found %v) after the pause, want 120s of 5 minutes", got, ok)
		}
	})
}
