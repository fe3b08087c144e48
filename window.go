package breakwater

import (
	"math"
	"sync/atomic"
	"time"
)

// failureWindow holds the failures counted by a Window policy: a failure
// at t counts at now while t > now-within. Its memory does not grow with
// the policy's tolerate: up to windowExact failures it keeps each one's
// time; for a larger tolerate it counts failures in windowExact buckets of
// within/windowExact each, and a failure then counts for within to
// within·(1+1/windowExact) (never less than within). Guarded by
// Breaker.mu.
type failureWindow struct {
	slots   []windowSlot // ring: failure times, or buckets
	head, n int
	total   int   // failures in the ring
	width   int64 // bucket width; 0: exact times
}

// windowSlot is one failure (n == 1), or one bucket of failures starting at
// at.
type windowSlot struct{ at, n int64 }

// windowExact is the largest tolerate+1 whose failure times are kept
// exactly, and the number of buckets above it.
const windowExact = 32

func newFailureWindow(tolerate int, within time.Duration) failureWindow {
	if tolerate < windowExact {
		return failureWindow{slots: make([]windowSlot, tolerate+1)}
	}
	return failureWindow{slots: make([]windowSlot, windowExact+1), width: max(1, int64(within)/windowExact)}
}

// add records a failure at now and returns the count within the window.
func (w *failureWindow) add(now, within int64) int {
	w.expire(now, within)
	at := now
	if w.width > 0 {
		at -= now % w.width
		if w.n > 0 {
			if last := &w.slots[(w.head+w.n-1)%len(w.slots)]; last.at == at {
				last.n++
				w.total++
				return w.total
			}
		}
	}
	if w.n == len(w.slots) { // cannot happen while opening clears the window; keep the newest
		w.total -= int(w.slots[w.head].n)
		w.head = (w.head + 1) % len(w.slots)
		w.n--
	}
	w.slots[(w.head+w.n)%len(w.slots)] = windowSlot{at: at, n: 1}
	w.n++
	w.total++
	return w.total
}

func (w *failureWindow) expire(now, within int64) {
	for w.n > 0 && w.slots[w.head].at+w.width <= now-within {
		w.total -= int(w.slots[w.head].n)
		w.head = (w.head + 1) % len(w.slots)
		w.n--
	}
}

// live returns the count within the window at now.
func (w *failureWindow) live(now, within int64) int {
	w.expire(now, within)
	return w.total
}

func (w *failureWindow) clear() { w.head, w.n, w.total = 0, 0, 0 }

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
		if be := bk.epoch.Load(); be != 0 && be > e-rateBuckets && be <= e {
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

// shareWindow counts the failures of a Window policy with a ratio in
// rateBuckets buckets spanning the window, and the successes since the
// oldest failure still in it: the calls that the failing share is taken
// over. Successes are counted only while the window holds a failure
// (tracking), so that a healthy breaker records a success with one atomic
// load. Guarded by Breaker.mu, except ok and tracking.
type shareWindow struct {
	width    int64
	buckets  [rateBuckets]shareBucket
	ok       atomic.Int64 // successes counted while tracking; never reset
	tracking atomic.Bool
}

type shareBucket struct {
	epoch  int64 // bucket number + 1; 0 unused
	fails  int64
	okMark int64 // ok when the bucket's first failure was counted
}

// shareLowerBound is the lower end of the 95 % Wilson score interval of
// the failing share, fails of calls: the share a Window with a ratio
// compares, so that a burst of failures in a small sample is not taken
// for a sustained majority. It is 0.74 for 11 failures of 11 calls, 0.57
// for 5 of 5, and tends to fails/calls as the sample grows.
func shareLowerBound(fails, calls int64) float64 {
	if calls <= 0 {
		return 0
	}
	const z = 1.959964 // two-sided 95 %
	n := float64(calls)
	p := float64(fails) / n
	return (p + z*z/(2*n) - z*math.Sqrt(p*(1-p)/n+z*z/(4*n*n))) / (1 + z*z/n)
}

func newShareWindow(within time.Duration) *shareWindow {
	return &shareWindow{width: max(1, int64(within)/rateBuckets)}
}

// success counts a success; it reports true every 64th one counted, when
// the caller should check whether the window emptied (see quiet).
func (w *shareWindow) success() bool {
	return w.tracking.Load() && w.ok.Add(1)%64 == 0
}

// add counts a failure at now and returns the failures in the window and
// the calls made since the oldest of them.
func (w *shareWindow) add(now int64) (fails, calls int64) {
	e := now/w.width + 1
	if bk := &w.buckets[e%rateBuckets]; bk.epoch != e {
		*bk = shareBucket{epoch: e, okMark: w.ok.Load()}
	}
	w.buckets[e%rateBuckets].fails++
	w.tracking.Store(true)
	return w.live(now)
}

// live returns the failures in the window at now and the calls made since
// the oldest of them (failures included).
func (w *shareWindow) live(now int64) (fails, calls int64) {
	e := now/w.width + 1
	oldest, mark := int64(0), int64(0)
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bk.epoch > e-rateBuckets && bk.epoch <= e {
			fails += bk.fails
			if oldest == 0 || bk.epoch < oldest {
				oldest, mark = bk.epoch, bk.okMark
			}
		}
	}
	if fails == 0 {
		return 0, 0
	}
	return fails, fails + w.ok.Load() - mark
}

// quiet stops counting successes when no failure is left in the window.
func (w *shareWindow) quiet(now int64) {
	if f, _ := w.live(now); f == 0 {
		w.tracking.Store(false)
	}
}

func (w *shareWindow) clear() {
	w.buckets = [rateBuckets]shareBucket{}
	w.tracking.Store(false)
}
