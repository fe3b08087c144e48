package redisstore_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// TestSharedLimitLongClientKeys: two replicas (each its own go-redis
// client, Store, registry and middleware) share one per-client limit of a
// burst of 10, keyed by the Authorization header. A client that spent its
// burst on one replica is refused on the other, whatever its key's
// length: a bearer token or a JWT longer than the 128 bytes kept as they
// are is stored under one Redis key by both.
func TestSharedLimitLongClientKeys(t *testing.T) {
	srv := redistest.New(t)
	var replicas []http.Handler
	for range 2 {
		store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
		rl, err := bw.NewRateLimiters(0.01, 10, bw.WithSharedLimiter(store.Limiter("inbound")))
		if err != nil {
			t.Fatal(err)
		}
		crl, err := bw.ClientRateLimit(rl, bw.HeaderKey("Authorization"))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	call := func(h http.Handler, key string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, n := range []int{20, 128, 129, 600, 4096} {
		key := "Bearer " + strings.Repeat(string(rune('a'+n%26)), n-len("Bearer "))
		for i := range 10 {
			if code := call(replicas[0], key); code != http.StatusOK {
				t.Fatalf("%d-byte key, call %d on replica A: %d, want 200", n, i+1, code)
			}
		}
		if code := call(replicas[0], key); code != http.StatusTooManyRequests {
			t.Fatalf("%d-byte key, call 11 on replica A: %d, want 429", n, code)
		}
		admitted := 0
		for range 10 {
			if call(replicas[1], key) == http.StatusOK {
				admitted++
			}
		}
		if admitted != 0 {
			t.Errorf("%d-byte key: replica B admitted %d more after the burst of 10 was spent on A, want 0", n, admitted)
		}
	}
	// Every key in Redis is bounded, however long the client's.
	keys, err := newRedisClient(t, srv.Addr).Keys(t.Context(), "breakwater:rl:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if len(k) > len("breakwater:rl:inbound:{}")+128 {
			t.Errorf("a Redis key of %d bytes: %.60q…", len(k), k)
		}
	}
	if len(keys) != 5 {
		t.Errorf("%d rate limit keys in Redis, want one per client (5): %q", len(keys), keys)
	}
}
