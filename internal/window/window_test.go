package window

import (
	"testing"
	"time"
)

// TestClearedRateWindowCountsNothing: a cleared window is empty even in the
// first window length after its start, when a bucket's cleared epoch (0)
// still falls inside the window.
func TestClearedRateWindowCountsNothing(t *testing.T) {
	w := NewRate(10 * time.Second)
	now := int64(time.Second)
	w.Add(now, 5, 3)
	w.Clear()
	if calls, fails := w.Sum(now); calls != 0 || fails != 0 {
		t.Fatalf("after clear: %d calls, %d failures", calls, fails)
	}
	w.Add(now, 1, 1)
	if calls, fails := w.Sum(now); calls != 1 || fails != 1 {
		t.Fatalf("after clear and one add: %d calls, %d failures", calls, fails)
	}
}
