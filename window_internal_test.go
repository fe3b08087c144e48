package breakwater

import (
	"testing"
	"time"
)

// TestClearedRateWindowCountsNothing: a cleared window is empty even in the
// first window length after its start, when a bucket's cleared epoch (0)
// still falls inside the window.
func TestClearedRateWindowCountsNothing(t *testing.T) {
	w := newRateWindow(10 * time.Second)
	now := int64(time.Second)
	w.add(now, 5, 3)
	w.clear()
	if calls, fails := w.sum(now); calls != 0 || fails != 0 {
		t.Fatalf("after clear: %d calls, %d failures", calls, fails)
	}
	w.add(now, 1, 1)
	if calls, fails := w.sum(now); calls != 1 || fails != 1 {
		t.Fatalf("after clear and one add: %d calls, %d failures", calls, fails)
	}
}
