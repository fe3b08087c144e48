package breakwater_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// simFailure is a way for an upstream to fail, both as a scripted step
// for a real transport and as a Scenario for Simulate.
type simFailure struct {
	name     string
	step     breakwatertest.Step
	category bw.Category
}

var simFailures = []simFailure{
	{"500", breakwatertest.Step{Status: http.StatusInternalServerError}, bw.ServerError},
	{"hang", breakwatertest.Step{Hang: true}, bw.Timeout},
	{"429", breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}, bw.Throttled},
}

// Simulate runs the transport's own breaker and charging: for every policy
// and option mix, the call that opens the breaker in a simulated outage
// is the call that opens it on a real transport over a failing upstream,
// after as many requests, and Explain says so.
func TestSimulateMatchesTransport(t *testing.T) {
	policies := []struct {
		name string
		opts []bw.Option
	}{
		{"default policy", nil},
		{"window 3", []bw.Option{bw.WithPolicy(bw.Window(3, 0))}},
		{"window 0", []bw.Option{bw.WithPolicy(bw.Window(0, 0))}},
		{"window 4 within 3s", []bw.Option{bw.WithPolicy(bw.Window(4, 3*time.Second))}},
		{"consecutive 5", []bw.Option{bw.WithPolicy(bw.Consecutive(5))}},
		{"consecutive 5, server errors 2", []bw.Option{bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.ServerError, 2))}},
		{"consecutive 5, timeouts 2", []bw.Option{bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.Timeout, 2))}},
		{"failure rate 0.5 over 4", []bw.Option{bw.WithPolicy(bw.FailureRate(0.5, 4, 10*time.Second))}},
		{"consecutive 3, throttled counted", []bw.Option{bw.WithPolicy(bw.Consecutive(3)), bw.WithCountAsFailure(bw.Throttled)}},
		{"shadow mode", []bw.Option{bw.WithPolicy(bw.Consecutive(2)), bw.WithShadowMode(true)}},
	}
	mixes := []struct {
		name string
		opts []bw.Option
	}{
		{"1 attempt", []bw.Option{bw.WithMaxAttempts(1)}},
		{"3 attempts", []bw.Option{bw.WithMaxAttempts(3)}},
		{"3 attempts, no budget", []bw.Option{bw.WithMaxAttempts(3), bw.WithoutRetryBudget()}},
		{"4 attempts per attempt", []bw.Option{bw.WithMaxAttempts(4), bw.WithChargePerAttempt(true)}},
		{"3 attempts, short call timeout", []bw.Option{bw.WithMaxAttempts(3), bw.WithCallTimeout(450 * time.Millisecond)}},
		{"3 attempts, no pause gate", []bw.Option{bw.WithMaxAttempts(3), bw.WithoutPauseGate()}},
	}
	compared := 0
	for _, p := range policies {
		for _, m := range mixes {
			for _, f := range simFailures {
				name := fmt.Sprintf("%s/%s/%s", p.name, m.name, f.name)
				opts := append([]bw.Option{
					bw.WithBackoff(bw.Constant(100 * time.Millisecond)),
					bw.WithAttemptTimeout(200 * time.Millisecond),
					// Simulate's open durations have no jitter: without it,
					// which of a Retry-After wait and an open duration of the
					// same length ends first is decided, not drawn.
					bw.WithOpenTimeout(time.Minute, time.Minute), bw.WithOpenJitter(0),
				}, append(p.opts, m.opts...)...)
				compared++
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						compareWithTransport(t, opts, f)
					})
				})
			}
		}
	}
	t.Logf("%d configurations compared", compared)
}

// compareWithTransport runs up to 40 calls, one after another, through a
// real transport over an upstream that fails as f says, and checks that
// Simulate finds the same opening call after the same number of requests.
func compareWithTransport(t *testing.T, opts []bw.Option, f simFailure) {
	const maxCalls = 40
	sim, err := bw.NewTransport(opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Simulate(bw.Scenario{Failure: f.category, MaxCalls: maxCalls})

	u := breakwatertest.NewPipeUpstream(t, f.step)
	tr := newTransport(t, u.Transport(), opts...)
	opened := 0
	for n := 1; n <= maxCalls && opened == 0; n++ {
		get(tr)
		if tr.Breakers().Get(upstreamKey).State() == bw.StateOpen {
			opened = n
		}
	}
	if opened != want.OpensAfter || u.Count() != want.Attempts {
		t.Fatalf("the transport opened on call %d after %d requests; Simulate says call %d after %d", opened, u.Count(), want.OpensAfter, want.Attempts)
	}
	explained := sim.Explain()
	if opened != 0 && f.category == bw.ServerError && !strings.Contains(explained, fmt.Sprintf("opens on call %d ", opened)) {
		t.Fatalf("Explain does not say the breaker opens on call %d:\n%s", opened, explained)
	}
}

// The drift that made Simulate re-implement the breaker wrong: a
// Consecutive(5) policy with a server-error threshold of 2 opens on the
// second failing call, and both Simulate and Explain say so.
func TestSimulateCategoryThreshold(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.ServerError, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.Simulate(bw.Scenario{}); r.OpensAfter != 2 {
		t.Fatalf("Simulate: opens on call %d, want 2", r.OpensAfter)
	}
	if e := tr.Explain(); !strings.Contains(e, "opens on call 2 ") || !strings.Contains(e, "2 for a server_error") {
		t.Fatalf("Explain:\n%s", e)
	}
}

// A timeline run: several callers for a fixed time, through an outage and
// a recovery, observed event by event.
func TestSimulateTimeline(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithPolicy(bw.Consecutive(5)), bw.WithOpenTimeout(2*time.Second, 8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		starts, ends, attempts, transitions int
		lastAt                              time.Duration
		states                              []string
	)
	r := tr.Simulate(bw.Scenario{
		Callers: 4, Think: 100 * time.Millisecond, AttemptTime: 20 * time.Millisecond,
		HealthyFor: 5 * time.Second, FailFor: 10 * time.Second, Duration: 30 * time.Second,
		Observe: func(at time.Duration, e bw.Event) {
			if at < lastAt {
				t.Fatalf("event at %s after one at %s", at, lastAt)
			}
			lastAt = at
			switch e.Kind {
			case bw.EventCallStart:
				starts++
			case bw.EventCallEnd:
				ends++
			case bw.EventAttempt:
				attempts++
			case bw.EventTransition:
				transitions++
				states = append(states, fmt.Sprintf("%s@%s", e.Transition.To, at.Round(100*time.Millisecond)))
			}
		},
	})
	if r.Elapsed != 30*time.Second || r.Calls != starts || r.Attempts-attempts > r.Unfinished || ends != r.Succeeded+r.Failed+r.Rejected || starts-ends != r.Unfinished {
		t.Fatalf("result %+v; events: %d starts, %d ends, %d attempts", r, starts, ends, attempts)
	}
	if r.OpenedAt < 5*time.Second || r.OpenedAt > 6*time.Second {
		t.Errorf("opened at %s, want soon after the outage began at 5s", r.OpenedAt)
	}
	if len(states) < 4 || !strings.HasPrefix(states[len(states)-1], "closed@") {
		t.Errorf("transitions %v: want an opening, probes, and a close after the recovery at 15s", states)
	}
	if r.Rejected == 0 || r.Succeeded == 0 {
		t.Errorf("result %+v: want rejections while open and successes around the outage", r)
	}
}

// A hang that nothing bounds never ends: Simulate says so instead of
// looping.
func TestSimulateUnboundedHang(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithCallTimeout(0), bw.WithAttemptTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	r := tr.Simulate(bw.Scenario{Failure: bw.Timeout})
	if r.Calls != 1 || r.Unfinished != 1 || r.OpensAfter != 0 {
		t.Fatalf("%+v: want one call that never ends", r)
	}
}

// Callers with no think time, refused at once by an open breaker, still
// let virtual time advance: a simulation bounded by a Duration ends.
func TestSimulateDurationWithoutThinkTimeEnds(t *testing.T) {
	tr, err := bw.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	// Before the fix this call never returned.
	r := tr.Simulate(bw.Scenario{Callers: 4, FailFor: 20 * time.Second, Duration: 30 * time.Second})
	if r.OpensAfter == 0 || r.Rejected == 0 || r.Elapsed < 30*time.Second {
		t.Fatalf("%+v: want the breaker open, rejections, and 30s simulated", r)
	}
}

// strictRun simulates four callers against a strict limiter of 10/s for
// a minute and counts, over its last 30 s, the requests served and the
// 429s answered.
func strictRun(t *testing.T, opts ...bw.Option) (served, throttled int, r bw.SimResult) {
	t.Helper()
	tr, err := bw.NewTransport(opts...)
	if err != nil {
		t.Fatal(err)
	}
	r = tr.Simulate(bw.Scenario{Failure: bw.Throttled, Limit: 10, Callers: 4, Duration: time.Minute, Observe: func(at time.Duration, e bw.Event) {
		if e.Kind != bw.EventAttempt || at < 30*time.Second {
			return
		}
		switch e.Status {
		case 200:
			served++
		case 429:
			throttled++
		}
	}})
	return served, throttled, r
}

// A strict limiter's rate is learned in the simulation as by the
// transport (TestStrictLimiter): once learned, the upstream serves at
// least 250 of its 300 requests in 30 s and answers few 429s; without the
// pause gate, the callers get mostly 429s.
func TestSimulateStrictLimiter(t *testing.T) {
	served, throttled, r := strictRun(t)
	t.Logf("defaults: %d served, %d 429s in the last 30s; %+v", served, throttled, r)
	if served < 250 || throttled > 10 {
		t.Errorf("%d served and %d 429s in 30s, want at least 250 and at most 10", served, throttled)
	}
	bs, bt, _ := strictRun(t, bw.WithoutPauseGate())
	t.Logf("without a pause gate: %d served, %d 429s in the last 30s", bs, bt)
	if bt <= throttled {
		t.Errorf("without a pause gate %d 429s, with it %d: the learned rate spared none", bt, throttled)
	}
}
