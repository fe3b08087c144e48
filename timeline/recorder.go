// Package timeline records what a breakwater [breakwater.Transport] did,
// interval by interval, and draws it as a self-contained SVG: the
// upstream's health, the breaker's state, the calls that succeeded,
// failed or were rejected (and by what), the requests the upstream saw
// and the 429s it answered, the retries and hedges, the pauses, and the
// endpoints a failover ejected and took back.
//
// A [Recorder] is an [breakwater.Observer]: give it to a Transport with
// [breakwater.WithObserver] to record real traffic, or to
// [breakwater.Scenario]'s Observe field (its [Recorder.Record] method) to
// record a simulated outage in virtual time. [WriteSVG] draws either the
// same way, with the standard library only.
package timeline

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
)

// MaxIntervals bounds a Recorder: events later than MaxIntervals intervals
// after its start are dropped, so that a recorder left attached to a
// long-running transport holds a bounded amount of memory.
const MaxIntervals = 10_000

// Rejection reasons, the keys of [Interval.Rejected]: why a call ended
// without an answer from the upstream.
const (
	BreakerOpen  = "breaker_open"   // the breaker was open
	HalfOpenBusy = "half_open_busy" // the breaker was half-open and its probe slots taken
	Paused       = "paused"         // the upstream had asked the key to pause
	RateLimited  = "rate_limited"   // no token before the deadline
	Concurrency  = "concurrency"    // no free slot before the deadline
	Other        = "other"          // a body that could not be replayed, or another refusal
)

// Reasons lists the rejection reasons in the order a legend shows them.
var Reasons = []string{BreakerOpen, HalfOpenBusy, Paused, RateLimited, Concurrency, Other}

// Interval is what happened during one interval. Calls are counted when
// they start and when they end, apart: a call that spans two intervals
// is started in one and ended in the other, so Ended always equals
// Succeeded + Failed + Rejected's sum + Canceled.
type Interval struct {
	// Start is the interval's start, from the recorder's start.
	Start time.Duration
	// Started and Ended count calls that began and ended.
	Started, Ended int
	// Succeeded counts calls that ended with a success (2xx, 3xx, or a
	// 4xx the upstream meant); Failed those that returned the upstream's
	// failure (after retries); Canceled those their caller abandoned.
	Succeeded, Failed, Canceled int
	// Rejected counts calls that breakwater ended without an answer from
	// the upstream, by reason (see [Reasons]).
	Rejected map[string]int
	// Attempts counts the requests the upstream saw, FailedAttempts those
	// of them that failed, Throttled those it answered 429 (or another
	// [breakwater.Throttled] answer), Retries the retries scheduled, and
	// BudgetRefused the retries the retry budget refused.
	Attempts, FailedAttempts, Throttled, Retries, BudgetRefused int
	// Hedges counts the hedges sent: attempts started while an earlier
	// attempt of the same call was still waiting for its answer. Each is
	// also counted in Attempts once it ends.
	Hedges int
	// Paused is the part of the interval during which calls were held or
	// refused by a pause the upstream asked for.
	Paused time.Duration
}

// RejectedTotal is the sum of Rejected.
func (iv Interval) RejectedTotal() int {
	n := 0
	for _, v := range iv.Rejected {
		n += v
	}
	return n
}

// Span is a stretch of time: in one breaker state ([Timeline.States]) or
// paused ([Timeline.Pauses], where State is unused). A half-open span may
// last no time at all: its probe was answered at once, as in a
// simulation without an attempt time.
type Span struct {
	From, To time.Duration
	State    breakwater.State
}

// Phase is a stretch of the upstream's behaviour declared with
// [Recorder.Phase]: from At until the next phase.
type Phase struct {
	At      time.Duration
	Name    string
	Healthy bool
}

// HealthChange is a failover endpoint changing tier, and when: ejected,
// degraded, or healthy again (see [breakwater.Failover]).
type HealthChange struct {
	At       time.Duration
	Key      string // the upstream's key
	Endpoint string
	Health   breakwater.Health
	Reason   breakwater.Reason
}

// Transition is a breaker transition and when it happened.
type Transition struct {
	At time.Duration
	breakwater.Transition
}

// Timeline is what a Recorder recorded: a value, safe to keep and draw.
type Timeline struct {
	// Interval is the width of each of Intervals.
	Interval  time.Duration
	Intervals []Interval
	// States are the spans of the worst breaker state across keys (open
	// over half-open over closed), covering the whole timeline.
	States      []Span
	Transitions []Transition
	Phases      []Phase
	// Pauses are the stretches during which calls were held or refused
	// by a pause, merged and in order.
	Pauses []Span
	// Health are the failover endpoints' changes of tier, in order.
	Health []HealthChange
	// End is the time of the latest event.
	End time.Duration
}

// Recorder bins a Transport's events into fixed intervals. Its methods are
// safe for concurrent use. The zero value is not usable; call [New].
type Recorder struct {
	start    time.Time
	interval time.Duration

	mu          sync.Mutex
	intervals   []Interval
	transitions []Transition
	health      []HealthChange
	phases      []Phase
	pauses      []span // merged, sorted
	end         time.Duration
}

type span struct{ from, to time.Duration }

// New returns a Recorder with intervals of the given width (one second
// when interval <= 0), whose clock for [Recorder.Observe] starts now.
func New(interval time.Duration) *Recorder {
	if interval <= 0 {
		interval = time.Second
	}
	return &Recorder{start: time.Now(), interval: interval}
}

// Elapsed is the time since the recorder was made: the time that
// [Recorder.Observe] records events at.
func (r *Recorder) Elapsed() time.Duration { return time.Since(r.start) }

// Observe records e at the current time; it makes a Recorder an
// [breakwater.Observer].
func (r *Recorder) Observe(_ context.Context, e breakwater.Event) { r.Record(r.Elapsed(), e) }

// Phase declares that the upstream behaves as name from at on, healthy
// or not; phases draw the upstream's health band and label it. Without
// phases, the band shows the share of failing attempts.
func (r *Recorder) Phase(at time.Duration, name string, healthy bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phases = append(r.phases, Phase{At: at, Name: name, Healthy: healthy})
	r.end = max(r.end, at)
}

// Record records e as happening at (from the recorder's start). Events of
// inbound middleware are ignored.
func (r *Recorder) Record(at time.Duration, e breakwater.Event) {
	if at < 0 || at >= MaxIntervals*r.interval {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end = max(r.end, at)
	iv := r.at(at)
	switch e.Kind {
	case breakwater.EventCallStart:
		iv.Started++
	case breakwater.EventCallEnd:
		iv.Ended++
		switch {
		case e.Category == breakwater.Rejected:
			if iv.Rejected == nil {
				iv.Rejected = map[string]int{}
			}
			iv.Rejected[Reason(e.Err)]++
		case e.Category == breakwater.Canceled:
			iv.Canceled++
		case e.Err != nil || e.Category.Failure():
			iv.Failed++
		default:
			iv.Succeeded++
		}
	case breakwater.EventAttempt:
		iv.Attempts++
		if e.Category.Failure() {
			iv.FailedAttempts++
		}
		if e.Category == breakwater.Throttled {
			iv.Throttled++
		}
	case breakwater.EventRetry:
		iv.Retries++
	case breakwater.EventHedge:
		iv.Hedges++
	case breakwater.EventHealth:
		r.health = append(r.health, HealthChange{At: at, Key: e.Key, Endpoint: e.Endpoint, Health: e.Health, Reason: e.Reason})
	case breakwater.EventReject:
		switch e.Mechanism {
		case breakwater.MechRetryBudget:
			iv.BudgetRefused++
		case breakwater.MechPause:
			if e.Delay > 0 {
				r.paused(at, at+e.Delay)
			}
		}
	case breakwater.EventWait:
		if e.Mechanism == breakwater.MechPause {
			r.paused(at-e.Duration, at)
		}
	case breakwater.EventTransition:
		if e.Transition != nil {
			r.transitions = append(r.transitions, Transition{At: at, Transition: *e.Transition})
		}
	}
}

// at returns the interval holding t, growing the list. r.mu must be held.
func (r *Recorder) at(t time.Duration) *Interval {
	i := int(t / r.interval)
	for len(r.intervals) <= i {
		r.intervals = append(r.intervals, Interval{Start: time.Duration(len(r.intervals)) * r.interval})
	}
	return &r.intervals[i]
}

// paused adds [from, to) to the pause spans. r.mu must be held.
func (r *Recorder) paused(from, to time.Duration) {
	from = max(0, from)
	to = min(to, MaxIntervals*r.interval)
	if to <= from {
		return
	}
	r.pauses = append(r.pauses, span{from, to})
	sort.Slice(r.pauses, func(i, j int) bool { return r.pauses[i].from < r.pauses[j].from })
	merged := r.pauses[:1]
	for _, s := range r.pauses[1:] {
		last := &merged[len(merged)-1]
		if s.from <= last.to {
			last.to = max(last.to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	r.pauses = merged
}

// Reason names why a call ended by a rejection: one of [Reasons].
func Reason(err error) string {
	switch {
	case errors.Is(err, breakwater.ErrHalfOpenBusy):
		return HalfOpenBusy
	case errors.Is(err, breakwater.ErrCircuitOpen):
		return BreakerOpen
	case errors.Is(err, breakwater.ErrPaused):
		return Paused
	case errors.Is(err, breakwater.ErrRateLimited):
		return RateLimited
	case errors.Is(err, breakwater.ErrConcurrencyLimit):
		return Concurrency
	}
	return Other
}

// Timeline returns a copy of what was recorded so far.
func (r *Recorder) Timeline() Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := Timeline{
		Interval:    r.interval,
		Intervals:   make([]Interval, len(r.intervals)),
		Transitions: append([]Transition(nil), r.transitions...),
		Health:      append([]HealthChange(nil), r.health...),
		Phases:      append([]Phase(nil), r.phases...),
		End:         r.end,
	}
	for i, iv := range r.intervals {
		if iv.Rejected != nil {
			m := make(map[string]int, len(iv.Rejected))
			for k, v := range iv.Rejected {
				m[k] = v
			}
			iv.Rejected = m
		}
		t.Intervals[i] = iv
	}
	// The last interval may be only partly covered by the pauses that run
	// past the latest event: extend the timeline to hold them.
	for _, p := range r.pauses {
		t.End = max(t.End, p.to)
	}
	for len(t.Intervals) == 0 || t.Intervals[len(t.Intervals)-1].Start+r.interval <= t.End && len(t.Intervals) < MaxIntervals {
		t.Intervals = append(t.Intervals, Interval{Start: time.Duration(len(t.Intervals)) * r.interval})
	}
	for _, p := range r.pauses {
		t.Pauses = append(t.Pauses, Span{From: p.from, To: p.to})
		for i := range t.Intervals {
			iv := &t.Intervals[i]
			lo, hi := max(p.from, iv.Start), min(p.to, iv.Start+r.interval)
			if hi > lo {
				iv.Paused += hi - lo
			}
		}
	}
	sort.SliceStable(t.Transitions, func(i, j int) bool { return t.Transitions[i].At < t.Transitions[j].At })
	sort.SliceStable(t.Phases, func(i, j int) bool { return t.Phases[i].At < t.Phases[j].At })
	sort.SliceStable(t.Health, func(i, j int) bool { return t.Health[i].At < t.Health[j].At })
	t.States = states(t.Transitions, t.End)
	return t
}

// states folds transitions into spans of the worst state across keys.
func states(ts []Transition, end time.Duration) []Span {
	cur := map[string]breakwater.State{}
	worst := func() breakwater.State {
		w := breakwater.StateClosed
		for _, s := range cur {
			w = max(w, s) // closed < half-open < open
		}
		return w
	}
	spans := []Span{{State: breakwater.StateClosed}}
	for _, t := range ts {
		if t.To == breakwater.StateClosed {
			delete(cur, t.Key)
		} else {
			cur[t.Key] = t.To
		}
		s := worst()
		last := &spans[len(spans)-1]
		if s == last.State {
			continue
		}
		last.To = t.At
		if last.To == last.From && last.State != breakwater.StateHalfOpen { // a probe that answered at once still probed
			spans = spans[:len(spans)-1]
			if len(spans) > 0 && spans[len(spans)-1].State == s {
				continue
			}
		}
		spans = append(spans, Span{From: t.At, State: s})
	}
	spans[len(spans)-1].To = max(end, spans[len(spans)-1].From)
	return spans
}
