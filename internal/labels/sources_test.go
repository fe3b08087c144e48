package labels

import (
	"slices"
	"sync"
	"testing"
)

func TestSources(t *testing.T) {
	var s Sources[*int]
	if s.Load() != nil {
		t.Fatal("the zero value holds sources")
	}
	a, b := new(int), new(int)
	var wg sync.WaitGroup
	for _, src := range []*int{a, nil, b} {
		wg.Go(func() { s.Add(src) })
	}
	wg.Wait()
	got := s.Load()
	if len(got) != 2 || !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Fatalf("sources %v, want a and b and no nil", got)
	}
}
