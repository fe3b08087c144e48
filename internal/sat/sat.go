// Package sat is saturating arithmetic on durations and monotonic clock
// readings: configured durations may be as long as math.MaxInt64, and a
// sum or product that overflows must stay at the end of time, never wrap
// round to the past.
package sat

import (
	"math"
	"time"
)

// Add returns a+b, saturating at math.MaxInt64 and math.MinInt64.
func Add(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// Mul returns d·n for n >= 0, saturating at math.MaxInt64 for d >= 0.
func Mul(d time.Duration, n int64) time.Duration {
	if d <= 0 || n <= 0 {
		return d * time.Duration(n)
	}
	if d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// Frac returns d·f for 0 <= f, saturating at math.MaxInt64.
func Frac(d time.Duration, f float64) time.Duration {
	x := float64(d) * f
	if !(x < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(x)
}

// SecondsCeil converts seconds to a Duration, rounding up to the
// nanosecond and saturating instead of overflowing.
func SecondsCeil(s float64) time.Duration {
	ns := math.Ceil(s * float64(time.Second))
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(max(0, ns))
}
