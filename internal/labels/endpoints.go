package labels

import "sync"

// MaxEndpoints bounds the endpoint values of one key value; further
// endpoints are reported as Other. A Failover has at most 64, so only keys
// shared by several transports (through a key mapping or the key cap) can
// reach it.
const MaxEndpoints = 64

// Endpoints maps the failover endpoints of one key value to their series:
// at most MaxEndpoints values, then Other's. Failover endpoints are a small
// configured set, so a sync.Map serves. The zero value is ready to use; an
// Endpoints is safe for concurrent use.
type Endpoints[S any] struct {
	m  sync.Map // raw endpoint -> S
	mu sync.Mutex
	n  int
}

// Get returns the series of endpoint, made by newS, under the Endpoints'
// lock, from its cleaned value the first time.
func (es *Endpoints[S]) Get(endpoint string, newS func(value string) S) S {
	if s, ok := es.m.Load(endpoint); ok {
		return s.(S)
	}
	return es.add(endpoint, newS)
}

// add is Get's slow path: it makes endpoint's series, unless another Get
// just did.
func (es *Endpoints[S]) add(endpoint string, newS func(value string) S) S {
	es.mu.Lock()
	defer es.mu.Unlock()
	if s, ok := es.m.Load(endpoint); ok {
		return s.(S)
	}
	value := Clean(endpoint)
	if es.n >= MaxEndpoints {
		if s, ok := es.m.Load(Other); ok {
			return s.(S)
		}
		endpoint, value = Other, Other
	} else {
		es.n++
	}
	s := newS(value)
	es.m.Store(endpoint, s)
	return s
}

// Each calls fn for the series of every endpoint value.
func (es *Endpoints[S]) Each(fn func(S)) { each(&es.m, fn) }
