package otelbw

import (
	"hash/maphash"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/breakwater-go/breakwater/internal/labels"
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

// table maps raw values (keys, routes) to the series of their attribute
// value, bounding the number of values. It is the prom package's table,
// copied rather than shared so that this module imports nothing of the
// root module's internals (a nested module may be paired with another
// version of the root one).
//
// Raw values are remembered in immutable maps published through atomic
// pointers and copied, under a lock, when a raw value is added: the first
// frontMax in one map, so that a lookup among them is one map load, and the
// next ones, up to rawMax in all, in shards, so that copying stays cheap.
// Any other raw value is mapped to its value again on every lookup, which
// stays correct and bounded, only slower.
//
// At most max values are created, plus labels.Other: once max is reached,
// every new value becomes labels.Other. Values are never removed, so a raw
// value keeps its attribute value for the observer's life.
type table[S any] struct {
	max    int
	rawMax int64
	value  func(raw string) string // never panics; may alias raw
	newS   func(value string) S

	front  atomic.Pointer[map[string]S]
	seed   maphash.Seed
	shards [tableShards]atomic.Pointer[map[string]S]
	rawMu  sync.Mutex   // serializes the remembering of raw values
	rawN   atomic.Int64 // raw values remembered; written under rawMu

	values sync.Map   // value -> S
	mu     sync.Mutex // serializes the creation of values
	n      int        // values created, labels.Other excluded
}

const (
	tableShards = 64
	frontMax    = 256
)

func newTable[S any](max, rawMax int, value func(string) string, newS func(string) S) *table[S] {
	t := &table[S]{max: max, rawMax: int64(rawMax), value: value, newS: newS, seed: maphash.MakeSeed()}
	t.front.Store(&map[string]S{})
	for i := range t.shards {
		t.shards[i].Store(&map[string]S{})
	}
	return t
}

// get returns the series of raw's value, creating it if needed.
func (t *table[S]) get(raw string) S {
	if s, ok := (*t.front.Load())[raw]; ok {
		return s
	}
	return t.getSharded(raw)
}

func (t *table[S]) getSharded(raw string) S {
	sh := &t.shards[maphash.String(t.seed, raw)%tableShards]
	if s, ok := (*sh.Load())[raw]; ok {
		return s
	}
	s := t.byValue(t.value(raw))
	if t.rawN.Load() < t.rawMax {
		t.remember(sh, raw, s)
	}
	return s
}

// remember adds raw to front while it has room, else to its shard sh,
// until rawMax raw values are remembered.
func (t *table[S]) remember(sh *atomic.Pointer[map[string]S], raw string, s S) {
	t.rawMu.Lock()
	defer t.rawMu.Unlock()
	if _, ok := (*t.front.Load())[raw]; ok || t.rawN.Load() >= t.rawMax {
		return
	}
	m := &t.front
	if len(*m.Load()) >= frontMax {
		m = sh
	}
	if _, ok := (*m.Load())[raw]; !ok {
		c := make(map[string]S, len(*m.Load())+1)
		maps.Copy(c, *m.Load())
		c[strings.Clone(raw)] = s
		m.Store(&c)
		t.rawN.Add(1)
	}
}

func (t *table[S]) byValue(v string) S {
	if s, ok := t.values.Load(v); ok {
		return s.(S)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.values.Load(v); ok {
		return s.(S)
	}
	if v != labels.Other {
		if t.n >= t.max {
			v = labels.Other
			if s, ok := t.values.Load(v); ok {
				return s.(S)
			}
		} else {
			t.n++
		}
	}
	v = strings.Clone(v)
	s := t.newS(v)
	t.values.Store(v, s)
	return s
}

// each calls fn for the series of every value.
func (t *table[S]) each(fn func(S)) {
	t.values.Range(func(_, s any) bool {
		fn(s.(S))
		return true
	})
}
