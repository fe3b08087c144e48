package prom

import (
	"maps"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// breakerAgg follows the breakers behind one key label from their
// transitions. Several breakers can share a label (a key mapping, the
// overflow label, or several transports on one collector), so it counts the
// breakers in each non-closed state rather than storing one state.
type breakerAgg struct {
	mu       sync.Mutex
	open     int
	halfOpen int
	// since is when the label's breakers last went from all closed to not
	// all closed; zero while all are closed.
	since time.Time
	// until is the latest open deadline (At + OpenFor) among the openings
	// since then.
	until time.Time
	// transitions counts the transitions by their labels.
	transitions map[transitionLabels]uint64
}

// transitionLabels are the labels of one transitions counter.
type transitionLabels struct{ from, to, reason string }

// record applies one transition.
func (b *breakerAgg) record(t breakwater.Transition) {
	at := t.At
	if at.IsZero() {
		at = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.transitions == nil {
		b.transitions = make(map[transitionLabels]uint64)
	}
	b.transitions[transitionLabels{labels.States[labels.StateIndex(t.From)], labels.States[labels.StateIndex(t.To)], labels.Reasons[labels.ReasonIndex(t.Reason)]}]++
	wasClosed := b.open+b.halfOpen == 0
	// A From that does not match the counts is a transition the collector
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

// read returns the state gauge's value, the seconds since the label's
// breakers left closed, at now, and a copy of the transition counts. An open breaker whose open duration has
// elapsed reads as half-open, as [breakwater.Breaker.State] reports it: it turns
// half-open on its next admission.
func (b *breakerAgg) read(now time.Time) (state, openSeconds float64, transitions map[transitionLabels]uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.open > 0 && now.Before(b.until):
		state = float64(breakwater.StateOpen)
	case b.open > 0 || b.halfOpen > 0:
		state = float64(breakwater.StateHalfOpen)
	default:
		state = float64(breakwater.StateClosed)
	}
	if !b.since.IsZero() {
		openSeconds = max(0, now.Sub(b.since).Seconds())
	}
	return state, openSeconds, maps.Clone(b.transitions)
}
