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

// Up to a tolerate of 31 the failure times are exact; from 32 they are
// counted in buckets of within/32, and a failure counts until its bucket
// has left the window.
func TestFailuresExactUpTo31(t *testing.T) {
	const s = int64(time.Second)
	within := 32 * s
	for _, tc := range []struct {
		tolerate int
		want     int
	}{{31, 0}, {32, 1}} {
		w := NewFailures(tc.tolerate, time.Duration(within))
		w.Add(s/2, within)
		// 0.5 s is out of a window that ends at 32.6 s - 32 s = 0.6 s; its
		// bucket [0, 1 s) is not.
		if got := w.Live(32*s+6*s/10, within); got != tc.want {
			t.Errorf("tolerate %d: %d failures in the window, want %d", tc.tolerate, got, tc.want)
		}
	}
}

// A ring that fills up (the breaker did not open and clear it) keeps the
// newest failures, oldest first out.
func TestFailuresFullRingKeepsTheNewest(t *testing.T) {
	const s = int64(time.Second)
	within := 100 * s
	w := NewFailures(2, time.Duration(within)) // 3 slots
	for i := int64(1); i <= 5; i++ {
		if got := w.Add(i*s, within); got != min(int(i), 3) {
			t.Fatalf("failure %d: %d counted", i, got)
		}
	}
	// The ring holds 3, 4 and 5 s: at 103.5 s the one at 3 s has left.
	if got := w.Live(103*s+s/2, within); got != 2 {
		t.Errorf("%d failures after the oldest kept left, want 2", got)
	}
	if got := w.Add(103*s+6*s/10, within); got != 3 {
		t.Errorf("%d failures after one more, want 3", got)
	}
}

// Success reports every 64th success while failures are tracked, and
// counts nothing otherwise.
func TestShareSuccessEvery64th(t *testing.T) {
	w := NewShare(10 * time.Second)
	for range 100 {
		if w.Success() {
			t.Fatal("a success reported with no failure tracked")
		}
	}
	w.Add(0)
	for i := 1; i <= 128; i++ {
		if got, want := w.Success(), i%64 == 0; got != want {
			t.Fatalf("success %d reported %v", i, got)
		}
	}
}

// A bucket reused by a later window starts from zero, and the calls of a
// share are counted from the oldest failure still in the window, whatever
// the successes before it.
func TestShareCountsFromTheOldestFailure(t *testing.T) {
	const s = int64(time.Second)
	w := NewShare(10 * time.Second) // buckets of 1 s
	w.Add(s / 2)
	for range 3 {
		w.Success()
	}
	// The failure leaves; the next one lands in the same bucket, 10 s on.
	w.Quiet(11 * s)
	if f, c := w.Add(10*s + s/2); f != 1 || c != 1 {
		t.Fatalf("a failure in a reused bucket: %d of %d calls, want 1 of 1", f, c)
	}
	for range 2 {
		w.Success()
	}
	if f, c := w.Add(13 * s); f != 2 || c != 4 {
		t.Errorf("two failures with two successes between: %d of %d calls, want 2 of 4", f, c)
	}
}

// Holds measures the age of an addition, wherever the clock started.
func TestRateHoldsAtAnyTime(t *testing.T) {
	const s = int64(time.Second)
	r := NewRate(10 * time.Second)
	if !r.Holds(20*s, 15*s) || r.Holds(24*s, 15*s) {
		t.Error("an addition at 15 s is held until 24 s, with a bucket to spare")
	}
}
