package prom

import (
	"maps"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// breakerAgg follows the breakers behind one key label from their
// transitions (see [labels.Breakers]) and counts the transitions by their
// labels, under one lock.
type breakerAgg struct {
	mu       sync.Mutex
	breakers labels.Breakers
	// transitions counts the transitions by their labels.
	transitions map[transitionLabels]uint64
}

// transitionLabels are the labels of one transitions counter.
type transitionLabels struct{ from, to, reason string }

// record applies one transition.
func (b *breakerAgg) record(t breakwater.Transition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.transitions == nil {
		b.transitions = make(map[transitionLabels]uint64)
	}
	b.transitions[transitionLabels{labels.States[labels.StateIndex(t.From)], labels.States[labels.StateIndex(t.To)], labels.Reasons[labels.ReasonIndex(t.Reason)]}]++
	b.breakers.Record(t)
}

// read returns the state gauge's value, the seconds since the label's
// breakers left closed, at now, and a copy of the transition counts.
func (b *breakerAgg) read(now time.Time) (state, openSeconds float64, transitions map[transitionLabels]uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, open := b.breakers.Read(now)
	return float64(s), open, maps.Clone(b.transitions)
}
