package labels

import (
	"time"

	"github.com/breakwater-go/breakwater"
)

// Breakers follows the breakers behind one key value from their
// transitions. Several breakers can share a value (a key mapping, the
// overflow value, or several transports on one collector), so it counts the
// breakers in each non-closed state rather than storing one state. The zero
// value has seen no transition. A Breakers is not safe for concurrent use:
// its owner guards it with a lock of its own.
type Breakers struct {
	open     int
	halfOpen int
	// since is when the value's breakers last went from all closed to not
	// all closed; zero while all are closed.
	since time.Time
	// until is the latest open deadline (At + OpenFor) among the openings
	// since then.
	until time.Time
}

// Record applies one transition; a zero t.At is now.
func (b *Breakers) Record(t breakwater.Transition) {
	at := t.At
	if at.IsZero() {
		at = time.Now()
	}
	wasClosed := b.open+b.halfOpen == 0
	// A From that does not match the counts is a transition whose start was
	// not seen (the observer was attached to a registry whose breakers had
	// already left closed): it is not subtracted.
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

// Read returns the state to report at now (the worst of the value's
// breakers) and the seconds since they left closed. An open breaker whose
// open duration has elapsed reads as half-open, as
// [breakwater.Breaker.State] reports it: it turns half-open on its next
// admission.
func (b *Breakers) Read(now time.Time) (state breakwater.State, openSeconds float64) {
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
