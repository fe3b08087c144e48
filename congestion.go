package breakwater

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// congestion is a key's overload control, on in a Transport by default
// (see [WithoutCongestionLimit]): a limit on the attempts in flight to the
// key that the upstream's latency sets, and only while the latency says
// requests queue there. A healthy upstream, however variable its latency,
// is never limited: the limit engages when the median time to an answer
// of a window of attempts is more than congestionTolerance times the
// key's usual median, which queueing does (every request waits for those
// ahead of it) and a slow answer here and there does not (a median of
// congestionWindow answers hardly moves). Engaged, it follows the
// gradient of Netflix's concurrency-limits and [Gradient]: after each
// window, limit × min(1, tolerance × usual / median), at most halving;
// windows without queueing grow it by √limit, and two such windows using
// under half of it end it. A limit that fell to congestionRelearn attempts
// takes the window's median as the usual one: so few in flight do not
// queue, so an upstream that became slower for good is followed.
//
// It counts attempts from their sending to their answer (the response's
// header), and learns from answers and from attempts that ran into a
// deadline (the time they waited is a lower bound of the answer's);
// errors before an answer and cancellations teach it nothing. The count
// and the check are two atomic loads and adds per attempt; every
// congestionWindow answers, one of them sorts the window under mu.
type congestion struct {
	// state counts the attempts in flight in its low 32 bits and the
	// samples recorded above them: an answer that is a sample changes
	// both with one atomic add.
	state atomic.Uint64
	limit atomic.Int64 // attempts that may be in flight; 0: no limit
	peak  atomic.Int64 // the most attempts in flight in the window
	ring  [congestionWindow]atomic.Int64

	mu       sync.Mutex // the window's closer: guards the fields below
	low, med float64    // the usual low quantile and median, nanoseconds; 0 until the first window
	engaged  int        // windows since the limit engaged
	suspect  bool       // the last window queued, the limit not engaged
}

const (
	congestionWindow    = 32  // answers per window
	congestionTolerance = 4   // a median this many times the usual one is queueing
	congestionLearn     = 1.1 // windows up to this many times the usual median teach it
	congestionLong      = 20  // the usual median averages over about as many windows
	congestionMinLimit  = 20  // the least the limit falls to, Netflix Gradient2's minimum
	congestionRelearn   = 200 // windows of a limit after which queueing becomes the usual
	// congestionFloor: shorter answers count as this long, so that the
	// scheduling noise of fast answers is not taken for queueing.
	congestionFloor = time.Millisecond
)

// flightOf is the attempts in flight that a state counts.
func flightOf(state uint64) int64 { return int64(uint32(state)) }

// admits reports whether another attempt may be sent now.
func (g *congestion) admits() bool {
	lim := g.limit.Load()
	return lim == 0 || flightOf(g.state.Load()) < lim
}

// send counts an attempt sent.
func (g *congestion) send() {
	if n := flightOf(g.state.Add(1)); n > g.peak.Load() {
		g.peak.Store(n) // a race may lose a peak: a window's estimate
	}
}

// answered counts the end of an attempt sent d ago, and records d when
// sample: an answer, or a deadline that came first.
func (g *congestion) answered(d time.Duration, sample bool) {
	if !sample {
		g.state.Add(^uint64(0)) // flight − 1
		return
	}
	i := g.state.Add(1<<32-1) >> 32 // samples + 1, flight − 1
	g.ring[i%congestionWindow].Store(int64(d))
	if i%congestionWindow == 0 && g.mu.TryLock() {
		g.update()
		g.mu.Unlock()
	}
}

// update moves the limit after a window; g.mu is held.
func (g *congestion) update() {
	var s [congestionWindow]int64
	for i := range s {
		s[i] = max(g.ring[i].Load(), int64(congestionFloor))
	}
	slices.Sort(s[:])
	low, med := float64(s[congestionWindow/8]), float64(s[congestionWindow/2])
	lim, peak := g.limit.Load(), g.peak.Swap(flightOf(g.state.Load()))
	queued := g.med != 0 && low > congestionTolerance*g.low && med > congestionTolerance*g.med
	switch {
	case g.med == 0, queued && peak < congestionMinLimit, queued && g.engaged >= congestionRelearn:
		// The first window; or the latency rose while this process kept
		// few attempts in flight (not its queue: an upstream that became
		// slower, or someone else's load); or a limit held that long did
		// not bring it down.
		g.low, g.med, g.engaged, g.suspect = low, med, 0, false
		g.limit.Store(0)
		return
	case queued && lim == 0 && !g.suspect:
		g.suspect = true // engage on the second window in a row: chance does not repeat itself
		return
	case queued:
		g.suspect = false
		base := peak
		if lim > 0 {
			base = min(lim, peak)
		}
		gradient := max(0.5, congestionTolerance*g.med/med)
		g.limit.Store(max(congestionMinLimit, int64(float64(base)*gradient)))
		g.engaged++
		return
	}
	g.suspect = false
	learn(&g.low, low)
	learn(&g.med, med)
	if lim == 0 {
		return
	}
	g.engaged++
	if 2*peak < lim {
		g.limit.Store(0) // the load fell below half the limit
		g.engaged = 0
		return
	}
	g.limit.Store(lim + max(1, int64(math.Sqrt(float64(lim)))))
}

// learn moves the usual value *v of a quantile toward a window's x, unless
// x is slower than the usual by more than congestionLearn: a window with
// queueing must not become the usual.
func learn(v *float64, x float64) {
	if x <= congestionLearn**v {
		*v += (x - *v) / congestionLong
	}
}
