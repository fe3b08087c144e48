package breakwater

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestInboundKeyFuncPanicHoldsNothing: a key function or exempt predicate
// that panics on some requests panics those requests only, as a handler
// would; the requests after them find every token, slot and breaker as if
// the panicking ones had never come.
func TestInboundKeyFuncPanicHoldsNothing(t *testing.T) {
	boom := func(r *http.Request) bool { return r.Header.Get("Boom") != "" }
	key := func(r *http.Request) string {
		if boom(r) {
			panic("boom")
		}
		return "k"
	}
	exempt := func(r *http.Request) bool {
		if boom(r) {
			panic("boom")
		}
		return false
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	rl, err := NewRateLimiters(1, 1, WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	bh, err := NewBulkheads(1, WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	bs, err := NewBreakers(WithPolicy(Consecutive(1)))
	if err != nil {
		t.Fatal(err)
	}
	crl, err := ClientRateLimit(rl, key)
	if err != nil {
		t.Fatal(err)
	}
	crlExempt, err := ClientRateLimit(rl, RemoteAddrKey, WithExempt(exempt))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := Shedder(bh, WithKeyFunc(key))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := RouteBreaker(bs, WithKeyFunc(key))
	if err != nil {
		t.Fatal(err)
	}
	for name, mw := range map[string]func(http.Handler) http.Handler{
		"ClientRateLimit": crl, "ClientRateLimit WithExempt": crlExempt, "Shedder": shed, "RouteBreaker": rb,
	} {
		t.Run(name, func(t *testing.T) {
			h := mw(ok)
			for range 3 {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Boom", "1")
				func() {
					defer func() {
						if recover() == nil {
							t.Error("a panicking key function did not panic the request")
						}
					}()
					h.ServeHTTP(httptest.NewRecorder(), req)
				}()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("the request after the panics got %d, want 200", rec.Code)
			}
			rl.Reset("k")
			rl.Reset("192.0.2.1")
		})
	}
}
