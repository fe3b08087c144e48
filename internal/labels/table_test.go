package labels

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

type series struct{ label string }

func newSeries(label string) *series { return &series{label: label} }

// labelsOf returns the label values of t's series, sorted.
func labelsOf(t *Table[*series]) []string {
	var got []string
	t.Each(func(s *series) { got = append(got, s.label) })
	slices.Sort(got)
	return got
}

func TestTableCap(t *testing.T) {
	tb := NewTable(3, Clean, newSeries)
	for _, tc := range []struct{ raw, want string }{
		{"a", "a"}, {"b", "b"}, {"a", "a"}, {"", None}, {"c", Other}, {"d", Other}, {"b", "b"}, {Other, Other},
	} {
		if got := tb.Get(tc.raw).label; got != tc.want {
			t.Errorf("Get(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	if got, want := labelsOf(tb), []string{"a", "b", None, Other}; !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}

// TestTableOtherIsNotCounted: a raw value whose label is Other takes no
// place under the cap.
func TestTableOtherIsNotCounted(t *testing.T) {
	tb := NewTable(1, func(raw string) string {
		if strings.HasPrefix(raw, "x") {
			return Other
		}
		return raw
	}, newSeries)
	tb.Get("x1")
	tb.Get("x2")
	if got := tb.Get("a").label; got != "a" {
		t.Errorf("Get(a) = %q after two raw values labelled other, want a", got)
	}
}

// TestTableSharesSeries: raw values with one label share its series, made
// once.
func TestTableSharesSeries(t *testing.T) {
	made := 0
	tb := NewTable(10, func(raw string) string { return strings.ToLower(raw) }, func(label string) *series {
		made++
		return newSeries(label)
	})
	if tb.Get("A") != tb.Get("a") || made != 1 {
		t.Errorf("A and a: %d series made, want one shared", made)
	}
}

// TestTableBeyondRemembered: raw values past rawMax, and past the front
// map into the shards, keep their labels; the ones not remembered are
// labelled on every Get.
func TestTableBeyondRemembered(t *testing.T) {
	calls := map[string]int{}
	var mu sync.Mutex
	tb := newTable(1000, frontMax+10, func(raw string) string {
		mu.Lock()
		calls[raw]++
		mu.Unlock()
		return raw
	}, newSeries)
	n := frontMax + 20
	for range 2 {
		for i := range n {
			raw := fmt.Sprint(i)
			if got := tb.Get(raw).label; got != raw {
				t.Fatalf("Get(%q) = %q", raw, got)
			}
		}
	}
	if got := tb.rawN.Load(); got != int64(frontMax+10) {
		t.Errorf("%d raw values remembered, want %d", got, frontMax+10)
	}
	if len(*tb.front.Load()) != frontMax {
		t.Errorf("front holds %d, want %d", len(*tb.front.Load()), frontMax)
	}
	if calls["0"] != 1 || calls[fmt.Sprint(frontMax+5)] != 1 || calls[fmt.Sprint(n-1)] != 2 {
		t.Errorf("label calls: first %d, sharded %d, beyond %d; want 1, 1, 2",
			calls["0"], calls[fmt.Sprint(frontMax+5)], calls[fmt.Sprint(n-1)])
	}
}

func TestTableConcurrent(t *testing.T) {
	tb := NewTable(50, Clean, newSeries)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				tb.Get(fmt.Sprint((i * (g + 1)) % 200))
			}
		})
	}
	wg.Wait()
	if got := len(labelsOf(tb)); got != 51 {
		t.Errorf("%d label values, want 50 and other", got)
	}
}

func TestTableGetAllocatesNothing(t *testing.T) {
	tb := NewTable(10, Clean, newSeries)
	tb.Get("a.example")
	if n := testing.AllocsPerRun(100, func() { tb.Get("a.example") }); n != 0 {
		t.Errorf("Get of a remembered raw value allocates %v times, want 0", n)
	}
}
