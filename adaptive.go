package breakwater

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// AdaptiveLimit is an algorithm that moves a bulkhead's limit: [AIMD] or
// [Gradient]. Both learn once per window of samples, a window being at
// least 10 released slots and at least as many as the current limit (about
// one round trip at full concurrency), and both keep the limit within
// their Min and Max.
type AdaptiveLimit interface {
	adaptive(initial int) (*adaptiveLimit, error)
}

// AIMD is an additive-increase, multiplicative-decrease limit, as TCP's
// congestion window: after a window in which some slot reported a drop
// ([Slot.Drop], or a latency above Timeout) the limit is multiplied by
// Backoff; after a window without drops in which at least half the limit
// was in use, it grows by Increase. As in TCP's fast recovery, the limit
// is cut at most once per round trip: samples of requests admitted before
// a cut are left out, since they report the load that caused it. Zero
// fields take their defaults.
type AIMD struct {
	// Min and Max bound the limit. Defaults: 1 and 10 times the initial
	// limit.
	Min, Max int
	// Increase is added after a good window. Default: 1.
	Increase float64
	// Backoff multiplies the limit after a window with drops; in (0, 1).
	// Default: 0.9.
	Backoff float64
	// Timeout, when positive, counts a slot held longer as a drop.
	Timeout time.Duration
}

// Gradient is a latency-based limit in the manner of Netflix's
// concurrency-limits Gradient2. Zero fields take their defaults. After
// each window, with short the mean latency of the window's samples and
// long the long-term (no-load) latency:
//
//	gradient = clamp(Tolerance × long / short, 0.5, 1)
//	newLimit = limit × gradient + QueueSize(limit)
//	limit    = limit × (1 − Smoothing) + newLimit × Smoothing, within [Min, Max]
//
// When the latency does not rise, the gradient is 1 and the limit grows by
// about Smoothing × QueueSize(limit) per window; when requests queue at
// the upstream, the latency rises and the gradient pulls the limit down.
// It settles where the upstream keeps about QueueSize(limit) requests
// queued: against an upstream that serves C requests at once and queues
// the rest (latency proportional to concurrency above C), near
// C + √(C + √C), 25 for C = 20; against one whose latency grows faster
// beyond C, closer to C.
//
// long is an exponentially weighted moving average over LongWindow windows
// of the windows that show no queueing (short at most 1.1 × long); a
// window faster than long counts as well, slower ones are left out.
// Gradient2 averages every window, so under sustained load the queueing
// delay the limit itself causes becomes the baseline and the limit drifts
// upward; leaving those windows out avoids the drift. long is measured
// afresh from the first window, whenever the limit is at Min, and by a
// probe: every ProbeInterval, if the last window showed queueing, the limit
// drops to max(Min, QueueSize(limit)) for one window of requests started
// after the drop, whose latency becomes long. The probe is how the limit
// follows an upstream that became slower for good.
//
// A window in which less than half the limit was in use does not grow
// the limit and adds no queue allowance (the load, not the upstream, set
// the latency); it may still shrink it. At exactly half, as for AIMD, it
// may grow. Drops
// ([Slot.Drop]) are left out of the latency mean, and a window with drops
// does not grow: its gradient is at most 0.9 and it adds no queue
// allowance.
type Gradient struct {
	// Min and Max bound the limit. Defaults: 1 and 10 times the initial
	// limit.
	Min, Max int
	// Smoothing weighs each window's new limit; in (0, 1]. Default: 0.2.
	Smoothing float64
	// Tolerance is how much slower than long a window may be before the
	// limit shrinks; at least 1. Default: 1.
	Tolerance float64
	// LongWindow is the number of windows long averages over. Default: 100.
	LongWindow int
	// ProbeInterval is the time between probes of the no-load latency; a
	// negative value disables probes. Default: 1 minute.
	ProbeInterval time.Duration
	// QueueSize is how many requests may queue at the upstream at a given
	// limit. Default: √limit.
	QueueSize func(limit float64) float64
}

// Defaults of the adaptive limits.
const (
	adaptiveMinWindow       = 10
	defaultAIMDBackoff      = 0.9
	defaultGradientSmooth   = 0.2
	defaultGradientLong     = 100
	defaultGradientProbe    = time.Minute
	gradientLearnBand       = 1.1
	gradientMinGradient     = 0.5
	gradientDroppedGradient = 0.9
)

const (
	kindAIMD = iota
	kindGradient
)

// adaptiveLimit is the state of an adaptive limit, guarded by mu.
type adaptiveLimit struct {
	kind     int
	aimd     AIMD
	grad     Gradient
	min, max float64
	initial  float64

	mu    sync.Mutex
	limit float64
	// the current window
	samples, rttN, drops, maxInFlight int
	rttSum                            int64
	// probeStart: samples of requests admitted earlier are left out while
	// probing (Gradient) or recovering from a cut (AIMD).
	probing               bool
	probeStart, nextProbe int64
	// Gradient
	long float64 // nanoseconds; 0 until the first window
}

func bounds(initial, lo, hi int) (float64, float64, error) {
	if lo == 0 {
		lo = 1
	}
	if hi == 0 {
		hi = max(initial, min(maxBulkheadLimit, 10*initial))
	}
	if lo < 1 || hi > maxBulkheadLimit || lo > initial || initial > hi {
		return 0, 0, fmt.Errorf("breakwater: adaptive limit needs 1 <= Min <= limit <= Max <= %d, got Min %d, limit %d, Max %d", maxBulkheadLimit, lo, initial, hi)
	}
	return float64(lo), float64(hi), nil
}

func (a AIMD) adaptive(initial int) (*adaptiveLimit, error) {
	if a.Increase == 0 {
		a.Increase = 1
	}
	if a.Backoff == 0 {
		a.Backoff = defaultAIMDBackoff
	}
	lo, hi, err := bounds(initial, a.Min, a.Max)
	var errs []error
	errs = append(errs, err)
	if !(a.Increase > 0) || math.IsInf(a.Increase, 0) {
		errs = append(errs, fmt.Errorf("breakwater: AIMD increase must be > 0, got %v", a.Increase))
	}
	if !(a.Backoff > 0 && a.Backoff < 1) {
		errs = append(errs, fmt.Errorf("breakwater: AIMD backoff must be in (0, 1), got %v", a.Backoff))
	}
	if a.Timeout < 0 {
		errs = append(errs, fmt.Errorf("breakwater: AIMD timeout must be >= 0, got %s", a.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &adaptiveLimit{kind: kindAIMD, aimd: a, min: lo, max: hi, initial: float64(initial), limit: float64(initial)}, nil
}

func (g Gradient) adaptive(initial int) (*adaptiveLimit, error) {
	if g.Smoothing == 0 {
		g.Smoothing = defaultGradientSmooth
	}
	if g.Tolerance == 0 {
		g.Tolerance = 1
	}
	if g.LongWindow == 0 {
		g.LongWindow = defaultGradientLong
	}
	if g.ProbeInterval == 0 {
		g.ProbeInterval = defaultGradientProbe
	}
	if g.QueueSize == nil {
		g.QueueSize = math.Sqrt
	}
	lo, hi, err := bounds(initial, g.Min, g.Max)
	var errs []error
	errs = append(errs, err)
	if !(g.Smoothing > 0 && g.Smoothing <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: gradient smoothing must be in (0, 1], got %v", g.Smoothing))
	}
	if !(g.Tolerance >= 1) || math.IsInf(g.Tolerance, 0) {
		errs = append(errs, fmt.Errorf("breakwater: gradient tolerance must be >= 1, got %v", g.Tolerance))
	}
	if g.LongWindow < 1 {
		errs = append(errs, fmt.Errorf("breakwater: gradient long window must be >= 1, got %d", g.LongWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &adaptiveLimit{kind: kindGradient, grad: g, min: lo, max: hi, initial: float64(initial), limit: float64(initial)}, nil
}

// sample records one released slot: admitted at start (bulkhead
// nanoseconds), released with inFlight slots held, dropped or not.
func (a *adaptiveLimit) sample(b *bulkhead, start int64, inFlight int, dropped bool) {
	now := b.now()
	rtt := now - start
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.probing && start < a.probeStart {
		return // admitted before the probe or the cut: it reports older load
	}
	if a.kind == kindAIMD && a.aimd.Timeout > 0 && rtt > int64(a.aimd.Timeout) {
		dropped = true
	}
	a.samples++
	a.maxInFlight = max(a.maxInFlight, inFlight)
	if dropped {
		a.drops++
	} else {
		a.rttSum += rtt
		a.rttN++
	}
	if a.samples < max(adaptiveMinWindow, int(a.limit)) {
		return
	}
	if a.kind == kindAIMD {
		a.updateAIMD(now)
	} else {
		a.updateGradient(now)
	}
	if math.IsNaN(a.limit) || math.IsInf(a.limit, 0) { // a QueueSize gone wrong
		a.limit = a.max
	}
	a.limit = min(a.max, max(a.min, a.limit))
	a.samples, a.rttN, a.drops, a.maxInFlight, a.rttSum = 0, 0, 0, 0, 0
	b.limit.Store(int64(a.limit))
}

func (a *adaptiveLimit) updateAIMD(now int64) {
	a.probing = false // this window holds only samples admitted after the last cut
	switch {
	case a.drops > 0:
		a.limit *= a.aimd.Backoff
		a.probing, a.probeStart = true, now
	case 2*float64(a.maxInFlight) >= a.limit:
		a.limit += a.aimd.Increase
	}
}

func (a *adaptiveLimit) updateGradient(now int64) {
	g := &a.grad
	gradient, queue := 1.0, g.QueueSize(a.limit)
	if a.rttN > 0 {
		short := float64(a.rttSum) / float64(a.rttN)
		switch {
		case a.long == 0 || a.probing || a.limit <= a.min:
			a.long, a.probing = short, false
		case short <= gradientLearnBand*a.long:
			a.long += (short - a.long) / float64(g.LongWindow)
		}
		gradient = min(1, max(gradientMinGradient, g.Tolerance*a.long/short))
	}
	if a.nextProbe == 0 {
		a.nextProbe = now + int64(g.ProbeInterval)
	}
	switch {
	case a.drops > 0:
		gradient, queue = min(gradient, gradientDroppedGradient), 0
	case 2*float64(a.maxInFlight) < a.limit:
		if gradient >= 1 {
			return // not enough load to learn from
		}
		queue = 0
	}
	next := a.limit*gradient + max(0, queue)
	a.limit = a.limit*(1-g.Smoothing) + next*g.Smoothing
	if g.ProbeInterval > 0 && now >= a.nextProbe {
		a.nextProbe = now + int64(g.ProbeInterval)
		if gradient < 1 {
			a.probing, a.probeStart = true, now
			a.limit = max(a.min, g.QueueSize(a.limit))
		}
	}
}
