package breakwater

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// Insight is one plain-words finding about live traffic: something the
// counters show that an operator should know, such as a breaker that never
// opened while many calls failed. See [WithInsights] for the checks.
type Insight struct {
	// Key is the upstream the finding is about.
	Key string `json:"key"`
	// Check names the finding; its values are stable: breaker_never_opened,
	// breaker_flapping, retry_budget_exhausted, pause_held,
	// attempt_timeouts and retries_absorb_failures.
	Check string `json:"check"`
	// Message says what was seen, with numbers, and what it means.
	Message string `json:"message"`
	// Value is the measured number the message is about: a fraction for
	// ratios, a count otherwise.
	Value float64 `json:"value"`
}

// Thresholds of the insights, over the last minute unless said otherwise.
const (
	insightMinCalls      = 20  // volume below which ratios say nothing
	insightFailedCalls   = 0.2 // breaker_never_opened: share of failed calls
	insightTimeouts      = 0.1 // attempt_timeouts: share of attempts
	insightRetriedOK     = 0.2 // retries_absorb_failures: share of successes
	insightPauseHeld     = 0.2 // pause_held: share of the last 5 minutes
	insightFlappingOpens = 3   // breaker_flapping: openings in 5 minutes
	insightMaxFindings   = 100 // findings reported at most, worst kept
	insightBucket        = 10 * time.Second
	insightBuckets       = 30 // 5 minutes
	insightMaxPauseSpans = 32
)

// insights is the Observer that [WithInsights] adds: it keeps a few
// counters per key over the last five minutes (calls, failed calls,
// retries, attempts that hit the attempt timeout, retry budget refusals,
// pause holds, breaker openings) and reports what they show as [Insight]
// values. It keeps at most 10 000 keys (about 1.5 KiB each), forgetting keys idle
// for five minutes. It is safe for concurrent use.
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
	first   int64 // when the key was first seen
	buckets [insightBuckets]insightBucketCounts
	pauses  []span // merged spans during which a pause held calls
	open    bool   // the breaker is open or half-open
}

type span struct{ from, to int64 }

type insightBucketCounts struct {
	idx                                                int64 // bucket number since start; 0 is unused
	calls, failed, succeeded, retriedOK                uint32
	attempts, attemptTimeouts, budgetRefused, openings uint32
}

func newInsightKey(key string) *insightKey { return &insightKey{key: key, first: -1} }

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
	if k.first < 0 {
		k.first = now
	}
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
			if t.To == StateOpen && t.From == StateClosed {
				b.openings++
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
// check, at most 100 findings.
func (in *insights) findings() []Insight {
	if in == nil {
		return nil
	}
	now := in.now()
	var out []Insight
	in.keys.Each(func(key string, k *insightKey) {
		k.mu.Lock()
		out = append(out, k.findings(now)...)
		k.mu.Unlock()
	})
	order := map[string]int{"breaker_never_opened": 0, "attempt_timeouts": 1, "pause_held": 2, "retry_budget_exhausted": 3, "breaker_flapping": 4, "retries_absorb_failures": 5}
	slices.SortFunc(out, func(a, b Insight) int {
		return cmp.Or(cmp.Compare(order[a.Check], order[b.Check]), cmp.Compare(b.Value, a.Value), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(len(out), insightMaxFindings)]
}

func (k *insightKey) findings(now int64) []Insight {
	var out []Insight
	add := func(check string, value float64, format string, args ...any) {
		out = append(out, Insight{Key: k.key, Check: check, Value: value, Message: fmt.Sprintf(format, args...)})
	}
	minute := k.sum(now, time.Minute)
	five := k.sum(now, insightBuckets*insightBucket)
	if f := ratio(minute.failed, minute.calls); minute.calls >= insightMinCalls && f >= insightFailedCalls && minute.openings == 0 && !k.open {
		add("breaker_never_opened", f, "breaker never opened although %s of calls failed in the last minute (%d of %d): the failures are spread too thin for its policy; if the upstream is this bad, a tighter policy sheds load sooner",
			percent(f), minute.failed, minute.calls)
	}
	if f := ratio(minute.attemptTimeouts, minute.attempts); minute.attempts >= insightMinCalls && f >= insightTimeouts {
		add("attempt_timeouts", f, "attempt timeout fired on %s of attempts in the last minute (%d of %d): the upstream's p99 is above it; raise it if slow answers are still worth having",
			percent(f), minute.attemptTimeouts, minute.attempts)
	}
	if k.first >= 0 {
		window := min(int64(insightBuckets*insightBucket), now-k.first)
		if window >= int64(insightBucket) {
			held := k.heldFor(now-window, now)
			if f := float64(held) / float64(window); f >= insightPauseHeld {
				add("pause_held", f, "pause gate held calls for %s of the last %s (%s): the upstream keeps asking to slow down; send less or negotiate a larger quota",
					percent(f), formatDuration(time.Duration(window)), formatDuration(held))
			}
		}
	}
	if n := minute.budgetRefused; n > 0 {
		add("retry_budget_exhausted", float64(n), "retry budget exhausted %d %s in the last minute: retries were refused and those calls returned their failure, which kept the outage from multiplying the load",
			n, plural(n, "time", "times"))
	}
	if n := five.openings; n >= insightFlappingOpens {
		add("breaker_flapping", float64(n), "breaker opened %d times in the last 5 minutes: the upstream recovers briefly and fails again; a longer open timeout or more probe successes keep it open through that", n)
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
