package breakwater_test

import (
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// maxCount is the documented bound of every count a policy takes.
const maxCount = 1 << 30

// Every bound of every policy's parameters, on both sides: the last value
// rejected and the first accepted.
func TestPolicyBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		p    bw.Policy
		ok   bool
	}{
		{"FailureRate ratio 0", bw.FailureRate(0, 10, time.Minute), false},
		{"FailureRate ratio just above 0", bw.FailureRate(1e-9, 10, time.Minute), true},
		{"FailureRate ratio 1", bw.FailureRate(1, 10, time.Minute), true},
		{"FailureRate ratio just above 1", bw.FailureRate(1+1e-9, 10, time.Minute), false},
		{"FailureRate ratio negative", bw.FailureRate(-0.5, 10, time.Minute), false},
		{"FailureRate minCalls 0", bw.FailureRate(0.5, 0, time.Minute), false},
		{"FailureRate minCalls 1", bw.FailureRate(0.5, 1, time.Minute), true},
		{"FailureRate within 0", bw.FailureRate(0.5, 10, 0), false},
		{"FailureRate within 1ns", bw.FailureRate(0.5, 10, time.Nanosecond), true},
		{"Window tolerate -1", bw.Window(-1, time.Minute), false},
		{"Window tolerate 0", bw.Window(0, time.Minute), true},
		{"Window within -1ns", bw.Window(1, -time.Nanosecond), false},
		{"Window within 0 (auto)", bw.Window(1, 0), true},
		{"Consecutive 0", bw.Consecutive(0), false},
		{"Consecutive 1", bw.Consecutive(1), true},
		{"category threshold -1", bw.Consecutive(3).WithCategoryThreshold(bw.Timeout, -1), false},
		{"category threshold 0", bw.Consecutive(3).WithCategoryThreshold(bw.Timeout, 0), true},
		{"category threshold on FailureRate", bw.FailureRate(0.5, 10, time.Minute).WithCategoryThreshold(bw.Timeout, 1), false},
		// The upper bounds: every count is at most 1,073,741,824.
		{"Window tolerate at the maximum", bw.Window(maxCount, time.Minute), true},
		{"Window tolerate over the maximum", bw.Window(maxCount+1, time.Minute), false},
		{"Window ratio -1e-9", bw.Window(1, 0).WithRatio(-1e-9), false},
		{"Window ratio 0", bw.Window(1, 0).WithRatio(0), true},
		{"Window ratio 1", bw.Window(1, 0).WithRatio(1), true},
		{"Window ratio just above 1", bw.Window(1, 0).WithRatio(1 + 1e-9), false},
		{"Consecutive at the maximum", bw.Consecutive(maxCount), true},
		{"Consecutive over the maximum", bw.Consecutive(maxCount + 1), false},
		{"FailureRate minCalls at the maximum", bw.FailureRate(0.5, maxCount, time.Minute), true},
		{"FailureRate minCalls over the maximum", bw.FailureRate(0.5, maxCount+1, time.Minute), false},
		{"category threshold at the maximum", bw.Consecutive(3).WithCategoryThreshold(bw.Timeout, maxCount), true},
		{"category threshold over the maximum", bw.Consecutive(3).WithCategoryThreshold(bw.Timeout, maxCount+1), false},
	} {
		_, err := bw.NewBreakers(bw.WithPolicy(c.p))
		if (err == nil) != c.ok {
			t.Errorf("%s (%s): error %v, want ok=%v", c.name, c.p, err, c.ok)
		}
	}
}

// A category threshold for a category that does not exist is ignored, not a
// crash.
func TestCategoryThresholdOutOfRange(t *testing.T) {
	n := len(bw.Categories())
	for _, c := range []bw.Category{bw.Category(n), bw.Category(n + 1), 255} {
		p := bw.Consecutive(3).WithCategoryThreshold(c, 1)
		if p != bw.Consecutive(3) {
			t.Errorf("a threshold for category %d changed the policy: %s", c, p)
		}
	}
}

func TestPolicyString(t *testing.T) {
	for _, c := range []struct {
		p    bw.Policy
		want string
	}{
		{bw.Window(10, 0), "window(tolerate=10, within=auto)"},
		{bw.Window(3, time.Minute), "window(tolerate=3, within=1m0s)"},
		{bw.Consecutive(5), "consecutive(5)"},
		{bw.FailureRate(0.5, 20, 10*time.Second), "failure_rate(0.50, min_calls=20, within=10s)"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}
