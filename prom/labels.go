package prom

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/breakwater-go/breakwater/internal/labels"
)

// Label values the collector produces on its own.
const (
	// OtherLabel is the value of a key or route label once the cap is
	// reached, and of a method, status class, mechanism or reason outside
	// the known set.
	OtherLabel = labels.Other
	// NoneLabel is the value of a key or route label for an empty key or
	// route (an inbound request no route pattern matched, for example).
	NoneLabel = labels.None
	// MaxLabelLen is the longest key or route label value, in bytes; longer
	// values are cut at a rune boundary.
	MaxLabelLen = labels.MaxLen
)

// methodNames holds the method label values; the last one is OtherLabel.
var methodNames = append(slices.Clone(labels.Methods), OtherLabel)

// methodIndex maps a request method to its label: one of the nine methods
// of RFC 9110 and RFC 5789 (case-insensitively, "" being GET as in
// net/http), else OtherLabel.
func methodIndex(m string) int {
	if i := labels.MethodIndex(m); i < len(labels.Methods) {
		return i
	}
	for i, name := range labels.Methods {
		if strings.EqualFold(m, name) {
			return i
		}
	}
	return len(labels.Methods)
}

// statusClassNames holds the status class label values; the last one is
// OtherLabel (a status outside 100–599).
var statusClassNames = []string{"1xx", "2xx", "3xx", "4xx", "5xx", OtherLabel}

func statusClassIndex(status int) int {
	if status >= 100 && status <= 599 {
		return status/100 - 1
	}
	return len(statusClassNames) - 1
}

// table maps raw values (keys, routes) to the series of their label value,
// bounding the number of label values.
//
// Raw values are remembered in immutable maps published through atomic
// pointers and copied, under a lock, when a raw value is added: the first
// frontMax in one map, so that a lookup among them is one map load, and the
// next ones, up to rawMax in all, in shards, so that copying stays cheap
// (a lookup there costs one more hash). Any other raw value is mapped to
// its label again on every lookup, which stays correct and bounded, only
// slower.
//
// At most max label values are created, plus OtherLabel: once max is
// reached, every new label value becomes OtherLabel. Label values are never
// removed, so a raw value keeps its label for the collector's life.
type table[S any] struct {
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
	n      int        // label values created, OtherLabel excluded
}

const (
	tableShards = 64
	frontMax    = 256
)

func newTable[S any](max, rawMax int, label func(string) string, newS func(string) S) *table[S] {
	t := &table[S]{max: max, rawMax: int64(rawMax), label: label, newS: newS, seed: maphash.MakeSeed()}
	t.front.Store(&map[string]S{})
	for i := range t.shards {
		t.shards[i].Store(&map[string]S{})
	}
	return t
}

// get returns the series of raw's label value, creating it if needed.
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
	s := t.byLabel(t.label(raw))
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

func (t *table[S]) byLabel(label string) S {
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	if label != OtherLabel {
		if t.n >= t.max {
			return t.byLabelLocked(OtherLabel)
		}
		t.n++
	}
	return t.byLabelLocked(label)
}

func (t *table[S]) byLabelLocked(label string) S {
	if s, ok := t.labels.Load(label); ok {
		return s.(S)
	}
	label = strings.Clone(label)
	s := t.newS(label)
	t.labels.Store(label, s)
	return s
}

// each calls fn for the series of every label value.
func (t *table[S]) each(fn func(S)) {
	t.labels.Range(func(_, s any) bool {
		fn(s.(S))
		return true
	})
}
