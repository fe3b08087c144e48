package labels

import (
	"fmt"
	"slices"
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
