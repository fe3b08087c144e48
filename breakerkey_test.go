package breakwater_test

import (
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// A breaker knows its key; the nil breaker of a disabled registry has none.
func TestBreakerKey(t *testing.T) {
	bs := newBreakers(t)
	for _, k := range []string{"a", "http://upstream.test", ""} {
		if got := bs.Get(k).Key(); got != k {
			t.Errorf("Get(%q).Key() = %q", k, got)
		}
	}
	disabled := newBreakers(t, bw.WithBreakerMode(bw.ModeDisabled))
	if got := disabled.Get("a").Key(); got != "" {
		t.Errorf("a disabled registry's breaker has key %q", got)
	}
}
