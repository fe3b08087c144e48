package labels

import "sync"

// MaxEndpoints bounds the endpoint values of one key value; further
// endpoints are reported as Other. A Failover has at most 64, so only keys
// shared by several transports (through a key mapping or the key cap) can
// reach it.
const MaxEndpoints = 64

// maxRawEndpoints bounds the raw endpoints an Endpoints remembers; others
// are cleaned again on every Get.
const maxRawEndpoints = 4 * MaxEndpoints

// Endpoints maps the failover endpoints of one key value to their series:
// one series per cleaned value, at most MaxEndpoints values, then Other's.
// Failover endpoints are a small configured set, so sync.Maps serve. The
// zero value is ready to use; an Endpoints is safe for concurrent use.
type Endpoints[S any] struct {
	raw    sync.Map // raw endpoint -> S, at most maxRawEndpoints
	values sync.Map // value -> S: one entry per series; written under mu
	mu     sync.Mutex
	n      int // values made, the overflow's Other excluded
	nRaw   int // raw endpoints in raw
}

// Get returns the series of endpoint's cleaned value, made by newS, under
// the Endpoints' lock, the first time.
func (es *Endpoints[S]) Get(endpoint string, newS func(value string) S) S {
	if s, ok := es.raw.Load(endpoint); ok {
		return s.(S)
	}
	return es.add(endpoint, newS)
}

// add is Get's slow path: it finds or makes the series of endpoint's value
// and remembers endpoint, unless endpoint overflows the cap.
func (es *Endpoints[S]) add(endpoint string, newS func(value string) S) S {
	es.mu.Lock()
	defer es.mu.Unlock()
	if s, ok := es.raw.Load(endpoint); ok {
		return s.(S)
	}
	value := Clean(endpoint)
	if s, ok := es.values.Load(value); ok {
		es.remember(endpoint, s.(S))
		return s.(S)
	}
	if es.n >= MaxEndpoints {
		if s, ok := es.values.Load(Other); ok {
			return s.(S)
		}
		s := newS(Other)
		es.values.Store(Other, s)
		return s
	}
	es.n++
	s := newS(value)
	es.values.Store(value, s)
	es.remember(endpoint, s)
	return s
}

// remember maps endpoint to s for the next Get, while there is room.
func (es *Endpoints[S]) remember(endpoint string, s S) {
	if es.nRaw < maxRawEndpoints {
		es.raw.Store(endpoint, s)
		es.nRaw++
	}
}

// Each calls fn for the series of every endpoint value.
func (es *Endpoints[S]) Each(fn func(S)) { each(&es.values, fn) }
