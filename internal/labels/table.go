package labels

import (
	"hash/maphash"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
)

// A Table maps raw values (keys, routes) to the series of their label
// value, bounding the number of label values. It is safe for concurrent
// use; a Get of a raw value it remembers is one map lookup and allocates
// nothing.
//
// Raw values are remembered in immutable maps published through atomic
// pointers and copied, under a lock, when a raw value is added: the first
// frontMax in one map, so that a lookup among them is one map load, and the
// next ones, up to rawMax in all, in shards, so that copying stays cheap
// (a lookup there costs one more hash). Any other raw value is mapped to
// its label again on every lookup, which stays correct and bounded, only
// slower.
//
// At most max label values are created, plus Other: once max is
// reached, every new label value becomes Other. Label values are never
// removed, so a raw value keeps its label for the Table's life.
type Table[S any] struct {
	max    int
	rawMax int64
	label  func(raw string) string // never panics; may alias raw
	newS   func(label string) S

	front  atomic.Pointer[map[string]S]
	seed   maphash.Seed
	shards [tableShards]atomic.Pointer[map[string]S]
	rawMu  sync.Mutex   // serializes the remembering of raw values
	rawN   atomic.Int64 // raw values remembered; written under rawMu

	labels sync.Map   // label value -> S
	mu     sync.Mutex // serializes the creation of label values
	n      int        // label values created, Other excluded
}

const (
	tableShards = 64
	frontMax    = 256
)

// NewTable returns a Table of at most n label values (n >= 1) plus Other,
// remembering up to max(4096, 4*n) raw values. label maps a raw
// value to its label value; it must be safe for concurrent use, never
// panic, and may return raw itself. newS makes the series of a new label
// value; it runs under the Table's lock. Neither is called for a raw value
// the Table remembers.
func NewTable[S any](n int, label func(raw string) string, newS func(label string) S) *Table[S] {
	return newTable(n, max(4096, 4*n), label, newS)
}

func newTable[S any](max, rawMax int, label func(string) string, newS func(string) S) *Table[S] {
	t := &Table[S]{max: max, rawMax: int64(rawMax), label: label, newS: newS, seed: maphash.MakeSeed()}
	t.front.Store(&map[string]S{})
	for i := range t.shards {
		t.shards[i].Store(&map[string]S{})
	}
	return t
}

// Get returns the series of raw's label value, creating it if needed.
func (t *Table[S]) Get(raw string) S {
	if s, ok := (*t.front.Load())[raw]; ok {
		return s
	}
	return t.getSharded(raw)
}

func (t *Table[S]) getSharded(raw string) S {
	sh := &t.shards[maphash.String(t.seed, raw)%tableShards]
	if s, ok := (*sh.Load())[raw]; ok {
		return s
	}
	s := t.byLabel(t.label(raw))
	if t.rawN.Load() < t.rawMax {
		t.remember(sh, raw, s)
	}
	return s
}

// remember adds raw to front while it has room, else to its shard sh,
// until rawMax raw values are remembered.
func (t *Table[S]) remember(sh *atomic.Pointer[map[string]S], raw string, s S) {
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
		m.Store(withEntry(*m.Load(), raw, s))
		t.rawN.Add(1)
	}
}

// withEntry returns a copy of m with raw added.
func withEntry[S any](m map[string]S, raw string, s S) *map[string]S {
	c := make(map[string]S, len(m)+1)
	maps.Copy(c, m)
	c[strings.Clone(raw)] = s
	return &c
}

func (t *Table[S]) byLabel(label string) S {
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	if label != Other {
		if t.n >= t.max {
			return t.byLabelLocked(Other)
		}
		t.n++
	}
	return t.byLabelLocked(label)
}

func (t *Table[S]) byLabelLocked(label string) S {
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	label = strings.Clone(label)
	s := t.newS(label)
	t.labels.Store(label, s)
	return s
}

// Each calls fn for the series of every label value.
func (t *Table[S]) Each(fn func(S)) { each(&t.labels, fn) }

// each calls fn for every value of m, a map to S.
func each[S any](m *sync.Map, fn func(S)) {
	m.Range(func(_, s any) bool {
		fn(s.(S))
		return true
	})
}
