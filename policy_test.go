package breakwater_test

import (
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

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
