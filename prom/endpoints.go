package prom

import (
	"sync"
	"sync/atomic"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// endpointSeries holds the state of one (key, endpoint) label pair.
type endpointSeries struct {
	label    string
	attempts []atomic.Uint64 // by category
	mu       sync.Mutex
	ejected  bool
	// ejections by reason label.
	ejections map[string]uint64
}

func newEndpointSeries(label string) *endpointSeries {
	return &endpointSeries{label: label, attempts: make([]atomic.Uint64, len(labels.Categories))}
}

// health applies one endpoint health event.
func (s *endpointSeries) health(e breakwater.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Health == breakwater.HealthEjected {
		if s.ejections == nil {
			s.ejections = make(map[string]uint64)
		}
		s.ejections[labels.EjectionReasons[labels.EjectionIndex(e.Reason)]]++
		s.ejected = true
		return
	}
	s.ejected = false
}
