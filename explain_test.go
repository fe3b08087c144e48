package breakwater_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

func TestSimulate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []bw.Option
		s        bw.Scenario
		opens    int
		calls    int
		attempts int
	}{
		{"tolerate 10, 5 attempts", []bw.Option{bw.WithMaxAttempts(5), bw.WithPolicy(bw.Window(10, 0))}, bw.Scenario{}, 11, 11, 55},
		{"tolerate 10, 2 attempts", []bw.Option{bw.WithMaxAttempts(2), bw.WithPolicy(bw.Window(10, 0))}, bw.Scenario{}, 11, 11, 22},
		{"per attempt", []bw.Option{bw.WithMaxAttempts(5), bw.WithChargePerAttempt(true), bw.WithPolicy(bw.Window(10, 0)), bw.WithOpenTimeout(5*time.Second, time.Minute)}, bw.Scenario{}, 3, 3, 11},
		{"tolerate 3, 5 attempts", []bw.Option{bw.WithMaxAttempts(5), bw.WithPolicy(bw.Window(3, 0))}, bw.Scenario{}, 4, 4, 20},
		{"consecutive 5", []bw.Option{bw.WithPolicy(bw.Consecutive(5))}, bw.Scenario{}, 5, 5, 15},
		{"recovers in time", nil, bw.Scenario{FailFor: 100 * time.Millisecond, MaxCalls: 50}, 0, 50, 51},
		{"default, total outage", nil, bw.Scenario{}, 11, 11, 33},
		{"default, retried flap", nil, bw.Scenario{FailureRate: 0.3, Seed: 1, MaxCalls: 1000}, 0, 1000, -1},
		{"default, 60 % of calls failing", []bw.Option{bw.WithMaxAttempts(1)}, bw.Scenario{FailureRate: 0.6, Seed: 1, MaxCalls: 1000}, -1, -1, -1},
		{"slow but fine", nil, bw.Scenario{AttemptTime: 5 * time.Second, HealthyFor: time.Hour, MaxCalls: 20}, 0, 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := bw.NewTransport(append(tc.opts, bw.WithoutRetryBudget())...)
			if err != nil {
				t.Fatal(err)
			}
			r := tr.Simulate(tc.s)
			if tc.opens < 0 && r.OpensAfter > 0 { // opens, somewhere
				tc.opens, tc.calls = r.OpensAfter, r.Calls
			}
			if tc.attempts < 0 {
				tc.attempts = r.Attempts
			}
			t.Logf("%+v", r)
			if r.OpensAfter != tc.opens || r.Calls != tc.calls || r.Attempts != tc.attempts {
				t.Fatalf("%+v, want opens after %d, %d calls, %d attempts", r, tc.opens, tc.calls, tc.attempts)
			}
		})
	}
}

// The simulation agrees with the real transport on the measured contract;
// TestMeltsOncePerExhaustedCall runs the same configuration for real.
func TestSimulateAgreesWithTransport(t *testing.T) {
	tr, _ := bw.NewTransport(bw.WithMaxAttempts(5), bw.WithoutRetryBudget(), bw.WithPolicy(bw.Window(10, 0)))
	if r := tr.Simulate(bw.Scenario{}); r.OpensAfter != 11 {
		t.Fatalf("simulated opening on call %d; the transport opens on call 11", r.OpensAfter)
	}
}

// Explain spells out a configuration with its defaults resolved.
func ExampleTransport_Explain() {
	tr, _ := bw.NewTransport()
	fmt.Print(tr.Explain())
	// Output:
	// breakwater.Transport
	//   retry
	//     attempts         up to 3
	//     delays           up to 100ms, 200ms (jittered below that), never shorter than a Retry-After; a 502's first retry at once
	//     idempotency      GET, HEAD, OPTIONS, TRACE, PUT, DELETE and requests with an Idempotency-Key; others only when provably unsent
	//     sent once        a POST, PATCH or other method without an Idempotency-Key, unless provably unsent: not idempotent (WithRetryNonIdempotent is off)
	//     sent once        a body without GetBody: not replayable (WithBodyBuffering is off)
	//     retry budget     20% of calls + 3/s per key over 10s; a retry that succeeds is given back
	//     call timeout     30s
	//     attempt timeout  10s
	//   circuit breaker
	//     opens after      11 failures within 10s (5 for a timeout), if at least 50% of the calls since the first of them failed
	//     full outage      opens on call 11 of a single caller, 408ms in (simulated)
	//     charged          once per call that gives up, as its attempts showed
	//     probes           an opening lasts 100ms while the outage is young (its first 3.2s), then 1/32 of its age, at most 60s (from 32m on): a 60s outage is probed every 1.9s, a 10m one every 18.8s; jitter shortens each opening by up to 10%
	//     half-open        1 probe, doubling per success up to 1024, closes after 2 successes (probes at once: 1, 2); a call finding the probes taken waits for an answer up to 1/4 of its time left, at most 1s
	//   pause gate
	//     429              pauses the host for its hint (at most 120s); the calls held leave one probe first, then spread out
	//     learned rate     a strict limiter's rate is learned: a 429 less than a hint after a pause ended, with a success since, paces the host at 1 request per hint (1/s for a 1s hint), doubling per round of successes (slow start) until a 429; then a ceiling halfway between the last two rates, the rate climbing to 97% of it; each later 429 sets the ceiling to the last rate answered and cuts the rate to 90% of it; forgotten 30s after the last 429
	//     strict limiter   one of 10/s answering 429 + a 1s hint beyond it serves 8.8/s from 30s on, with 3 429s in the next 30s (simulated, 4 callers)
	//     503 + hint       delays that call's retry; holds the host only while such answers are the majority (at least 2 in 1s), with a probe every 175ms while the hold is young (its first 5.6s), then 1/32 of its age, at most 60s; the held calls then leave in one line, earliest deadline first, a little over twice as fast as they came
	//     quota fields     paced on (RateLimit, RateLimit-Policy, X-RateLimit-*)
	//   limits
	//     congestion       engages when the median and the low quantile of a key's last 32 answers are both over 4 times their usual, twice in a row, with at least 20 in flight: the attempts in flight are then held to what they were, cut as the median rises (at most halved per 32 answers, never below 20) and grown by its square root when it falls; an attempt over it is refused at once; ends when under half of it is used
	//   across replicas
	//     rate limit       none
	//     pauses           this replica's own
	//     breaker trips    this replica's own
	//   a fully failing call
	//     waits            up to 300ms between attempts
	//     takes            at most 30s (the call timeout)
}

// Simulate answers "when does my breaker open in a total outage?" before
// any traffic flows.
func ExampleTransport_Simulate() {
	tr, _ := bw.NewTransport(bw.WithMaxAttempts(4), bw.WithPolicy(bw.Window(5, 0)))
	r := tr.Simulate(bw.Scenario{AttemptTime: 50 * time.Millisecond})
	fmt.Printf("opens on call %d after %d attempts and %s; the slowest call took %s\n", r.OpensAfter, r.Attempts, r.Elapsed, r.WorstCall)
	// Output: opens on call 6 after 9 attempts and 1.15s; the slowest call took 900ms
}

// Explain describes the rate and concurrency limits a transport has, and
// how long each waits.
func TestExplainLimits(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithRateLimit(10, 5), bw.WithConcurrencyLimit(4, bw.WithMaxWait(0)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rate limit       10/s with a burst of 5 per key, a token per attempt; waits up to 5s for one, within the call's deadline",
		"concurrency      4 in flight per key, a slot per attempt; refused at once when there is none",
	} {
		if !strings.Contains(tr.Explain(), want) {
			t.Errorf("Explain lacks %q:\n%s", want, tr.Explain())
		}
	}
	if tr, _ := bw.NewTransport(bw.WithoutCongestionLimit()); strings.Contains(tr.Explain(), "  limits\n") {
		t.Errorf("Explain shows limits a transport does not have:\n%s", tr.Explain())
	}
	if tr, _ := bw.NewTransport(); !strings.Contains(tr.Explain(), "    congestion       engages when") {
		t.Errorf("Explain lacks the default congestion limit:\n%s", tr.Explain())
	}
}

// Explain calls a backoff's delays jittered only when they are: a constant
// or linear backoff waits exactly its delays.
func TestExplainDelays(t *testing.T) {
	for _, tc := range []struct {
		b    bw.Backoff
		want string
	}{
		{bw.Constant(250 * time.Millisecond), "delays           250ms, 250ms, never shorter than a Retry-After"},
		{bw.Linear(100*time.Millisecond, 100*time.Millisecond, time.Second), "delays           100ms, 200ms, never shorter than a Retry-After"},
		{bw.ExponentialJitter(100*time.Millisecond, time.Second), "delays           up to 100ms, 200ms (jittered below that)"},
		{bw.BackoffFunc(func(int, time.Duration) time.Duration { return time.Second }), "delays           up to 1s, 1s (the longest of 64 draws)"},
	} {
		tr, err := bw.NewTransport(bw.WithBackoff(tc.b))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(tr.Explain(), tc.want) {
			t.Errorf("Explain lacks %q:\n%s", tc.want, tr.Explain())
		}
	}
}

// simRun is everything a simulation reports: its result and its events.
func simRun(tr *bw.Transport, s bw.Scenario) string {
	var b strings.Builder
	s.Observe = func(at time.Duration, e bw.Event) {
		fmt.Fprintf(&b, "%s %s %d %s %s %v\n", at, e.Kind, e.Attempt, e.Category, e.Mechanism, e.Err)
	}
	fmt.Fprintf(&b, "%+v\n", tr.Simulate(s))
	return b.String()
}

// Under fault injection, and with a failure rate, the same transport,
// scenario and seed give the same simulation, event for event; the seed
// is what the draws come from.
func TestSimulateIsDeterministic(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithFaultInjection(0.25))
	if err != nil {
		t.Fatal(err)
	}
	s := bw.Scenario{FailureRate: 0.5, Seed: 7, Callers: 3, Duration: time.Minute}
	first := simRun(tr, s)
	for range 5 {
		if again := simRun(tr, s); again != first {
			t.Fatalf("the same simulation twice differs:\n%s\nthen\n%s", first, again)
		}
	}
	// Another transport of the same configuration simulates alike.
	tr2, err := bw.NewTransport(bw.WithFaultInjection(0.25))
	if err != nil {
		t.Fatal(err)
	}
	if again := simRun(tr2, s); again != first {
		t.Fatal("two transports of one configuration simulate differently")
	}
	// Fault injection alone draws from the seed too.
	seen := map[string]bool{}
	for seed := range uint64(20) {
		seen[simRun(tr, bw.Scenario{Seed: seed, HealthyFor: time.Hour, MaxCalls: 50})] = true
	}
	if len(seen) < 2 {
		t.Fatal("20 seeds gave one simulation: the seed is not used")
	}
}

// Explain says the same on every call, under fault injection and with a
// random backoff function that has no MaxDelay.
func TestExplainIsDeterministic(t *testing.T) {
	random := bw.BackoffFunc(func(n int, _ time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(time.Second))) })
	for _, opts := range [][]bw.Option{
		{bw.WithFaultInjection(0.25)},
		{bw.WithFaultInjection(0.5), bw.WithPolicy(bw.Consecutive(3))},
		{bw.WithBackoff(random), bw.WithMaxAttempts(4)},
	} {
		tr, err := bw.NewTransport(opts...)
		if err != nil {
			t.Fatal(err)
		}
		first := tr.Explain()
		for range 20 {
			if again := tr.Explain(); again != first {
				t.Fatalf("Explain differs between two calls:\n%s\nthen\n%s", first, again)
			}
		}
	}
}

// Explain states the probe cadence, the half-open ramp and the learned
// rate in the numbers of the transport's own configuration.
func TestExplainCadenceRampAndPacing(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithOpenTimeout(time.Second, 10*time.Second), bw.WithHalfOpen(2, 9), bw.WithOpenJitter(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"probes           an opening lasts 1s while the outage is young (its first 32s), then 1/32 of its age, at most 10s (from 5m20s on): a 60s outage is probed every 1.9s, a 10m one every 10s\n",
		"half-open        2 probes, doubling per success up to 1024, closes after 9 successes (probes at once: 2, 4, 8, 16, 32, 64, …)",
		"learned rate     a strict limiter's rate is learned: ",
		"strict limiter   one of 10/s answering 429 + a 1s hint beyond it serves ",
	} {
		if !strings.Contains(tr.Explain(), want) {
			t.Errorf("Explain lacks %q:\n%s", want, tr.Explain())
		}
	}
	tr, err = bw.NewTransport(bw.WithOpenTimeout(time.Second, time.Second), bw.WithoutPauseGate())
	if err != nil {
		t.Fatal(err)
	}
	if want := "an opening lasts 1s, whatever the outage's age; jitter shortens each opening by up to 10%"; !strings.Contains(tr.Explain(), want) {
		t.Errorf("Explain lacks %q:\n%s", want, tr.Explain())
	}
	if strings.Contains(tr.Explain(), "strict limiter") {
		t.Errorf("Explain simulates a strict limiter without a pause gate:\n%s", tr.Explain())
	}
}
