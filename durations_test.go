package breakwater_test

import (
	"errors"
	"math"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Durations near math.MaxInt64 saturate instead of wrapping to the past.
func TestDurationsNearMaxInt64Saturate(t *testing.T) {
	t.Run("Trip", func(t *testing.T) {
		bs := newBreakers(t)
		bs.Get("k").Trip(math.MaxInt64)
		if s := bs.Get("k").State(); s != bw.StateOpen {
			t.Fatalf("Trip(MaxInt64) left the breaker %s", s)
		}
		if _, err := bs.Get("k").Allow(); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Fatalf("Trip(MaxInt64) admits: %v", err)
		}
	})
	t.Run("Pause", func(t *testing.T) {
		for _, max := range []time.Duration{0, math.MaxInt64} {
			var opts []bw.Option
			if max > 0 {
				opts = append(opts, bw.WithMaxRetryAfter(max))
			}
			g, err := bw.NewPauseGates(opts...)
			if err != nil {
				t.Fatal(err)
			}
			g.Pause("k", math.MaxInt64)
			if pauseLeft(g, "k") <= 0 {
				t.Errorf("max pause %s: Pause(MaxInt64) did not pause", max)
			}
		}
	})
	t.Run("open timeout doubling", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(1<<61, math.MaxInt64), bw.WithHalfOpen(1, 2))
		bs.Get("k").RecordFailure(bw.ServerError)
		for opens := 1; opens <= 70; opens++ {
			if s := bs.Get("k").State(); s != bw.StateOpen {
				t.Fatalf("after opening %d times the breaker is %s", opens, s)
			}
			bs.Get("k").RecordSuccess() // open → half-open, one success of two
			bs.Get("k").RecordFailure(bw.ServerError)
		}
	})
}
