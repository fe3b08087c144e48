package breakwater

import (
	"errors"
	"fmt"
	"time"
)

// DefaultWindowWithin is the counting window of a [Window] policy whose
// within is left to be sized automatically when there is no retry plan to
// size it from.
const DefaultWindowWithin = 10 * time.Second

type policyKind uint8

const (
	policyWindow policyKind = iota
	policyConsecutive
	policyFailureRate
)

// A Policy decides when failures open a breaker. Build one with [Window],
// [Consecutive] or [FailureRate]; the zero Policy is Window(10, auto).
// A Policy is a value: methods return modified copies.
type Policy struct {
	kind       policyKind
	tolerate   int
	within     time.Duration // 0: sized automatically
	threshold  int
	byCategory [numCategories]int
	ratio      float64
	minCalls   int
}

// Window opens the breaker on the (tolerate+1)-th failure counted within the
// sliding window: a failure at time t is counted at now while t > now-within.
// Successes never decrement the count. This is ExternalService's policy.
//
// within 0 sizes the window automatically: a [Transport] sizes it from its
// retry plan (twice the time tolerate failing calls take, at least 10 s) so
// that sequential failing calls can open it; a bare [Breakers] uses
// [DefaultWindowWithin].
func Window(tolerate int, within time.Duration) Policy {
	return Policy{kind: policyWindow, tolerate: tolerate, within: within}
}

// Consecutive opens the breaker on the n-th consecutive failure; any success
// resets the count. This is Lasso's and Prismatic's policy.
func Consecutive(n int) Policy {
	return Policy{kind: policyConsecutive, threshold: n}
}

// WithCategoryThreshold returns a copy of a [Consecutive] policy that opens
// when a failure of category c brings the running consecutive count to n,
// whatever categories the earlier failures had. For example Consecutive(5)
// with a Timeout threshold of 2 opens on server error, server error, timeout.
func (p Policy) WithCategoryThreshold(c Category, n int) Policy {
	if c < numCategories {
		p.byCategory[c] = n
	}
	return p
}

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

// String describes the policy, for example "window(tolerate=10, within=auto)".
func (p Policy) String() string {
	switch p.kind {
	case policyConsecutive:
		return fmt.Sprintf("consecutive(%d)", p.threshold)
	case policyFailureRate:
		return fmt.Sprintf("failure_rate(%.2f, min_calls=%d, within=%s)", p.ratio, p.minCalls, p.within)
	}
	w := "auto"
	if p.within > 0 {
		w = p.within.String()
	}
	return fmt.Sprintf("window(tolerate=%d, within=%s)", p.tolerate, w)
}

// Tolerate is the number of failures a [Window] policy absorbs without
// opening, or the threshold minus one for [Consecutive].
func (p Policy) Tolerate() int {
	if p.kind == policyConsecutive {
		return p.threshold - 1
	}
	return p.tolerate
}

// Within is the policy's counting window; 0 means sized automatically.
func (p Policy) Within() time.Duration { return p.within }

func (p Policy) validate() error {
	switch p.kind {
	case policyWindow:
		if p.tolerate < 0 {
			return fmt.Errorf("breakwater: Window tolerate must be >= 0, got %d", p.tolerate)
		}
		if p.within < 0 {
			return fmt.Errorf("breakwater: Window within must be >= 0, got %s", p.within)
		}
	case policyConsecutive:
		if p.threshold < 1 {
			return fmt.Errorf("breakwater: Consecutive threshold must be >= 1, got %d", p.threshold)
		}
		for c, n := range p.byCategory {
			if n < 0 {
				return fmt.Errorf("breakwater: category threshold for %s must be >= 0, got %d", Category(c), n)
			}
		}
	case policyFailureRate:
		if !(p.ratio > 0 && p.ratio <= 1) {
			return fmt.Errorf("breakwater: FailureRate ratio must be in (0, 1], got %v", p.ratio)
		}
		if p.minCalls < 1 {
			return fmt.Errorf("breakwater: FailureRate minCalls must be >= 1, got %d", p.minCalls)
		}
		if p.within <= 0 {
			return fmt.Errorf("breakwater: FailureRate within must be > 0, got %s", p.within)
		}
	default:
		return errors.New("breakwater: unknown policy")
	}
	if p.kind != policyConsecutive {
		for _, n := range p.byCategory {
			if n != 0 {
				return errors.New("breakwater: category thresholds apply only to the Consecutive policy")
			}
		}
	}
	return nil
}
