package breakwater

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// defaultWindowWithin is the counting window of a [Window] policy whose
// within is left to be sized automatically when there is no retry plan to
// size it from.
const defaultWindowWithin = 10 * time.Second

// maxCount bounds every count a policy or a breaker option takes
// (tolerate, thresholds, minimum calls, probe successes).
const maxCount = 1 << 30

// maxProbes bounds the half-open probes in flight: a breaker keeps a lease
// for each.
const maxProbes = 1024

type policyKind uint8

const (
	policyWindow policyKind = iota
	policyConsecutive
	policyFailureRate
)

// A Policy decides when failures open a breaker. Build one with [Window],
// [Consecutive] or [FailureRate]; the zero Policy is Window(0, auto), and
// the breakers' default is the volume-aware
// Window(10, auto).WithRatio(0.5).WithCategoryThreshold(Timeout, 5) (see
// [WithPolicy]). A Policy is a value: methods return modified copies.
type Policy struct {
	kind       policyKind
	tolerate   int
	within     time.Duration // 0: sized automatically
	threshold  int
	byCategory [numCategories]int
	ratio      float64
	ratioSet   bool // WithRatio was called
	minCalls   int
}

// Window opens the breaker on the (tolerate+1)-th failure counted within the
// sliding window: a failure at time t is counted at now while t > now-within.
// Successes never decrement the count. This is the policy of the Elixir
// library [ExternalService], and its contract is exact: Window(10, …)
// opens on the 11th failing call whatever the call volume.
// [Policy.WithRatio] makes it volume-aware.
// tolerate is at most 1,073,741,824, and a breaker's memory does not grow with
// it: above 31 failures are counted in 32 buckets of within/32, and a
// failure then counts for up to within·33/32.
//
// within 0 sizes the window automatically: a [Transport] sizes it from its
// retry plan (twice the time tolerate failing calls take, at least 10 s) so
// that sequential failing calls can open it; a bare [Breakers] uses
// 10 s.
//
// [ExternalService]: https://hexdocs.pm/external_service/
func Window(tolerate int, within time.Duration) Policy {
	return Policy{kind: policyWindow, tolerate: tolerate, within: within}
}

// Consecutive opens the breaker on the n-th consecutive failure; any success
// resets the count: the classic circuit breaker's count.
func Consecutive(n int) Policy {
	return Policy{kind: policyConsecutive, threshold: n}
}

// WithCategoryThreshold returns a copy of a [Consecutive] or [Window]
// policy that opens when a failure of category c brings the count (of
// consecutive failures, or of failures within the window) to n, whatever
// categories the earlier failures had, as the per-category thresholds of
// [Lasso] do. For example Consecutive(5) with a Timeout threshold of 2
// opens on server error, server error, timeout.
//
// [Lasso]: https://docs.lasso.sh/
func (p Policy) WithCategoryThreshold(c Category, n int) Policy {
	if c < numCategories {
		p.byCategory[c] = n
	}
	return p
}

// WithRatio returns a copy of a [Window] policy that also needs the failing
// calls to be at least the fraction r (0 < r <= 1) of the calls made since
// the oldest failure still in the window, with 95 % confidence (the lower
// bound of the Wilson score interval, so that a burst of failures among
// few calls is not taken for a majority): a volume-aware window, which a
// failure rate that retries absorb never opens however many calls fail in
// absolute terms, while a total outage opens it on the (tolerate+1)-th
// failing call as before (11 failures of 11 calls are a share of at least
// 0.74). r = 0 is the plain Window. Its memory does not grow with
// tolerate, and a healthy breaker counts a success with one atomic load:
// successes are counted only while a failure is in the window.
func (p Policy) WithRatio(r float64) Policy {
	p.ratio = r
	p.ratioSet = true
	return p
}

// defaultPolicy is the breakers' default (see WithPolicy): opens on the
// 11th failing call within the window (the 5th when it is a timeout: hangs
// are learned sooner), once at least half of the calls made since the
// first of them failed, beyond chance.
var defaultPolicy = Window(10, 0).WithRatio(0.5).WithCategoryThreshold(Timeout, 5)

// FailureRate opens the breaker when, over the sliding window within, at
// least minCalls outcomes were recorded and the failing fraction is at least
// ratio (0 < ratio <= 1). The threshold is checked after every outcome
// recorded, so the success that completes minCalls can open it too.
func FailureRate(ratio float64, minCalls int, within time.Duration) Policy {
	return Policy{kind: policyFailureRate, ratio: ratio, minCalls: minCalls, within: within}
}

// rateTrips reports whether a FailureRate window holding calls outcomes,
// fails of them failures, opens the breaker.
func (p *Policy) rateTrips(calls, fails int64) bool {
	return fails > 0 && calls >= int64(p.minCalls) && float64(fails) >= p.ratio*float64(calls)
}

// String describes the policy, for example "window(tolerate=10,
// within=auto)" or, for the default,
// "window(tolerate=10, within=auto, ratio=0.50, timeout=5)".
func (p Policy) String() string {
	var b strings.Builder
	switch p.kind {
	case policyConsecutive:
		fmt.Fprintf(&b, "consecutive(%d", p.threshold)
	case policyFailureRate:
		return fmt.Sprintf("failure_rate(%.2f, min_calls=%d, within=%s)", p.ratio, p.minCalls, p.within)
	default:
		w := "auto"
		if p.within > 0 {
			w = p.within.String()
		}
		fmt.Fprintf(&b, "window(tolerate=%d, within=%s", p.tolerate, w)
		if p.ratio > 0 {
			fmt.Fprintf(&b, ", ratio=%.2f", p.ratio)
		}
	}
	for c, n := range p.byCategory {
		if n > 0 {
			fmt.Fprintf(&b, ", %s=%d", Category(c), n)
		}
	}
	b.WriteString(")")
	return b.String()
}

func (p Policy) validate() error {
	switch p.kind {
	case policyWindow:
		if p.tolerate < 0 || p.tolerate > maxCount {
			return fmt.Errorf("breakwater: Window tolerate must be in [0, %d], got %d", maxCount, p.tolerate)
		}
		if p.within < 0 {
			return fmt.Errorf("breakwater: Window within must be >= 0, got %s", p.within)
		}
		if !(p.ratio >= 0 && p.ratio <= 1) {
			return fmt.Errorf("breakwater: Window ratio must be in [0, 1], got %v", p.ratio)
		}
	case policyConsecutive:
		if p.threshold < 1 || p.threshold > maxCount {
			return fmt.Errorf("breakwater: Consecutive threshold must be in [1, %d], got %d", maxCount, p.threshold)
		}
	case policyFailureRate:
		if !(p.ratio > 0 && p.ratio <= 1) {
			return fmt.Errorf("breakwater: FailureRate ratio must be in (0, 1], got %v", p.ratio)
		}
		if p.minCalls < 1 || p.minCalls > maxCount {
			return fmt.Errorf("breakwater: FailureRate minCalls must be in [1, %d], got %d", maxCount, p.minCalls)
		}
		if p.within <= 0 {
			return fmt.Errorf("breakwater: FailureRate within must be > 0, got %s", p.within)
		}
	default:
		return errors.New("breakwater: unknown policy")
	}
	if p.ratioSet && p.kind != policyWindow {
		return errors.New("breakwater: WithRatio applies only to the Window policy")
	}
	for c, n := range p.byCategory {
		switch {
		case n < 0 || n > maxCount:
			return fmt.Errorf("breakwater: category threshold for %s must be in [0, %d], got %d", Category(c), maxCount, n)
		case n > 0 && p.kind == policyFailureRate:
			return errors.New("breakwater: category thresholds apply only to the Consecutive and Window policies")
		}
	}
	return nil
}
