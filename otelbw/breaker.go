package otelbw

import (
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
)

// breakerAgg follows the breakers behind one key value from their
// transitions, as the prom package's collector does. Several breakers can
// share a value (a key mapping, the overflow value, or several transports
// on one observer), so it counts the breakers in each non-closed state
// rather than storing one state.
type breakerAgg struct {
	mu       sync.Mutex
	open     int
	halfOpen int
	// since is when the value's breakers last went from all closed to not
	// all closed; zero while all are closed.
	since time.Time
	// until is the latest open deadline (At + OpenFor) among the openings
	// since then.
	until time.Time
}

// record applies one transition.
func (b *breakerAgg) record(t breakwater.Transition) {
	at := t.At
	if at.IsZero() {
		at = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	wasClosed := b.open+b.halfOpen == 0
	// A From that does not match the counts is a transition the observer
	// did not see the start of (it was attached to a registry whose breakers
	// had already left closed): it is not subtracted.
	switch t.From {
	case breakwater.StateOpen:
		if b.open > 0 {
			b.open--
		}
	case breakwater.StateHalfOpen:
		if b.halfOpen > 0 {
			b.halfOpen--
		}
	}
	switch t.To {
	case breakwater.StateOpen:
		b.open++
		if u := at.Add(t.OpenFor); u.After(b.until) {
			b.until = u
		}
	case breakwater.StateHalfOpen:
		b.halfOpen++
	}
	switch {
	case b.open+b.halfOpen == 0:
		b.since, b.until = time.Time{}, time.Time{}
	case wasClosed:
		b.since = at
	}
}

// read returns the state to report at now (the worst of the value's
// breakers) and the seconds since they left closed. An open breaker whose
// open duration has elapsed reads as half-open, as
// [breakwater.Breaker.State] reports it: it turns half-open on its next
// admission.
func (b *breakerAgg) read(now time.Time) (state breakwater.State, openSeconds float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.open > 0 && now.Before(b.until):
		state = breakwater.StateOpen
	case b.open > 0 || b.halfOpen > 0:
		state = breakwater.StateHalfOpen
	default:
		state = breakwater.StateClosed
	}
	if !b.since.IsZero() {
		openSeconds = max(0, now.Sub(b.since).Seconds())
	}
	return state, openSeconds
}
