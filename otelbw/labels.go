package otelbw

import (
	"maps"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Attribute keys of breakwater's own attributes.
const (
	keyAttr       = attribute.Key("breakwater.key")
	categoryAttr  = attribute.Key("breakwater.category")
	mechanismAttr = attribute.Key("breakwater.mechanism")
	stateAttr     = attribute.Key("breakwater.breaker.state")
	fromAttr      = attribute.Key("breakwater.breaker.from")
	toAttr        = attribute.Key("breakwater.breaker.to")
	reasonAttr    = attribute.Key("breakwater.breaker.reason")
	attemptAttr   = attribute.Key("breakwater.attempt")
	delayAttr     = attribute.Key("breakwater.delay")
	retryAfterKey = attribute.Key("breakwater.retry_after")
	errorAttr     = attribute.Key("breakwater.error")
	hedgeAttr     = attribute.Key("breakwater.hedge")
	endpointAttr  = attribute.Key("breakwater.endpoint")
	// ejectionReasonAttr is why an endpoint was ejected.
	ejectionReasonAttr = attribute.Key("breakwater.endpoint.reason")
)

// attrs is one attribute set as ready-made measurement options, so that a
// measurement with it allocates nothing.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrs(kvs ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// attrCache holds the attribute sets of one key or route that are made on
// first use (transitions, inbound requests), by a small code. Lookups read an
// immutable map; a new code copies it under a lock.
type attrCache struct {
	m  atomic.Pointer[map[uint32]attrs]
	mu sync.Mutex
}

// get returns the set of code, made by mk the first time.
func (c *attrCache) get(code uint32, mk func() attrs) attrs {
	if m := c.m.Load(); m != nil {
		if a, ok := (*m)[code]; ok {
			return a
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[uint32]attrs
	if m := c.m.Load(); m != nil {
		if a, ok := (*m)[code]; ok {
			return a
		}
		old = *m
	}
	a := mk()
	next := make(map[uint32]attrs, len(old)+1)
	maps.Copy(next, old)
	next[code] = a
	c.m.Store(&next)
	return a
}

// methodValues holds the http.request.method values by
// labels.MethodIndex: the nine methods of RFC 9110 and RFC 5789, then
// "_OTHER", as the HTTP semantic conventions bound them. The conventions
// match methods case-sensitively, so "get" is "_OTHER".
var methodValues = []attribute.KeyValue{
	semconv.HTTPRequestMethodGet, semconv.HTTPRequestMethodHead, semconv.HTTPRequestMethodPost,
	semconv.HTTPRequestMethodPut, semconv.HTTPRequestMethodPatch, semconv.HTTPRequestMethodDelete,
	semconv.HTTPRequestMethodConnect, semconv.HTTPRequestMethodOptions, semconv.HTTPRequestMethodTrace,
	semconv.HTTPRequestMethodOther,
}
