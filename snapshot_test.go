package breakwater_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestSnapshotJSONShowsAnOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0),
			bw.WithOpenTimeout(5*time.Second, time.Minute))
		get(tr)
		time.Sleep(2 * time.Second)

		rec := jsonOf(t, tr.Snapshot())
		var got struct {
			Breakers []struct {
				Key              string  `json:"key"`
				State            string  `json:"state"`
				RemainingSeconds float64 `json:"remaining_seconds"`
				LastFailure      string  `json:"last_failure"`
				OpenedOn         int     `json:"opened_on"`
			} `json:"breakers"`
		}
		if err := json.Unmarshal(rec.Bytes(), &got); err != nil {
			t.Fatalf("%v in %s", err, rec)
		}
		if len(got.Breakers) != 1 {
			t.Fatalf("snapshot %s", rec)
		}
		b := got.Breakers[0]
		if b.Key != upstreamKey || b.State != "open" || b.RemainingSeconds != 3 || b.LastFailure != "server_error" || b.OpenedOn != 1 {
			t.Fatalf("breaker %+v, want open on 1 failure with 3s remaining after a server error", b)
		}
		// Reopened by a failed probe, it still says what opened it.
		time.Sleep(3 * time.Second)
		get(tr)
		if s := tr.Snapshot().Breakers[0]; s.State != bw.StateOpen || s.Reason != bw.ReasonProbeFailed || s.OpenedOn != 1 {
			t.Fatalf("reopened breaker %v (%s), opened on %d", s.State, s.Reason, s.OpenedOn)
		}
	})
}

func TestSnapshotShowsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"30"}}})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithRateLimit(10, 10), bw.WithConcurrencyLimit(4))
		get(tr)
		s := tr.Snapshot()
		if len(s.Pauses) != 1 || !s.Pauses[0].Paused || s.Pauses[0].Remaining != 30*time.Second {
			t.Fatalf("pauses %+v, want one of 30s", s.Pauses)
		}
		if len(s.RateLimiters) != 1 || s.RateLimiters[0].Tokens != 9 || len(s.Bulkheads) != 1 || s.Bulkheads[0].InFlight != 0 {
			t.Fatalf("limiters %+v, bulkheads %+v", s.RateLimiters, s.Bulkheads)
		}
	})
}

// A snapshot says since when a breaker is in its state, why, and how many
// failures open it, for every policy.
func TestBreakerSnapshotSinceReasonThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			policy    bw.Policy
			threshold int
		}{
			{bw.Window(4, time.Minute), 5},
			{bw.Consecutive(3).WithCategoryThreshold(bw.Timeout, 2), 3},
			{bw.FailureRate(0.5, 10, time.Minute), 5},
		} {
			bs, err := bw.NewBreakers(bw.WithPolicy(tc.policy), bw.WithOpenJitter(0))
			if err != nil {
				t.Fatal(err)
			}
			made := time.Now()
			b := bs.Get("k")
			time.Sleep(time.Second)
			b.RecordFailure(bw.ServerError)
			s := b.Snapshot()
			if !s.Since.Equal(made) || s.Reason != "" || s.Failures != 1 || s.Threshold != tc.threshold {
				t.Errorf("%v closed: since %v (made %v), reason %q, %d/%d failures, want 1/%d", tc.policy, s.Since, made, s.Reason, s.Failures, s.Threshold, tc.threshold)
			}
			time.Sleep(time.Second)
			b.Trip(0)
			s = b.Snapshot()
			if !s.Since.Equal(made.Add(2*time.Second)) || s.Reason != bw.ReasonTrip || s.State != bw.StateOpen || s.OpenedOn != 0 {
				t.Errorf("%v tripped: since %v, reason %q, state %v", tc.policy, s.Since.Sub(made), s.Reason, s.State)
			}
			// Half-open since the open timeout (100 ms by default)
			// elapsed, however long after that it is asked.
			time.Sleep(5 * time.Second)
			if s = b.Snapshot(); s.State != bw.StateHalfOpen || s.Reason != bw.ReasonOpenElapsed || !s.Since.Equal(made.Add(2100*time.Millisecond)) {
				t.Errorf("%v after the open timeout: %v since %v, reason %q", tc.policy, s.State, s.Since.Sub(made), s.Reason)
			}
		}
	})
}

// A snapshot says when a key's retry budget is spent: an outage has used
// what its calls earned, and the floor is gone once every attempt fails.
func TestSnapshotShowsASpentRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(0)), bw.WithRetryBudget(0.1, 1, 10*time.Second), bw.WithoutBreaker())
		get(tr)
		s := tr.Snapshot()
		if len(s.RetryBudgets) != 1 || s.RetryBudgets[0].Key != upstreamKey || s.RetryBudgets[0].Spent {
			t.Fatalf("budgets %+v after one call, want one not spent", s.RetryBudgets)
		}
		for range 5 {
			get(tr)
		}
		s = tr.Snapshot()
		if b := s.RetryBudgets[0]; !b.Spent || b.Calls != 6 || b.Allowed < 0.59 || b.Allowed > 0.61 {
			t.Fatalf("budget %+v after six failing calls, want spent, 6 calls, 0.6 allowed", b)
		}
		rec := jsonOf(t, s)
		if !strings.Contains(rec.String(), `"retry_budgets": [`) || !strings.Contains(rec.String(), `"spent": true`) {
			t.Fatalf("JSON %s", rec)
		}
		time.Sleep(10 * time.Second) // the budget's window
		if b := tr.Snapshot().RetryBudgets[0]; b.Spent {
			t.Fatalf("budget %+v spent with no retry in its window", b)
		}
		if s := newTransport(t, u.Transport(), bw.WithoutRetryBudget()).Snapshot(); s.RetryBudgets != nil {
			t.Fatalf("budgets %+v without a retry budget", s.RetryBudgets)
		}
	})
}

// A half-open breaker's snapshot counts the probes in flight: admitted, not
// yet released, and not past the probe timeout (after which their lease is
// taken back).
func TestSnapshotProbesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probeTimeout = 10 * time.Second
		bs := newBreakers(t, bw.WithHalfOpen(3, 5), bw.WithProbeTimeout(probeTimeout))
		b := bs.Get("k")
		b.Trip(time.Second)
		time.Sleep(time.Second)
		inFlight := func() int { return b.Snapshot().ProbesInFlight }
		if n := inFlight(); n != 0 {
			t.Fatalf("half-open before any probe: %d in flight", n)
		}
		p1, err1 := b.Allow()
		p2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if n := inFlight(); n != 2 {
			t.Fatalf("two probes admitted: %d in flight", n)
		}
		p1.Done(bw.Outcome{Category: bw.Canceled}) // neutral: only gives the lease back
		if n := inFlight(); n != 1 {
			t.Fatalf("one probe released: %d in flight", n)
		}
		time.Sleep(probeTimeout - time.Nanosecond)
		if n := inFlight(); n != 1 {
			t.Fatalf("1ns before its probe timeout: %d in flight", n)
		}
		time.Sleep(time.Nanosecond)
		if n := inFlight(); n != 0 {
			t.Fatalf("at its probe timeout the lease is taken back: %d in flight", n)
		}
		p2.Done(bw.Outcome{Category: bw.Canceled})
	})
}

// A half-open breaker's snapshot shows its ramp: the probes it lets through
// at once now, doubling with each success; none while closed.
func TestSnapshotProbesAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithHalfOpen(3, 4))
		b := bs.Get("k")
		if n := b.Snapshot().ProbesAllowed; n != 0 {
			t.Fatalf("closed: %d probes allowed, want 0", n)
		}
		b.Trip(time.Second)
		time.Sleep(time.Second)
		for i, want := range []int{3, 6, 12, 24} {
			if s := b.Snapshot(); s.ProbesAllowed != want || s.ProbeSuccesses != i {
				t.Fatalf("after %d successes: %d probes allowed (%d successes), want %d", i, s.ProbesAllowed, s.ProbeSuccesses, want)
			}
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(bw.Outcome{Category: bw.Success, Status: 200})
		}
		if s := b.Snapshot(); s.State != bw.StateClosed || s.ProbesAllowed != 0 {
			t.Fatalf("after 4 successes: %s with %d probes allowed, want closed with 0", s.StateName, s.ProbesAllowed)
		}
	})
}
