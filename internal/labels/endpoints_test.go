package labels

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestEndpointsCap(t *testing.T) {
	var es Endpoints[*series]
	for i := range MaxEndpoints + 10 {
		ep := fmt.Sprintf("https://%d.example", i)
		want := ep
		if i >= MaxEndpoints {
			want = Other
		}
		if got := es.Get(ep, newSeries).label; got != want {
			t.Fatalf("endpoint %d: %q, want %q", i, got, want)
		}
	}
	if got := es.Get("https://0.example", newSeries).label; got != "https://0.example" {
		t.Errorf("a known endpoint after the cap: %q", got)
	}
	if got := es.Get("", newSeries).label; got != Other {
		t.Errorf("an empty endpoint after the cap: %q, want %q", got, Other)
	}
	var got []string
	es.Each(func(s *series) { got = append(got, s.label) })
	if len(got) != MaxEndpoints+1 || !slices.Contains(got, Other) {
		t.Errorf("%d endpoint values (other among them: %v), want %d and other", len(got), slices.Contains(got, Other), MaxEndpoints)
	}
}

func TestEndpointsClean(t *testing.T) {
	var es Endpoints[*series]
	if got := es.Get("", newSeries).label; got != None {
		t.Errorf("empty endpoint: %q, want %q", got, None)
	}
	if got := es.Get("a\xff", newSeries).label; got != "a\uFFFD" {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

func TestEndpointsConcurrent(t *testing.T) {
	var es Endpoints[*series]
	made := 0 // newS runs under the lock
	newS := func(v string) *series { made++; return newSeries(v) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 100 {
				es.Get(fmt.Sprint(i), newS)
			}
		})
	}
	wg.Wait()
	if made != MaxEndpoints+1 {
		t.Errorf("%d series made, want %d and other", made, MaxEndpoints)
	}
}

// TestEndpointsSameValue: endpoints that clean to one value (cut at MaxLen,
// or differing only in invalid UTF-8) share its series and count once
// under the cap, so that no two series carry the same value.
func TestEndpointsSameValue(t *testing.T) {
	var es Endpoints[*series]
	long := "https://" + strings.Repeat("a", MaxLen)
	a, b := es.Get(long+"/x", newSeries), es.Get(long+"/y", newSeries)
	if a != b {
		t.Errorf("%q and %q: two series of value %q, want one", long+"/x", long+"/y", a.label)
	}
	if es.Get("a\xff", newSeries) != es.Get("a\xfe", newSeries) {
		t.Error(`"a\xff" and "a\xfe": two series, want one`)
	}
	for i := range MaxEndpoints - 2 {
		es.Get(fmt.Sprint(i), newSeries)
	}
	if got := es.Get("last", newSeries).label; got != Other {
		t.Errorf("endpoint %d: %q, want %q", MaxEndpoints+1, got, Other)
	}
	var values []string
	es.Each(func(s *series) { values = append(values, s.label) })
	slices.Sort(values)
	if got := len(slices.Compact(values)); got != len(values) || got != MaxEndpoints+1 {
		t.Errorf("%d series of %d values, want %d of distinct values", len(values), got, MaxEndpoints+1)
	}
}

// TestEndpointsRawBound: raw endpoints that share values are remembered up
// to maxRawEndpoints; the others still find their series.
func TestEndpointsRawBound(t *testing.T) {
	var es Endpoints[*series]
	long := "https://" + strings.Repeat("a", MaxLen)
	first := es.Get(long, newSeries)
	for i := range 2 * maxRawEndpoints {
		if es.Get(fmt.Sprint(long, i), newSeries) != first {
			t.Fatalf("endpoint %d: another series", i)
		}
	}
	if es.nRaw != maxRawEndpoints {
		t.Errorf("%d raw endpoints remembered, want %d", es.nRaw, maxRawEndpoints)
	}
}
