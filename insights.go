package breakwater

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// Thresholds of the insights, over the last minute unless said otherwise.
const (
	insightMinCalls      = 20  // volume below which ratios say nothing
	insightFailedCalls   = 0.2 // breaker_never_opened: share of failed calls
	insightTimeouts      = 0.1 // attempt_timeouts: share of attempts
	insightRetriedOK     = 0.2 // retries_absorb_failures: share of successes
	insightPauseHeld     = 0.2 // pause_held: share of the last 5 minutes
	insightFlappingOpens = 3   // breaker_flapping: openings (not trips) in 5 minutes
	insightMaxFindings   = 100 // findings reported at most, worst kept
	insightBucket        = 10 * time.Second
	insightBuckets       = 30 // 5 minutes
	insightMaxPauseSpans = 32
)

// insights is the Observer that [WithInsights] adds: it keeps a few
// counters per key over the last five minutes (calls, failed calls,
// retries, attempts that hit the attempt timeout, retry budget refusals,
// pause holds, breaker openings) and reports what they show as [Insight]
// values. A pause still under way is learnt from the snapshot that asks
// for the findings (see [insights.findings]), since no event reports a
// pause until a call it held is released or refused. It keeps at most
// 10 000 keys (about 1.5 KiB each), forgetting keys idle for five
// minutes. It is safe for concurrent use.
type insights struct {
	start time.Time
	keys  *keyed.Map[*insightKey]
}

// newInsights returns an insights with no counts.
func newInsights() *insights {
	in := &insights{start: time.Now()}
	in.keys = keyed.New(defaultMaxKeys, insightBucket*insightBuckets, newInsightKey, func(*insightKey, time.Time) keyed.Keep { return keyed.None })
	return in
}

// insightKey is one key's counters: a ring of 10-second buckets.
type insightKey struct {
	key     string
	mu      sync.Mutex
	buckets [insightBuckets]insightBucketCounts
	pauses  []span // merged spans during which a pause held calls
	// pushback is when the latest answer asking to slow down (a 429 or a
	// 503) came, -1 when another answer came since: where a pause under
	// way began, when the pause gate paused the key for it.
	pushback int64
	// pausedFrom is when the pause under way began, -1 when none is known;
	// unpausedAt when findings last saw the key without a pause.
	pausedFrom, unpausedAt int64
	open                   bool // the breaker is open or half-open
}

type span struct{ from, to int64 }

type insightBucketCounts struct {
	idx                                                int64 // bucket number since start; 0 is unused
	calls, failed, succeeded, retriedOK                uint32
	attempts, attemptTimeouts, budgetRefused, openings uint32
	reopenings                                         uint32 // openings when a probe failed
}

func newInsightKey(key string) *insightKey {
	return &insightKey{key: key, pushback: -1, pausedFrom: -1, unpausedAt: -1}
}

func (in *insights) now() int64 { return int64(time.Since(in.start)) }

// Observe counts e. Inbound events (EventRequest) are ignored.
func (in *insights) Observe(_ context.Context, e Event) {
	switch e.Kind {
	case EventCallEnd, EventAttempt, EventReject, EventWait, EventTransition:
	default:
		return
	}
	now := in.now()
	k := in.keys.Get(e.Key)
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.bucket(now)
	switch e.Kind {
	case EventCallEnd:
		switch {
		case e.Category == Rejected || e.Category == Canceled:
		case e.Err != nil || e.Category.Failure():
			b.calls++
			b.failed++
		default:
			b.calls++
			b.succeeded++
			if e.Retries > 0 {
				b.retriedOK++
			}
		}
	case EventAttempt:
		b.attempts++
		if errors.Is(e.Err, ErrAttemptTimeout) {
			b.attemptTimeouts++
		}
		switch {
		case e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable:
			k.pushback = now
		case e.Status != 0:
			k.pushback = -1
		}
	case EventReject:
		switch e.Mechanism {
		case MechRetryBudget:
			b.budgetRefused++
		case MechPause:
			if e.Delay > 0 {
				k.held(now, now+int64(e.Delay))
			}
		}
	case EventWait:
		if e.Mechanism == MechPause {
			k.held(now-int64(e.Duration), now)
		}
	case EventTransition:
		if t := e.Transition; t != nil {
			// A Trip is an operator's, not the upstream's doing; a
			// failed probe reopening the breaker is an opening.
			if t.To == StateOpen && t.From != StateOpen && t.Reason != ReasonTrip {
				b.openings++
				if t.From == StateHalfOpen {
					b.reopenings++
				}
			}
			k.open = t.To != StateClosed
		}
	}
}

// bucket returns the bucket of now, emptied if it held an older one.
func (k *insightKey) bucket(now int64) *insightBucketCounts {
	idx := now/int64(insightBucket) + 1
	b := &k.buckets[idx%insightBuckets]
	if b.idx != idx {
		*b = insightBucketCounts{idx: idx}
	}
	return b
}

// sum adds the buckets of the last d (whole buckets, the current one
// included).
func (k *insightKey) sum(now int64, d time.Duration) insightBucketCounts {
	var s insightBucketCounts
	cur := now/int64(insightBucket) + 1
	oldest := cur - int64(d/insightBucket) + 1
	for _, b := range k.buckets {
		if b.idx < oldest || b.idx > cur {
			continue
		}
		s.calls += b.calls
		s.failed += b.failed
		s.succeeded += b.succeeded
		s.retriedOK += b.retriedOK
		s.attempts += b.attempts
		s.attemptTimeouts += b.attemptTimeouts
		s.budgetRefused += b.budgetRefused
		s.openings += b.openings
		s.reopenings += b.reopenings
	}
	return s
}

// held adds [from, to) to the spans during which a pause held calls,
// merged, keeping the most recent ones.
func (k *insightKey) held(from, to int64) {
	if to <= from {
		return
	}
	k.pauses = append(k.pauses, span{from, to})
	slices.SortFunc(k.pauses, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	merged := k.pauses[:1]
	for _, s := range k.pauses[1:] {
		if last := &merged[len(merged)-1]; s.from <= last.to {
			last.to = max(last.to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	if n := len(merged); n > insightMaxPauseSpans {
		merged = append(merged[:0], merged[n-insightMaxPauseSpans:]...)
	}
	k.pauses = merged
}

// heldFor is how long pauses held calls during [from, to).
func (k *insightKey) heldFor(from, to int64) time.Duration {
	var d int64
	for _, s := range k.pauses {
		if lo, hi := max(s.from, from), min(s.to, to); hi > lo {
			d += hi - lo
		}
	}
	return time.Duration(d)
}

// findings returns what the counters show now, worst first within each
// check, at most 100 findings. paused are the keys a pause holds now (the
// pause gates' snapshot): the time a pause under way has held so far
// counts as held, from the answer that asked for it (or, for a pause no
// answer asked for, from the first snapshot that showed it).
func (in *insights) findings(paused []PauseSnapshot) []Insight {
	if in == nil {
		return nil
	}
	now := in.now()
	holding := make(map[string]time.Duration, len(paused))
	for _, p := range paused {
		if p.Paused {
			holding[p.Key] = p.Remaining
			in.keys.Get(p.Key) // a pause under way is worth a key
		}
	}
	var out []Insight
	in.keys.Each(func(key string, k *insightKey) {
		k.mu.Lock()
		left, paused := holding[key]
		k.pausedNow(now, paused, left)
		out = append(out, k.findings(now)...)
		k.mu.Unlock()
	})
	order := map[string]int{"breaker_never_opened": 0, "attempt_timeouts": 1, "pause_held": 2, "retry_budget_exhausted": 3, "breaker_flapping": 4, "retries_absorb_failures": 5}
	slices.SortFunc(out, func(a, b Insight) int {
		return cmp.Or(cmp.Compare(order[a.Check], order[b.Check]), cmp.Compare(b.Value, a.Value), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(len(out), insightMaxFindings)]
}

// pausedNow records whether a pause holds the key at now, for left more:
// while one does, the time from its start to its end is held (the time
// to come counting once it has come, as for a refused call). Its start
// is the latest answer that asked to slow down, unless the key was seen
// unpaused since (a pause made by hand): then the first time it was seen
// paused.
func (k *insightKey) pausedNow(now int64, paused bool, left time.Duration) {
	if !paused {
		k.pausedFrom, k.unpausedAt = -1, now
		return
	}
	if k.pausedFrom < 0 {
		k.pausedFrom = now
		if k.pushback >= 0 && k.pushback >= k.unpausedAt {
			k.pausedFrom = k.pushback
		}
	}
	k.held(k.pausedFrom, now+max(1, int64(left)))
}

func (k *insightKey) findings(now int64) []Insight {
	var out []Insight
	add := func(check string, value float64, format string, args ...any) {
		out = append(out, Insight{Key: k.key, Check: check, Value: value, Message: fmt.Sprintf(format, args...)})
	}
	minute := k.sum(now, time.Minute)
	fiveMin := k.sum(now, insightBuckets*insightBucket)
	if f := ratio(minute.failed, minute.calls); minute.calls >= insightMinCalls && f >= insightFailedCalls && minute.openings == 0 && !k.open {
		add("breaker_never_opened", f, "breaker never opened although %s of calls failed in the last minute (%d of %d): the failures are spread too thin for its policy; if the upstream is this bad, a tighter policy sheds load sooner",
			percent(f), minute.failed, minute.calls)
	}
	if f := ratio(minute.attemptTimeouts, minute.attempts); minute.attempts >= insightMinCalls && f >= insightTimeouts {
		add("attempt_timeouts", f, "attempt timeout fired on %s of attempts in the last minute (%d of %d): the upstream's p99 is above it; raise it if slow answers are still worth having",
			percent(f), minute.attemptTimeouts, minute.attempts)
	}
	const five = int64(insightBuckets * insightBucket)
	if held := k.heldFor(now-five, now); held > 0 {
		if f := float64(held) / float64(five); f >= insightPauseHeld {
			ongoing := ""
			if k.pausedFrom >= 0 {
				ongoing = ", and holds them still"
			}
			add("pause_held", f, "pause gate held calls for %s of the last 5 minutes (%s%s): the upstream keeps asking to slow down; send less or negotiate a larger quota",
				percent(f), formatDuration(held), ongoing)
		}
	}
	if n := minute.budgetRefused; n > 0 {
		add("retry_budget_exhausted", float64(n), "retry budget exhausted %d %s in the last minute: retries were refused and those calls returned their failure, which kept the outage from multiplying the load",
			n, plural(n, "time", "times"))
	}
	if n := fiveMin.openings; n >= insightFlappingOpens {
		if r := fiveMin.reopenings; r > 0 {
			add("breaker_flapping", float64(n), "breaker opened %d times in the last 5 minutes, %d of them when a probe found the upstream still failing: it is down, or back only briefly; a longer open timeout or more probe successes keep it open through that", n, r)
		} else {
			add("breaker_flapping", float64(n), "breaker opened %d times in the last 5 minutes: the upstream recovers briefly and fails again; a longer open timeout or more probe successes keep it open through that", n)
		}
	}
	if f := ratio(minute.retriedOK, minute.succeeded); minute.succeeded >= insightMinCalls && f >= insightRetriedOK {
		add("retries_absorb_failures", f, "%s of successful calls needed a retry in the last minute (%d of %d): the upstream is degraded and retries hide it; the breaker does not react to this, and should not",
			percent(f), minute.retriedOK, minute.succeeded)
	}
	return out
}

func ratio(n, of uint32) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func percent(f float64) string { return fmt.Sprintf("%.0f %%", 100*f) }

func plural(n uint32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
