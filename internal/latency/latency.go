// Package latency keeps a bounded record of recent durations and answers
// quantile queries over it: the observed latency that an adaptive hedge
// delay is derived from.
//
// A [Tracker] is a log-linear histogram (four buckets per power of two,
// from 16 µs to 137 s, so a quantile is located to within a quarter of an
// octave and interpolated inside it) over two rotating time windows: a
// query sees the durations recorded in the current window and the one
// before it, between one and two window lengths of history. Its memory is
// fixed (under 1 KiB) whatever the traffic, and recording is a few atomic
// operations without locks or allocations.
package latency

import (
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	minShift = 14 // durations below 2^14 ns (16.4 µs) share the first bucket
	maxShift = 37 // durations from 2^37 ns (137 s) on share the last
	subBits  = 2  // 2^subBits buckets per power of two
	nBuckets = (maxShift-minShift)<<subBits + 2
)

// Tracker records durations and reports their quantiles. The zero value is
// not usable; build one with [New]. A Tracker is safe for concurrent use.
//
// Time is passed in by the caller as nanoseconds on any monotonic scale
// (time since a fixed start), so that a Tracker needs no clock of its own.
type Tracker struct {
	width int64 // window length, ns
	wins  [2]window
}

type window struct {
	epoch  atomic.Int64 // window number + 1; 0 never used
	counts [nBuckets]atomic.Uint32
}

// New returns a Tracker whose queries cover the last one to two lengths of
// window (at least 1 ms).
func New(window time.Duration) *Tracker {
	return &Tracker{width: max(int64(window), int64(time.Millisecond))}
}

// Record adds one duration observed at now. Negative durations count as
// zero. It does not allocate.
//
// A window is cleared by the first recorder that finds it holding an older
// epoch; a duration recorded by another goroutine at that same instant may
// be lost, which a quantile over thousands of durations does not notice.
func (t *Tracker) Record(now int64, d time.Duration) {
	e := now/t.width + 1
	w := &t.wins[e&1]
	if old := w.epoch.Load(); old != e && w.epoch.CompareAndSwap(old, e) {
		for i := range w.counts {
			w.counts[i].Store(0)
		}
	}
	w.counts[bucket(int64(d))].Add(1)
}

// Count returns how many durations a query at now would see.
func (t *Tracker) Count(now int64) int {
	var n int
	e := now/t.width + 1
	for i := range t.wins {
		w := &t.wins[i]
		if ep := w.epoch.Load(); ep == e || ep == e-1 {
			for j := range w.counts {
				n += int(w.counts[j].Load())
			}
		}
	}
	return n
}

// Quantile returns the q-quantile (0 < q < 1) of the durations recorded in
// the current and the previous window at now, interpolated linearly inside
// its bucket, and false when fewer than minCount durations were recorded.
// It does not allocate.
func (t *Tracker) Quantile(now int64, q float64, minCount int) (time.Duration, bool) {
	var sum [nBuckets]uint64
	var n uint64
	e := now/t.width + 1
	for i := range t.wins {
		w := &t.wins[i]
		if ep := w.epoch.Load(); ep != e && ep != e-1 {
			continue
		}
		for j := range w.counts {
			c := uint64(w.counts[j].Load())
			sum[j] += c
			n += c
		}
	}
	if n == 0 || n < uint64(max(minCount, 1)) {
		return 0, false
	}
	q = min(max(q, 0), 1)
	rank := q * float64(n)
	var cum float64
	last := 0
	for i, c := range sum {
		if c == 0 {
			continue
		}
		last = i
		next := cum + float64(c)
		if next >= rank {
			lo, hi := bounds(i)
			frac := (rank - cum) / float64(c)
			return time.Duration(float64(lo) + frac*float64(hi-lo)), true
		}
		cum = next
	}
	_, hi := bounds(last) // rounding left the rank above the total
	return time.Duration(hi), true
}

// bucket returns the bucket of a duration of d nanoseconds.
func bucket(d int64) int {
	switch {
	case d < 1<<minShift:
		return 0
	case d >= 1<<maxShift:
		return nBuckets - 1
	}
	s := bits.Len64(uint64(d)) - 1 // 2^s <= d < 2^(s+1)
	sub := int(d>>(s-subBits)) & (1<<subBits - 1)
	return 1 + (s-minShift)<<subBits + sub
}

// bounds returns the durations a bucket covers, [lo, hi). The last bucket,
// unbounded, is given the width of the one before it.
func bounds(i int) (lo, hi int64) {
	switch {
	case i == 0:
		return 0, 1 << minShift
	case i == nBuckets-1:
		return 1 << maxShift, 1<<maxShift + 1<<(maxShift-subBits)
	}
	i--
	s := i>>subBits + minShift
	lo = 1<<s + int64(i&(1<<subBits-1))<<(s-subBits)
	return lo, lo + 1<<(s-subBits)
}
