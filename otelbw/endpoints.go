package otelbw

import (
	"sync/atomic"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

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

// endpoints maps the endpoints of one key value to their series.
type endpoints struct {
	key string
	labels.Endpoints[*endpointSeries]
}

// get returns the series of endpoint, creating it if needed.
func (es *endpoints) get(endpoint string) *endpointSeries {
	return es.Get(endpoint, func(value string) *endpointSeries { return newEndpointSeries(es.key, value) })
}
