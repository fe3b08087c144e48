package breakwater

import (
	"sync/atomic"
	"time"
)

// failureWindow holds the times of the failures counted by a Window policy:
// a failure at t counts at now while t > now-within. Guarded by Breaker.mu.
type failureWindow struct {
	times   []int64 // ring, capacity tolerate+1
	head, n int
}

// add records a failure at now and returns the count within the window.
func (w *failureWindow) add(now, within int64) int {
	w.expire(now, within)
	if w.n == len(w.times) { // cannot happen while opening clears the window; keep the newest
		w.head = (w.head + 1) % len(w.times)
		w.n--
	}
	w.times[(w.head+w.n)%len(w.times)] = now
	w.n++
	return w.n
}

func (w *failureWindow) expire(now, within int64) {
	for w.n > 0 && w.times[w.head] <= now-within {
		w.head = (w.head + 1) % len(w.times)
		w.n--
	}
}

// live returns the count within the window at now.
func (w *failureWindow) live(now, within int64) int {
	w.expire(now, within)
	return w.n
}

func (w *failureWindow) clear() { w.head, w.n = 0, 0 }

// rateWindow counts two quantities (calls and failures, or calls and
// retries) in rateBuckets buckets spanning a sliding window. Updates are lock-free; a bucket is recycled
// by the first writer that finds it holding an older epoch.
type rateWindow struct {
	width   int64
	buckets []rateBucket
}

const rateBuckets = 10

type rateBucket struct {
	epoch atomic.Int64 // bucket number + 1; 0 unused
	calls atomic.Int64
	fails atomic.Int64
}

func newRateWindow(within time.Duration) rateWindow {
	return rateWindow{width: max(1, int64(within)/rateBuckets), buckets: make([]rateBucket, rateBuckets)}
}

// add adds calls and fails to the bucket of now.
func (r *rateWindow) add(now int64, calls, fails int64) {
	e := now/r.width + 1
	bk := &r.buckets[e%rateBuckets]
	if old := bk.epoch.Load(); old != e && bk.epoch.CompareAndSwap(old, e) {
		bk.calls.Store(0)
		bk.fails.Store(0)
	}
	if calls != 0 {
		bk.calls.Add(calls)
	}
	if fails != 0 {
		bk.fails.Add(fails)
	}
}

// sum returns the totals of the buckets inside the window at now.
func (r *rateWindow) sum(now int64) (calls, fails int64) {
	e := now/r.width + 1
	for i := range r.buckets {
		bk := &r.buckets[i]
		if be := bk.epoch.Load(); be > e-rateBuckets && be <= e {
			calls += bk.calls.Load()
			fails += bk.fails.Load()
		}
	}
	return calls, fails
}

func (r *rateWindow) clear() {
	for i := range r.buckets {
		r.buckets[i].epoch.Store(0)
	}
}
