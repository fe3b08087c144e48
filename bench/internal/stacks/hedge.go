package stacks

import (
	"fmt"
	"net/http"
	"time"

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
