package breakwater

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/latency"
	"github.com/breakwater-go/breakwater/internal/window"
)

// Hedging configures hedged requests, the cure for tail latency of "The
// Tail at Scale" (Dean and Barroso) and Finagle's backup requests: when an
// attempt of a call that may be repeated has not answered after a delay, a
// copy of the request is sent and whichever answers first is taken.
//
// The zero value is a sound configuration: hedge after the key's recent
// 92nd percentile of attempt latency (never before 1 ms), at most one hedge
// per call, at most 10 % extra requests per key. See [WithHedging].
type Hedging struct {
	// Delay is how long an attempt runs before a hedge is sent. With
	// Percentile zero and Delay set, the delay is fixed. With a
	// percentile, Delay is the floor under the observed delay; zero means
	// 1 ms.
	Delay time.Duration
	// Percentile, in (0, 100), derives the delay from the latencies of the
	// key's recent first attempts (the last 10 to 20 s; an attempt that
	// lost a race counts with the time it ran): a hedge is sent when an
	// attempt has run longer than that percentile of them. No hedge is
	// sent until 20 attempts have been seen. Zero with Delay set means a
	// fixed delay; zero with Delay zero means 100·(1 − 0.8·Budget), the
	// 92nd percentile by default. Finagle's BackupRequestFilter derives
	// its percentile from its maxExtraLoad in the same way; the 0.8 leaves
	// a fifth of the budget for bursts, so that the slowest calls, the
	// ones hedging is for, are not the ones the budget refuses.
	Percentile float64
	// MaxHedges is the most hedges one call sends; zero means 1. Hedges
	// are attempts: they count toward the call's maximum attempts.
	MaxHedges int
	// Budget is the most extra requests hedges may add per key, as a
	// fraction of the key's hedgeable calls over the last 10 s, as
	// Finagle's maxExtraLoad. Zero means 0.1; it may not exceed 1.
	Budget float64
}

// Defaults of hedging. They are documented on [Hedging].
const (
	defaultHedgeBudget = 0.1
	defaultHedgeFloor  = time.Millisecond
	hedgeWindow        = 10 * time.Second       // latency and budget windows
	hedgeMinSamples    = 20                     // latencies seen before an adaptive delay
	hedgeRefresh       = 250 * time.Millisecond // how often an adaptive delay is recomputed
	budgetShare        = 0.8                    // of the budget a default percentile spends
)

// hedging is a validated [Hedging].
type hedging struct {
	delay     time.Duration // fixed delay, or the floor under an adaptive one
	q         float64       // quantile in (0, 1); 0 for a fixed delay
	maxHedges int
	budget    float64
}

// resolve validates h and fills in its defaults.
func (h Hedging) resolve() (hedging, error) {
	var errs []error
	if h.Delay < 0 {
		errs = append(errs, fmt.Errorf("breakwater: hedge delay must be >= 0, got %s", h.Delay))
	}
	if !(h.Percentile >= 0 && h.Percentile < 100) {
		errs = append(errs, fmt.Errorf("breakwater: hedge percentile must be in [0, 100), got %v", h.Percentile))
	}
	if h.MaxHedges < 0 {
		errs = append(errs, fmt.Errorf("breakwater: max hedges must be >= 0, got %d", h.MaxHedges))
	}
	if !(h.Budget >= 0 && h.Budget <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: hedge budget must be in [0, 1], got %v", h.Budget))
	}
	if len(errs) > 0 {
		return hedging{}, errors.Join(errs...)
	}
	r := hedging{delay: h.Delay, q: h.Percentile / 100, maxHedges: h.MaxHedges, budget: h.Budget}
	if r.maxHedges == 0 {
		r.maxHedges = 1
	}
	if r.budget == 0 {
		r.budget = defaultHedgeBudget
	}
	if r.q == 0 && r.delay == 0 {
		r.q = 1 - budgetShare*r.budget
	}
	if r.q > 0 && r.delay == 0 {
		r.delay = defaultHedgeFloor
	}
	return r, nil
}

// hedgeState is one key's hedging state: the latencies its attempts took,
// for an adaptive delay, and its budget of extra requests. Safe for
// concurrent use; recording and spending are lock-free.
type hedgeState struct {
	lat   *latency.Tracker
	w     window.Rate  // hedgeable calls and hedges sent
	delay atomic.Int64 // the adaptive delay last computed; 0 none yet
	at    atomic.Int64 // when it was computed, +1; 0 never
}

func newHedgeState() *hedgeState {
	return &hedgeState{lat: latency.New(hedgeWindow), w: window.NewRate(hedgeWindow)}
}

// hedging returns the key's hedging state, made on first use: only keys
// that calls are made to (not the endpoints of a failover) hold one.
func (u *upstream) hedging() *hedgeState {
	if s := u.hedge.Load(); s != nil {
		return s
	}
	u.hedge.CompareAndSwap(nil, newHedgeState())
	return u.hedge.Load()
}

// deposit counts one hedgeable call at now.
func (s *hedgeState) deposit(now int64) { s.w.Add(now, 1, 0) }

// withdraw spends one hedge from the budget, or reports false when hedges
// already make up ratio of the key's calls in the window.
func (s *hedgeState) withdraw(now int64, ratio float64) bool {
	calls, hedges := s.w.Sum(now)
	if float64(hedges+1) > ratio*float64(calls) {
		return false
	}
	s.w.Add(now, 0, 1)
	return true
}

// room reports whether withdraw would grant a hedge now.
func (s *hedgeState) room(now int64, ratio float64) bool {
	calls, hedges := s.w.Sum(now)
	return float64(hedges+1) <= ratio*float64(calls)
}

// refund gives back a hedge withdrawn for a hedge that was not sent.
func (s *hedgeState) refund(now int64) { s.w.Add(now, 0, -1) }

// observe records how long an attempt took to answer. Attempts that lost a
// race are recorded at the time they were cancelled: they took at least
// that long, and leaving them out would make the delay shrink until every
// call hedged.
func (s *hedgeState) observe(now int64, d time.Duration) { s.lat.Record(now, d) }

// delayFor returns how long the next attempt of a call should run before a
// hedge follows it, or false when no hedge should be sent (an adaptive
// delay that has not seen enough attempts yet).
func (s *hedgeState) delayFor(now int64, h *hedging) (time.Duration, bool) {
	if h.q == 0 {
		return h.delay, true
	}
	if at := s.at.Load(); at == 0 || now-(at-1) >= int64(hedgeRefresh) {
		d, ok := s.lat.Quantile(now, h.q, hedgeMinSamples)
		if !ok {
			// Too few latencies yet: ask again next time rather than
			// going without hedges for a whole refresh period.
			s.delay.Store(-1)
			return 0, false
		}
		s.delay.Store(int64(d))
		s.at.Store(now + 1)
	}
	d := time.Duration(s.delay.Load())
	if d < 0 {
		return 0, false
	}
	return max(d, h.delay), true
}

// WithHedging sends hedged requests; see [Hedging] for the delay, the
// number of hedges and the budget.
//
// Hedging lives inside the retry loop. A hedge is an attempt: it counts
// toward the call's maximum attempts, takes a retry from the key's retry
// budget as well as a hedge from the hedge budget, and passes the same
// admission as any attempt (breaker, pause gate, rate limit, concurrency
// limit), without waiting: a hedge that would have to wait for any of
// them is not sent. With [WithFailover] a hedge goes to another endpoint
// than the attempt it hedges when one is healthy.
//
// Only calls that may be repeated are hedged: an idempotent method (GET,
// HEAD, OPTIONS, TRACE, PUT, DELETE), an Idempotency-Key or
// X-Idempotency-Key header, or the request's own
// [RequestPolicy.Idempotent]; and a body, if any, that GetBody can replay.
// Every copy carries the same bytes. [WithRetryNonIdempotent] does not make
// a request hedgeable: a POST without a key is never hedged, whatever the
// retry options. A call that a safety rule keeps from being hedged says so
// as it starts: an [EventHedgeSkipped] and [CallReport].NotHedged name the
// rule.
//
// The first acceptable answer wins: any answer but a failure the retry
// loop would retry (an answer the loop would retry waits for the other
// attempts still running; when all have failed, the loop decides on the
// last failure as on any attempt's). The others are cancelled: a response
// that already arrived is drained within the bounds of a discarded retry
// and closed; their concurrency slots and probe leases are given back;
// their cancellation counts neither for nor against the breaker, the
// concurrency limit or outlier detection. The breaker is charged at most
// once per call, as without hedging.
//
// Observers see hedges as attempts with [Event].Hedge set, and calls a
// hedge answered as call ends with Hedge set; an attempt that lost is
// reported, with category [Canceled], from its own goroutine when it ends,
// which may be after the call's end. Hedging needs at least 2 attempts per
// call; a [RequestPolicy] with MaxAttempts 1 turns it off for a request.
func WithHedging(h Hedging) Option {
	return option(func(s *settings) {
		r, err := h.resolve()
		if err != nil {
			s.errs = append(s.errs, err)
			return
		}
		if c := s.forTransport("WithHedging", false); c != nil {
			c.hedging = &r
		}
	})
}

// hedgeSnapshots returns the hedging state of every key.
func (t *Transport) hedgeSnapshots() []HedgeSnapshot {
	now := t.now()
	var out []HedgeSnapshot
	t.keys.Each(func(key string, u *upstream) {
		s := u.hedge.Load()
		if s == nil {
			return
		}
		calls, hedges := s.w.Sum(now)
		snap := HedgeSnapshot{Key: key, Samples: s.lat.Count(now), Calls: calls, Hedges: hedges}
		h := *t.cfg.hedging
		if h.q > 0 {
			if d, ok := s.lat.Quantile(now, h.q, hedgeMinSamples); ok {
				snap.Delay = max(d, h.delay)
			}
		} else {
			snap.Delay = h.delay
		}
		snap.DelaySeconds = snap.Delay.Seconds()
		out = append(out, snap)
	})
	slices.SortFunc(out, func(a, b HedgeSnapshot) int { return strings.Compare(a.Key, b.Key) })
	return out
}
