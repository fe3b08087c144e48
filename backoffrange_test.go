package breakwater_test

import (
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Full jitter draws from the whole closed range [0, ceiling]: both ends
// come up, nothing beyond them does.
func TestExponentialJitterRangeIsClosed(t *testing.T) {
	for _, ceiling := range []time.Duration{time.Nanosecond, 3 * time.Nanosecond} {
		b := bw.ExponentialJitter(ceiling, ceiling)
		seen := map[time.Duration]bool{}
		for range 1000 {
			d := b.Delay(1, 0)
			if d < 0 || d > ceiling {
				t.Fatalf("ExponentialJitter(%s, %s) waited %s", ceiling, ceiling, d)
			}
			seen[d] = true
		}
		if !seen[0] || !seen[ceiling] {
			t.Fatalf("ExponentialJitter(%s, %s): 1000 draws gave %v, want both 0 and %s", ceiling, ceiling, seen, ceiling)
		}
	}
}

// Decorrelated jitter draws from [base, 3·prev] capped at the limit, and
// waits the limit when the limit is below the base.
func TestDecorrelatedJitterRange(t *testing.T) {
	const base = 100 * time.Millisecond
	b := bw.DecorrelatedJitter(base, time.Second)
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := b.Delay(2, 200*time.Millisecond)
		if d < base || d > 600*time.Millisecond {
			t.Fatalf("waited %s, want 100ms to 600ms", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("1000 draws gave %v: no jitter", seen)
	}
	if d := bw.DecorrelatedJitter(time.Second, 100*time.Millisecond).Delay(1, 0); d != 100*time.Millisecond {
		t.Fatalf("a limit below the base: waited %s, want the limit", d)
	}
}

// Decorrelated jitter reaches both ends of its range.
func TestDecorrelatedJitterRangeIsClosed(t *testing.T) {
	b := bw.DecorrelatedJitter(time.Nanosecond, time.Second) // [1ns, 3ns] on the first retry
	seen := map[time.Duration]bool{}
	for range 1000 {
		seen[b.Delay(1, 0)] = true
	}
	if len(seen) != 3 || !seen[1] || !seen[2] || !seen[3] {
		t.Fatalf("1000 draws gave %v, want 1ns, 2ns and 3ns", seen)
	}
}
