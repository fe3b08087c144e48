package prom

import (
	"sync"
	"sync/atomic"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// maxEndpoints bounds the endpoint label values of one key label; further
// endpoints are reported as OtherLabel. A Failover has at most 64.
const maxEndpoints = 64

// endpointSeries holds the state of one (key, endpoint) label pair.
type endpointSeries struct {
	label    string
	attempts []atomic.Uint64 // by category
	mu       sync.Mutex
	ejected  bool
	// ejections by reason label.
	ejections map[string]uint64
}

// endpoints maps the endpoint values of one key label to their series.
type endpoints struct {
	m  sync.Map // endpoint -> *endpointSeries
	mu sync.Mutex
	n  int
}

// get returns the series of endpoint, creating it if needed: at most
// maxEndpoints, then OtherLabel's.
func (es *endpoints) get(endpoint string) *endpointSeries {
	if s, ok := es.m.Load(endpoint); ok {
		return s.(*endpointSeries)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if s, ok := es.m.Load(endpoint); ok {
		return s.(*endpointSeries)
	}
	label := labels.Clean(endpoint)
	if es.n >= maxEndpoints {
		label = OtherLabel
		if s, ok := es.m.Load(OtherLabel); ok {
			return s.(*endpointSeries)
		}
		endpoint = OtherLabel
	} else {
		es.n++
	}
	s := &endpointSeries{label: label, attempts: make([]atomic.Uint64, len(labels.Categories))}
	es.m.Store(endpoint, s)
	return s
}

func (es *endpoints) each(fn func(*endpointSeries)) {
	es.m.Range(func(_, s any) bool {
		fn(s.(*endpointSeries))
		return true
	})
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
