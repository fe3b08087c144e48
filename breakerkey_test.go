package breakwater_test

import (
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// A breaker's snapshot carries its key; a transport without breakers has
// only nil ones, whose snapshot has none.
func TestBreakerKey(t *testing.T) {
	bs := newBreakers(t)
	for _, k := range []string{"a", "http://upstream.test", ""} {
		if got := bs.Get(k).Snapshot().Key; got != k {
			t.Errorf("Get(%q).Snapshot().Key = %q", k, got)
		}
	}
	tr, err := bw.NewTransport(bw.WithoutBreaker())
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Breakers().Get("a").Snapshot().Key; got != "" {
		t.Errorf("a switched-off breaker has key %q", got)
	}
}
