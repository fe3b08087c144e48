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
