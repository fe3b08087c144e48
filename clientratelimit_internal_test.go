package breakwater

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/time/rate"
)

// newTestClientRateLimit is the state ClientRateLimit builds for limit and
// burst.
func newTestClientRateLimit(t *testing.T, limit rate.Limit, burst int) *clientRateLimit {
	t.Helper()
	rl, err := NewRateLimiters(limit, burst)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := newClientRateLimit(rl, RemoteAddrKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return crl
}

// Every value of the precomputed RateLimit table is the one formatted for
// its remaining tokens and seconds, and setHeaders writes it.
func TestClientRateLimitTable(t *testing.T) {
	for _, c := range []struct {
		limit rate.Limit
		burst int
		size  int
	}{
		{10, 10, 11 * 2},
		{0.5, 2, 3 * 5},
		{1e6, 1000, 1001 * 2},
		{1, 50, 0}, // 51·51 values, over rateTableMax: formatted on every response
	} {
		crl := newTestClientRateLimit(t, c.limit, c.burst)
		if len(crl.table) != c.size {
			t.Fatalf("%v/s, burst %d: table of %d values, want %d", c.limit, c.burst, len(crl.table), c.size)
		}
		for r := range int64(c.burst) + 1 {
			for s := range crl.window + 1 {
				h := http.Header{}
				crl.setHeaders(h, r, s, 0)
				if got, want := h["Ratelimit"], crl.rateValue(r, s); len(got) != 1 || got[0] != want {
					t.Fatalf("%v/s, burst %d: r=%d t=%d: RateLimit %q, want %q", c.limit, c.burst, r, s, got, want)
				}
			}
		}
	}
}

// A handler that adds a RateLimit value to a response does not change the
// table's other values: the shared slice has room for no more.
func TestClientRateLimitTableAdd(t *testing.T) {
	crl := newTestClientRateLimit(t, 10, 10)
	h := http.Header{}
	crl.setHeaders(h, 3, 1, 0)
	h.Add("RateLimit", `"other";r=0;t=1`)
	h2 := http.Header{}
	crl.setHeaders(h2, 4, 0, 0) // the next value of the table
	if got, want := h2.Values("RateLimit"), crl.rateValue(4, 0); len(got) != 1 || got[0] != want {
		t.Errorf("RateLimit %q after another response's Add, want %q", got, want)
	}
}

// A key longer than 128 bytes is stored as its SHA-256 digest, the same in
// every process (fixed values, not a per-process seed), so that replicas
// sharing a store share its bucket; shorter keys are stored as they are,
// except one that could be mistaken for a digest.
func TestClientRateLimitStoreKeyStable(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{strings.Repeat("a", 129), "#c12cb024a2e5551cca0e08fce8f1c5e3"},
		{"Bearer " + strings.Repeat("x", 593), "#87403dd2c045d2f19c02175fbeecc692"},
		{"#short", "#1a1abaa87a3df2a5dd6ae67f9bcabeca"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{"203.0.113.7", "203.0.113.7"},
		{"", ""},
	} {
		if got := storeKey(c.key); got != c.want {
			t.Errorf("storeKey(%.20q… %d bytes) = %q, want %q", c.key, len(c.key), got, c.want)
		}
	}
	long := strings.Repeat("x", 600)
	if n := testing.AllocsPerRun(100, func() { _ = storeKey(long) }); n > 2 {
		t.Errorf("storeKey of a long key: %v allocations, want at most 2 (the bytes hashed and the key)", n)
	}
}
