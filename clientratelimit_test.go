package breakwater_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
)

func newClientRateLimit(t testing.TB, limit rate.Limit, burst int, key bw.KeyFunc, opts ...bw.Option) (func(http.Handler) http.Handler, *bw.RateLimiters) {
	t.Helper()
	rl, err := bw.NewRateLimiters(limit, burst)
	if err != nil {
		t.Fatalf("NewRateLimiters: %v", err)
	}
	crl, err := bw.ClientRateLimit(rl, key, opts...)
	if err != nil {
		t.Fatalf("ClientRateLimit: %v", err)
	}
	return crl, rl
}

// from serves one request from remote (with extra headers) through h.
func from(h http.Handler, remote string, header ...string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, reqFrom(remote, header...))
	return rec
}

func TestClientRateLimitBurstThen429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var last bw.Rejection
		crl, _ := newClientRateLimit(t, 10, 10, bw.RemoteAddrKey, bw.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, rej bw.Rejection) {
			last = rej
			bw.WriteProblem(w, r, rej)
		}))
		r := chi.NewRouter()
		r.Use(crl)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {})
		for i := 1; i <= 10; i++ {
			rec := from(r, "192.0.2.1:1000")
			if rec.Code != 200 {
				t.Fatalf("request %d: %d", i, rec.Code)
			}
			if p := rec.Header().Get("RateLimit-Policy"); p != `"default";q=10;w=1` {
				t.Fatalf("RateLimit-Policy %q", p)
			}
			if got, want := rec.Header().Get("RateLimit"), fmt.Sprintf(`"default";r=%d;t=1`, 10-i); got != want {
				t.Fatalf("request %d: RateLimit %q, want %q", i, got, want)
			}
		}
		for i := 0; i < 3; i++ {
			rec := from(r, "192.0.2.1:1000")
			if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("RateLimit") != `"default";r=0;t=1` {
				t.Fatalf("over the burst: %d Retry-After %q RateLimit %q", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
			}
			if p := decodeProblem(t, rec.Header(), rec.Body.String()); p.Status != 429 || p.Title != "Too Many Requests" {
				t.Fatalf("problem %+v", p)
			}
		}
		// The exact wait the 429 announced (rounded up to 1 s in the
		// header) is when the next request is admitted. (x/time/rate
		// admits a request whose wait rounds down to 0 ns, so the boundary
		// is checked to the microsecond.)
		if last.RetryAfter != 100*time.Millisecond || last.Key != "192.0.2.1" || last.Mechanism != bw.MechRateLimit {
			t.Fatalf("rejection %+v", last)
		}
		time.Sleep(last.RetryAfter - time.Microsecond)
		if rec := from(r, "192.0.2.1:1000"); rec.Code != 429 {
			t.Fatalf("1 µs before the next token: %d", rec.Code)
		}
		time.Sleep(time.Microsecond)
		if rec := from(r, "192.0.2.1:1000"); rec.Code != 200 {
			t.Fatalf("at the next token: %d", rec.Code)
		}
		// A client that waits the whole Retry-After finds its bucket full.
		time.Sleep(time.Second)
		for i := 0; i < 10; i++ {
			if rec := from(r, "192.0.2.1:1000"); rec.Code != 200 {
				t.Fatalf("after Retry-After, request %d: %d", i, rec.Code)
			}
		}
	})
}

func TestClientRateLimitRetryAfterRoundsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crl, _ := newClientRateLimit(t, 0.25, 2, bw.RemoteAddrKey) // a token every 4 s
		h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		from(h, "192.0.2.1:1")
		if rec := from(h, "192.0.2.1:1"); rec.Header().Get("RateLimit-Policy") != `"default";q=2;w=8` || rec.Header().Get("RateLimit") != `"default";r=0;t=4` {
			t.Fatalf("policy %q, quota %q", rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
		}
		for _, step := range []struct {
			sleep      time.Duration
			status     int
			retryAfter string
		}{
			{0, 429, "4"},
			{time.Second, 429, "3"},
			{2500 * time.Millisecond, 429, "1"}, // 0.5 s left
			{499 * time.Millisecond, 429, "1"},  // 1 ms left: never 0
			{time.Millisecond, 200, ""},
		} {
			time.Sleep(step.sleep)
			rec := from(h, "192.0.2.1:1")
			if rec.Code != step.status || rec.Header().Get("Retry-After") != step.retryAfter {
				t.Fatalf("after %s more: %d Retry-After %q, want %d %q", step.sleep, rec.Code, rec.Header().Get("Retry-After"), step.status, step.retryAfter)
			}
		}
	})
}

func TestClientRateLimitKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xff, err := bw.ForwardedForKey("X-Forwarded-For", "10.0.0.0/8")
		if err != nil {
			t.Fatal(err)
		}
		crl, rl := newClientRateLimit(t, 1, 2, xff)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /", func(http.ResponseWriter, *http.Request) {})
		h := crl(mux)
		codes := func(remote string, header ...string) string {
			var out []string
			for range 3 {
				out = append(out, fmt.Sprint(from(h, remote, header...).Code))
			}
			return strings.Join(out, " ")
		}
		for _, tc := range []struct {
			name, remote string
			header       []string
			want         string
		}{
			{"client A", "192.0.2.1:1", nil, "200 200 429"},
			{"client B is independent", "192.0.2.2:1", nil, "200 200 429"},
			{"spoofed X-Forwarded-For from an untrusted peer is ignored", "192.0.2.1:2", []string{"X-Forwarded-For", "198.51.100.77"}, "429 429 429"},
			{"the same header from a trusted proxy is honoured", "10.0.0.1:3", []string{"X-Forwarded-For", "198.51.100.77"}, "200 200 429"},
			{"another client behind the proxy", "10.0.0.1:4", []string{"X-Forwarded-For", "198.51.100.78"}, "200 200 429"},
			{"ipv6 client", "[2001:db8:1:2::1]:1", nil, "200 200 429"},
			{"same /64 shares the bucket", "[2001:db8:1:2:ffff::9]:1", nil, "429 429 429"},
			{"another /64 does not", "[2001:db8:1:3::1]:1", nil, "200 200 429"},
		} {
			if got := codes(tc.remote, tc.header...); got != tc.want {
				t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
			}
		}
		for _, k := range []string{"192.0.2.1", "198.51.100.77", "2001:db8:1:2::/64"} {
			if _, ok := bucketOf(rl, k); !ok {
				t.Errorf("no bucket for %q", k)
			}
		}
	})
}

func TestClientRateLimitHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crl, rl := newClientRateLimit(t, 2, 5, bw.HeaderKey("X-API-Key"), bw.WithRateLimitPolicyName("per-key"), bw.WithXRateLimitHeaders(true))
		h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		rec := from(h, "192.0.2.1:1", "X-API-Key", "k")
		want := map[string]string{
			"RateLimit-Policy":      `"per-key";q=5;w=3`,
			"RateLimit":             `"per-key";r=4;t=1`,
			"X-RateLimit-Limit":     "5",
			"X-RateLimit-Remaining": "4",
			"X-RateLimit-Reset":     fmt.Sprint(time.Now().Add(time.Second).Unix()),
		}
		for k, v := range want {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
		// A bucket full again in exactly one second resets at the next
		// whole second, not one past it.
		one, _ := newClientRateLimit(t, 1, 5, bw.RemoteAddrKey, bw.WithXRateLimitHeaders(true))
		rec = from(one(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "192.0.2.1:1")
		if got, want := rec.Header().Get("X-RateLimit-Reset"), fmt.Sprint(time.Now().Add(time.Second).Unix()); got != want {
			t.Errorf("X-RateLimit-Reset of a bucket full in 1s: %s, want %s", got, want)
		}
		// A long client-chosen key is stored as a short hash.
		from(h, "192.0.2.1:1", "X-API-Key", strings.Repeat("x", 10_000))
		for _, s := range rl.Snapshot().RateLimiters {
			if len(s.Key) > 128 {
				t.Errorf("stored a key of %d bytes", len(s.Key))
			}
		}
	})
}

func TestClientRateLimitOptionErrors(t *testing.T) {
	rl, _ := bw.NewRateLimiters(1, 1)
	for name, f := range map[string]func() error{
		"nil registry": func() error { _, err := bw.ClientRateLimit(nil, bw.RemoteAddrKey); return err },
		"nil key":      func() error { _, err := bw.ClientRateLimit(rl, nil); return err },
		"bad policy": func() error {
			_, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey, bw.WithRateLimitPolicyName(`a"b`))
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A policy name is 1 to 64 printable ASCII characters, space and tilde
// included, other than '"' and '\': what a structured field string holds
// unescaped. A valid name is the RateLimit-Policy field's.
func TestClientRateLimitPolicyNames(t *testing.T) {
	rl, err := bw.NewRateLimiters(10, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "per key", "~", "!", strings.Repeat("x", 64)} {
		crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey, bw.WithRateLimitPolicyName(name))
		if err != nil {
			t.Errorf("name %q refused: %v", name, err)
			continue
		}
		rec := from(crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "192.0.2.1:1")
		if got, want := rec.Header().Get("RateLimit-Policy"), `"`+name+`";q=10;w=1`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
	}
	for _, name := range []string{"", strings.Repeat("x", 65), `a"b`, `a\b`, "a\x1fb", "a\x7fb", "caf\u00e9"} {
		if _, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey, bw.WithRateLimitPolicyName(name)); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

// An admitted request allocates nothing, up to the largest bucket whose
// header values fit the precomputed table: (burst+1)·(window+1) = 2048.
func TestClientRateLimitAllowedRequestDoesNotAllocate(t *testing.T) {
	for _, burst := range []int{10, 1023} {
		crl, _ := newClientRateLimit(t, 1e9, burst, bw.RemoteAddrKey) // never short of tokens; a window of 1 s
		h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		req := reqFrom("192.0.2.1:1000")
		w := newBenchWriter()
		h.ServeHTTP(w, req)
		if n := testing.AllocsPerRun(1000, func() { w.reset(); h.ServeHTTP(w, req) }); n != 0 {
			t.Errorf("burst %d: an admitted request allocates %v times", burst, n)
		}
	}
}

// TestClientRateLimitMemoryIsBounded sends a million distinct clients
// through the middleware (a hundred thousand under the race detector,
// which makes each ten times slower) and checks that the store never
// holds more than its cap.
func TestClientRateLimitMemoryIsBounded(t *testing.T) {
	const maxKeys = 10_000
	clients := 1_000_000
	if raceEnabled || testing.Short() {
		clients = 100_000
	}
	rl, err := bw.NewRateLimiters(10, 10, bw.WithKeyLimits(maxKeys, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		t.Fatal(err)
	}
	h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := reqFrom("")
	w := newBenchWriter()
	var peak int
	for i := range clients {
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		w.reset()
		h.ServeHTTP(w, req)
		if i%4096 == 0 || i == clients-1 { // a snapshot costs a walk of the registry
			peak = max(peak, bucketCount(rl))
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d clients: %d keys stored at the end, %d at most (cap %d); HeapInuse after GC %.1f MiB",
		clients, bucketCount(rl), peak, maxKeys, float64(ms.HeapInuse)/(1<<20))
	if peak > maxKeys {
		t.Fatalf("the store grew to %d keys, over its cap of %d", peak, maxKeys)
	}
	if ms.HeapInuse > 512<<20 {
		t.Fatalf("HeapInuse %d MiB", ms.HeapInuse>>20)
	}
	runtime.KeepAlive(crl)
}

// TestClientRateLimitResetNeverPastRetryAfter pins the RateLimit field's t
// to the draft's meaning, "seconds until additional quota is made
// available": on a 429 it is Retry-After itself (it once said t=2 beside
// Retry-After: 1, counting to a full bucket), and on an admitted request
// it is when the next token comes, never the time to refill everything.
func TestClientRateLimitResetNeverPastRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crl, _ := newClientRateLimit(t, 1, 3, bw.RemoteAddrKey) // 1/s, burst 3: w=3
		h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i, want := range []string{`"default";r=2;t=1`, `"default";r=1;t=1`, `"default";r=0;t=1`} {
			if rec := from(h, "192.0.2.9:1"); rec.Code != 200 || rec.Header().Get("RateLimit") != want {
				t.Fatalf("request %d: %d RateLimit %q, want %q", i+1, rec.Code, rec.Header().Get("RateLimit"), want)
			}
		}
		time.Sleep(400 * time.Millisecond)
		rec := from(h, "192.0.2.9:1")
		if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("RateLimit") != `"default";r=0;t=1` {
			t.Fatalf("refused: %d Retry-After %q RateLimit %q, want 1 and t=1", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
		}
		time.Sleep(2 * time.Second) // 2.6 s after the burst: 2 tokens back, the third in 0.4 s
		if rec := from(h, "192.0.2.9:1"); rec.Code != 200 || rec.Header().Get("RateLimit") != `"default";r=1;t=1` {
			t.Fatalf("after 2 s: %d RateLimit %q", rec.Code, rec.Header().Get("RateLimit"))
		}
		time.Sleep(10 * time.Second)
		if rec := from(h, "192.0.2.9:1"); rec.Header().Get("RateLimit") != `"default";r=2;t=1` {
			t.Fatalf("refilled: RateLimit %q", rec.Header().Get("RateLimit"))
		}
	})
}

// snapshotStore is a SharedLimiter answering from a local registry, so a
// ClientRateLimit on it writes its fields from the registry's snapshots.
type snapshotStore struct{ rl *bw.RateLimiters }

func (s snapshotStore) Take(_ context.Context, key string, _ rate.Limit, _ int, _ time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	return s.rl.Take(key), 0, nil
}

func (snapshotStore) Replicas() int { return 1 }

// TestClientRateLimitFieldsMatchSnapshot drives a local ClientRateLimit,
// which reads its bucket's GCRA directly, and one whose every answer is a
// RateLimitSnapshot, with the same random arrivals: status, Retry-After and
// every RateLimit field must agree.
func TestClientRateLimitFieldsMatchSnapshot(t *testing.T) {
	for _, tc := range []struct {
		limit rate.Limit
		burst int
	}{{10, 3}, {1000, 50}, {3, 1}, {0.5, 2}, {0.2, 5}, {1, 1}} {
		t.Run(fmt.Sprintf("%v/%d", tc.limit, tc.burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var retry [2]time.Duration // each side's last Rejection.RetryAfter
				deny := func(i int) bw.Option {
					return bw.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, rej bw.Rejection) {
						retry[i] = rej.RetryAfter
						bw.WriteProblem(w, r, rej)
					})
				}
				opts := []bw.Option{bw.WithXRateLimitHeaders(true)}
				local, _ := newClientRateLimit(t, tc.limit, tc.burst, bw.RemoteAddrKey, append(opts, deny(0))...)
				inner, err := bw.NewRateLimiters(tc.limit, tc.burst, bw.WithMaxWait(0))
				if err != nil {
					t.Fatal(err)
				}
				shared, err := bw.NewRateLimiters(tc.limit, tc.burst, bw.WithSharedLimiter(snapshotStore{inner}), bw.WithMaxWait(0))
				if err != nil {
					t.Fatal(err)
				}
				ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
				a := local(ok)
				b := mw(t)(bw.ClientRateLimit(shared, bw.RemoteAddrKey, append(opts, deny(1))...))(ok)
				r := rand.New(rand.NewPCG(uint64(tc.burst), 7))
				mean := float64(time.Second) / float64(tc.limit)
				codes := map[int]int{}
				for i := range 2000 {
					time.Sleep(time.Duration(r.ExpFloat64() * mean / 3)) // 1.5 times the limit per client
					remote := fmt.Sprintf("192.0.2.%d:1", r.IntN(2))
					ra, rb := from(a, remote), from(b, remote)
					codes[ra.Code]++
					if retry[0] != retry[1] {
						t.Fatalf("request %d: refused for %v, from a snapshot for %v", i, retry[0], retry[1])
					}
					for _, f := range []string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
						if ra.Code != rb.Code || ra.Header().Get(f) != rb.Header().Get(f) {
							t.Fatalf("request %d: %d %s %q, from a snapshot %d %q", i, ra.Code, f, ra.Header().Get(f), rb.Code, rb.Header().Get(f))
						}
					}
				}
				if codes[200] == 0 || codes[429] == 0 {
					t.Fatalf("statuses %v: the arrivals must meet both answers", codes)
				}
			})
		})
	}
}

// fixedStore is a shared limiter that always gives the same answer.
type fixedStore struct{ st bw.RateLimitSnapshot }

func (s fixedStore) Take(context.Context, string, rate.Limit, int, time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	return s.st, 0, nil
}

func (fixedStore) Replicas() int { return 1 }

// A full bucket as a shared store reports it, even with more quota than
// the burst (a store counts it as far as it knows it), gets its RateLimit
// field: r as the store says, and t=0, since no quota is awaited.
func TestClientRateLimitStoreAnswerBeyondTheBurst(t *testing.T) {
	rl, err := bw.NewRateLimiters(10, 10, bw.WithSharedLimiter(fixedStore{bw.RateLimitSnapshot{Remaining: 11}}), bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(t)(bw.ClientRateLimit(rl, bw.RemoteAddrKey))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := from(h, "192.0.2.1:1")
	if got := rec.Header().Get("RateLimit"); rec.Code != http.StatusOK || got != `"default";r=11;t=0` {
		t.Fatalf("%d with RateLimit %q, want 200 with r=11", rec.Code, got)
	}
}

// A key of up to 128 bytes is stored as it is; a longer one as a hash.
func TestClientRateLimitKeyLength(t *testing.T) {
	crl, rl := newClientRateLimit(t, 10, 10, bw.HeaderKey("X-API-Key"))
	h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	k128 := strings.Repeat("k", 128)
	from(h, "192.0.2.1:1", "X-API-Key", k128)
	from(h, "192.0.2.1:1", "X-API-Key", k128+"k")
	var keys []string
	for _, s := range rl.Snapshot().RateLimiters {
		keys = append(keys, s.Key)
	}
	if len(keys) != 2 || !slices.Contains(keys, k128) {
		t.Fatalf("stored keys %q, want the 128-byte key as it is and one hash", keys)
	}
	for _, k := range keys {
		if k != k128 && (len(k) > 128 || strings.HasPrefix(k, "kkk")) {
			t.Fatalf("a 129-byte key stored as %q, want a hash", k)
		}
	}
}

// Two limits on one route each add their policy to the RateLimit fields:
// the client sees both, the innermost's refusal included.
func TestClientRateLimitsOnOneRouteShowEveryPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		burst, _ := newClientRateLimit(t, 100, 2, bw.RemoteAddrKey, bw.WithRateLimitPolicyName("burst"))
		sustained, _ := newClientRateLimit(t, 1, 10, bw.RemoteAddrKey, bw.WithRateLimitPolicyName("sustained"))
		h := sustained(burst(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		policies, fields := rec.Header().Values("RateLimit-Policy"), rec.Header().Values("RateLimit")
		if len(policies) != 2 || !strings.HasPrefix(policies[0], `"sustained"`) || !strings.HasPrefix(policies[1], `"burst"`) {
			t.Errorf("RateLimit-Policy %q, want the sustained then the burst policy", policies)
		}
		if len(fields) != 2 || !strings.HasPrefix(fields[0], `"sustained"`) || !strings.HasPrefix(fields[1], `"burst"`) {
			t.Errorf("RateLimit %q, want the sustained then the burst limit", fields)
		}
	})
}
