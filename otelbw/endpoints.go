package otelbw

import (
	"sync"
	"sync/atomic"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// maxEndpoints bounds the breakwater.endpoint values of one key value;
// further endpoints are reported as "other". A Failover has at most 64, so
// only keys shared by several transports (through WithKeyValue or the key
// cap) can reach it.
const maxEndpoints = 64

// endpointSeries holds the attribute sets of one (key, endpoint) pair and
// whether the endpoint is ejected.
type endpointSeries struct {
	ep         attrs   // key and endpoint
	byCategory []attrs // key, endpoint and category, by category index
	byReason   []attrs // key, endpoint and ejection reason, by reason index
	ejected    atomic.Bool
}

func newEndpointSeries(key, endpoint string) *endpointSeries {
	k, e := keyAttr.String(key), endpointAttr.String(endpoint)
	es := &endpointSeries{ep: newAttrs(k, e)}
	for _, c := range labels.Categories {
		es.byCategory = append(es.byCategory, newAttrs(k, e, categoryAttr.String(c)))
	}
	for _, r := range labels.EjectionReasons {
		es.byReason = append(es.byReason, newAttrs(k, e, ejectionReasonAttr.String(r)))
	}
	return es
}

// health applies an endpoint health event and returns the attribute set of
// the ejection it reports, if it reports one.
func (es *endpointSeries) health(h breakwater.Health, why breakwater.Reason) (attrs, bool) {
	if h != breakwater.HealthEjected {
		es.ejected.Store(false)
		return attrs{}, false
	}
	es.ejected.Store(true)
	return es.byReason[labels.EjectionIndex(why)], true
}

// endpoints maps the endpoints of one key value to their series: at most
// maxEndpoints, then labels.Other's. Failover endpoints are a small
// configured set, so a sync.Map serves.
type endpoints struct {
	key string
	m   sync.Map // raw endpoint -> *endpointSeries
	mu  sync.Mutex
	n   int
}

// get returns the series of endpoint, creating it if needed.
func (es *endpoints) get(endpoint string) *endpointSeries {
	if s, ok := es.m.Load(endpoint); ok {
		return s.(*endpointSeries)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if s, ok := es.m.Load(endpoint); ok {
		return s.(*endpointSeries)
	}
	value := labels.Clean(endpoint)
	if es.n >= maxEndpoints {
		if s, ok := es.m.Load(labels.Other); ok {
			return s.(*endpointSeries)
		}
		endpoint, value = labels.Other, labels.Other
	} else {
		es.n++
	}
	s := newEndpointSeries(es.key, value)
	es.m.Store(endpoint, s)
	return s
}

// each calls fn for the series of every endpoint.
func (es *endpoints) each(fn func(*endpointSeries)) {
	es.m.Range(func(_, s any) bool {
		fn(s.(*endpointSeries))
		return true
	})
}
