package stacks

import (
	"fmt"
	"net/http"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
)

// Bare is the base transport alone, for the tail-latency baseline.
func Bare(base http.RoundTripper) Stack {
	return Stack{Name: "bare", Config: "a clone of http.DefaultTransport, nothing else", RoundTripper: closer{rt: base.RoundTrip, base: base}}
}

// FailsafeHedge is failsafehttp's RoundTripper with failsafe-go's hedge
// policy. With delay > 0 it hedges once after that fixed delay, with no
// budget (NewWithDelay, as its documentation shows it); otherwise after the
// recent 90th percentile of execution times (NewBuilderWithDelayQuantile(0.9,
// 1000, 20), the age and threshold its documentation suggests), with a
// budget of at most 10 % hedges among executions in flight (budget's
// WithMaxRate(0.1), default minimum concurrency 3): the settings closest to
// breakwater's default hedging.
func FailsafeHedge(base http.RoundTripper, delay time.Duration) Stack {
	if delay > 0 {
		hp := hedgepolicy.NewWithDelay[*http.Response](delay)
		return Stack{
			Name:         "failsafe-go-fixed",
			Config:       fmt.Sprintf("failsafehttp.NewRoundTripper(hedgepolicy.NewWithDelay(%s)): one hedge after %s, no budget", delay, delay),
			RoundTripper: closer{rt: failsafehttp.NewRoundTripper(base, hp).RoundTrip, base: base},
		}
	}
	hp := hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](0.9, 1000, 20).
		WithBudget(budget.NewBuilder().WithMaxRate(0.1).Build()).
		Build()
	return Stack{
		Name:         "failsafe-go",
		Config:       "failsafehttp.NewRoundTripper(hedgepolicy.NewBuilderWithDelayQuantile(0.9, 1000, 20).WithBudget(budget.NewBuilder().WithMaxRate(0.1).Build())): one hedge after the moving p90 of execution times, once 20 were seen; hedges at most 10 % of executions in flight (at least 3 allowed)",
		RoundTripper: closer{rt: failsafehttp.NewRoundTripper(base, hp).RoundTrip, base: base},
	}
}

// BreakwaterHedge is breakwater's default Transport with hedging: with
// delay > 0 a fixed delay and a budget of 1 (a hedge for every call that
// needs one, like failsafe-go's fixed-delay policy, which has no budget);
// otherwise Hedging{} (the key's recent p92, at least 1 ms, at most 10 %
// extra requests).
func BreakwaterHedge(base http.RoundTripper, delay time.Duration) (Stack, error) {
	h := bw.Hedging{}
	name, cfg := "breakwater", "NewTransport defaults + WithHedging(Hedging{}): one hedge after the key's recent p92 of first attempts (at least 1 ms, once 20 were seen), at most 10 % extra requests per key over 10 s, and the retry budget"
	if delay > 0 {
		h = bw.Hedging{Delay: delay, Budget: 1}
		name = "breakwater-fixed"
		cfg = fmt.Sprintf("NewTransport defaults + WithHedging(Hedging{Delay: %s, Budget: 1}): one hedge after %s, no hedge budget (the retry budget still applies)", delay, delay)
	}
	t, err := bw.NewTransport(bw.WithBase(base), bw.WithHedging(h))
	if err != nil {
		return Stack{}, err
	}
	return Stack{Name: name, Config: cfg, RoundTripper: t}, nil
}
