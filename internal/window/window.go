// Package window holds the sliding windows that breakwater counts in: the
// failures of a breaker's Window policy (Failures), two counts over a
// sliding window of buckets (Rate: calls and failures, calls and retries),
// and a Window policy's failing share (Share). They know nothing of what
// they count. Failures and Share are guarded by their owner's lock; Rate is
// lock-free.
package window

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// Failures holds the failures counted by a Window policy: a failure at t
// counts at now while t > now-within. Its memory does not grow with the
// policy's tolerate: up to 32 failures it keeps each one's time; for a
// larger tolerate it counts failures in 32 buckets of within/32 each, and a
// failure then counts for within to within·(1+1/32) (never less than
// within). It is guarded by its owner's lock.
type Failures struct {
	slots   []slot // ring: failure times, or buckets
	head, n int
	total   int   // failures in the ring
	width   int64 // bucket width; 0: exact times
}

// slot is one failure (n == 1), or one bucket of failures starting at
// at.
type slot struct{ at, n int64 }

// exact is the largest tolerate+1 whose failure times are kept
// exactly, and the number of buckets above it.
const exact = 32

// NewFailures returns the window of a Window policy of tolerate and within.
func NewFailures(tolerate int, within time.Duration) Failures {
	if tolerate < exact {
		return Failures{slots: make([]slot, tolerate+1)}
	}
	return Failures{slots: make([]slot, exact+1), width: max(1, int64(within)/exact)}
}

// Add records a failure at now and returns the count within the window.
func (w *Failures) Add(now, within int64) int {
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
	w.slots[(w.head+w.n)%len(w.slots)] = slot{at: at, n: 1}
	w.n++
	w.total++
	return w.total
}

func (w *Failures) expire(now, within int64) {
	for w.n > 0 && w.slots[w.head].at+w.width <= now-within {
		w.total -= int(w.slots[w.head].n)
		w.head = (w.head + 1) % len(w.slots)
		w.n--
	}
}

// Live returns the count within the window at now.
func (w *Failures) Live(now, within int64) int {
	w.expire(now, within)
	return w.total
}

// Clear forgets every failure.
func (w *Failures) Clear() { w.head, w.n, w.total = 0, 0, 0 }

// Rate counts two quantities (calls and failures, or calls and
// retries) in Buckets buckets spanning a sliding window. Updates are lock-free; a bucket is recycled
// by the first writer that finds it holding an older epoch.
type Rate struct {
	width   int64
	buckets []bucket
}

// Buckets is the number of buckets of a Rate and a Share.
const Buckets = 10

type bucket struct {
	epoch atomic.Int64 // bucket number + 1; 0 unused
	calls atomic.Int64
	fails atomic.Int64
}

// NewRate returns a Rate of Buckets buckets spanning within.
func NewRate(within time.Duration) Rate {
	return Rate{width: max(1, int64(within)/Buckets), buckets: make([]bucket, Buckets)}
}

// recycling marks a bucket whose counts are being zeroed for a new epoch;
// Sum skips it and Add waits for the new epoch.
const recycling = math.MinInt64

// Add adds calls and fails to the bucket of now. A bucket holding an older
// epoch is recycled first: marked, zeroed, then given now's epoch, so an
// addition made for the new epoch is never zeroed by the recycling. An
// addition for an epoch older than the bucket's goes to the newer one.
func (r *Rate) Add(now int64, calls, fails int64) {
	e := now/r.width + 1
	bk := &r.buckets[e%Buckets]
	for {
		old := bk.epoch.Load()
		if old >= e {
			break
		}
		if old == recycling {
			runtime.Gosched()
			continue
		}
		if bk.epoch.CompareAndSwap(old, recycling) {
			bk.calls.Store(0)
			bk.fails.Store(0)
			bk.epoch.Store(e)
			break
		}
	}
	if calls != 0 {
		bk.calls.Add(calls)
	}
	if fails != 0 {
		bk.fails.Add(fails)
	}
}

// Sum returns the totals of the buckets inside the window at now.
func (r *Rate) Sum(now int64) (calls, fails int64) {
	e := now/r.width + 1
	for i := range r.buckets {
		bk := &r.buckets[i]
		if be := bk.epoch.Load(); be != 0 && be > e-Buckets && be <= e {
			calls += bk.calls.Load()
			fails += bk.fails.Load()
		}
	}
	return calls, fails
}

// Clear forgets every count.
func (r *Rate) Clear() {
	for i := range r.buckets {
		r.buckets[i].epoch.Store(0)
	}
}

// Share counts the failures of a Window policy with a ratio in
// Buckets buckets spanning the window, and the successes since the
// oldest failure still in it: the calls that the failing share is taken
// over. Successes are counted only while the window holds a failure
// (tracking), so that a healthy breaker records a success with one atomic
// load. It is guarded by its owner's lock, except Success.
type Share struct {
	width    int64
	buckets  [Buckets]shareBucket
	ok       atomic.Int64 // successes counted while tracking; never reset
	tracking atomic.Bool
}

type shareBucket struct {
	epoch  int64 // bucket number + 1; 0 unused
	fails  int64
	okMark int64 // ok when the bucket's first failure was counted
}

// LowerBound is the lower end of the 95 % Wilson score interval of
// the failing share, fails of calls: the share a Window with a ratio
// compares, so that a burst of failures in a small sample is not taken
// for a sustained majority. It is 0.74 for 11 failures of 11 calls, 0.57
// for 5 of 5, and tends to fails/calls as the sample grows.
func LowerBound(fails, calls int64) float64 {
	if calls <= 0 {
		return 0
	}
	const z = 1.959964 // two-sided 95 %
	n := float64(calls)
	p := float64(fails) / n
	return (p + z*z/(2*n) - z*math.Sqrt(p*(1-p)/n+z*z/(4*n*n))) / (1 + z*z/n)
}

// NewShare returns a Share of Buckets buckets spanning within.
func NewShare(within time.Duration) *Share {
	return &Share{width: max(1, int64(within)/Buckets)}
}

// Success counts a success; it reports true every 64th one counted, when
// the caller should check whether the window emptied (see Quiet).
func (w *Share) Success() bool {
	return w.tracking.Load() && w.ok.Add(1)%64 == 0
}

// Add counts a failure at now and returns the failures in the window and
// the calls made since the oldest of them.
func (w *Share) Add(now int64) (fails, calls int64) {
	e := now/w.width + 1
	if bk := &w.buckets[e%Buckets]; bk.epoch != e {
		*bk = shareBucket{epoch: e, okMark: w.ok.Load()}
	}
	w.buckets[e%Buckets].fails++
	w.tracking.Store(true)
	return w.Live(now)
}

// Live returns the failures in the window at now and the calls made since
// the oldest of them (failures included).
func (w *Share) Live(now int64) (fails, calls int64) {
	e := now/w.width + 1
	oldest, mark := int64(0), int64(0)
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bk.epoch > e-Buckets && bk.epoch <= e {
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

// Quiet stops counting successes when no failure is left in the window.
func (w *Share) Quiet(now int64) {
	if f, _ := w.Live(now); f == 0 {
		w.tracking.Store(false)
	}
}

// Clear forgets every count and stops counting successes.
func (w *Share) Clear() {
	w.buckets = [Buckets]shareBucket{}
	w.tracking.Store(false)
}

// Holds reports whether an addition made at at is still counted at now,
// with a bucket to spare: a count taken back (a refund) must come out of the
// bucket it went into.
func (r *Rate) Holds(now, at int64) bool { return now-at < r.width*(Buckets-1) }
