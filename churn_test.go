package breakwater_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// churnKeys overrides the number of distinct keys the churn tests send
// (the figures in the documentation use 1,000,000).
var churnKeys = flag.Int("churn.keys", 0, "distinct keys per churn test (0: a size that keeps go test fast)")

// churnRates are the arrival rates of new keys, per second of virtual time.
var churnRates = []int{2_000, 50_000}

const churnCap = 10_000

func churnSize() int {
	switch {
	case *churnKeys > 0:
		return *churnKeys
	case raceEnabled || testing.Short():
		return 4 * churnCap
	}
	return 20 * churnCap
}

// pace sleeps, in virtual time, so that keys arrive at rate per second.
func pace(i, rate int) {
	const every = 50
	if i%every == every-1 {
		time.Sleep(time.Duration(every) * time.Second / time.Duration(rate))
	}
}

// clientIP returns the i-th distinct client address.
func clientIP(i int) string {
	return fmt.Sprintf("%d.%d.%d.%d:1234", 11+i>>24, byte(i>>16), byte(i>>8), byte(i))
}

// A per-client rate limit whose registry is full makes room for a new
// client: a client's first request is never refused because of other
// clients' state, and the registry stays within its cap.
func TestChurnNeverRefusesFirstTimeClients(t *testing.T) {
	for _, rate := range churnRates {
		t.Run(strconv.Itoa(rate)+"/s", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rl, err := bw.NewRateLimiters(10, 10, bw.WithKeyLimits(churnCap, 10*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
				if err != nil {
					t.Fatal(err)
				}
				h := crl(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				n, refused, peak := churnSize(), 0, 0
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				for i := range n {
					r.RemoteAddr = clientIP(i)
					w := &discardWriter{}
					h.ServeHTTP(w, r)
					if w.status == http.StatusTooManyRequests {
						refused++
					}
					if i%4096 == 0 || i == n-1 { // a snapshot costs a walk of the registry
						peak = max(peak, bucketCount(rl))
					}
					pace(i, rate)
				}
				t.Logf("%d new clients at %d/s: %d refused (%.2f%%), peak registry size %d", n, rate, refused, 100*float64(refused)/float64(n), peak)
				if refused != 0 {
					t.Errorf("%d of %d first-time clients were refused", refused, n)
				}
				if peak > churnCap {
					t.Errorf("the registry grew to %d keys, over its cap of %d", peak, churnCap)
				}
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}

func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

// churnBase answers instantly: 500 for fail.test, 429 with Retry-After: 30
// for quota.test, 200 for every other host.
func churnBase() http.RoundTripper {
	return bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}
		switch req.URL.Host {
		case "fail.test":
			resp.StatusCode = http.StatusInternalServerError
		case "quota.test":
			resp.StatusCode = http.StatusTooManyRequests
			resp.Header.Set("Retry-After", "30")
		}
		return resp, nil
	})
}

// churnTransport has every stage on, each registry capped at churnCap.
func churnTransport(t testing.TB, rateLimit bool) *bw.Transport {
	opts := []bw.Option{
		bw.WithBase(churnBase()),
		bw.WithKeyLimits(churnCap, 10*time.Minute),
		bw.WithPolicy(bw.Window(10, time.Minute)),
		bw.WithOpenTimeout(time.Minute, time.Minute), // open for the whole churn
		bw.WithConcurrencyLimit(64),
	}
	if rateLimit {
		opts = append(opts, bw.WithRateLimit(100, 10))
	}
	tr, err := bw.NewTransport(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func churnGet(tr http.RoundTripper, host string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Among a churn of new upstream hosts, every healthy host's call goes
// through at once, a failing host's breaker opens on exactly its 11th
// failing call (Window(10, …)) and stays open, a paused host stays paused,
// and every registry stays within its cap.
func TestChurnNeverRejectsHealthyHosts(t *testing.T) {
	for _, rate := range churnRates {
		t.Run(strconv.Itoa(rate)+"/s", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := churnTransport(t, true)
				n := churnSize()
				// The failing and the throttled host first appear once the
				// registries are full; the failing host makes 20 calls, at
				// most 2 s apart so that 11 fit its 1-minute window, and the
				// pause is checked while it lasts (30 s; 10,000 keys take 5 s
				// at 2,000/s).
				start := 2 * churnCap
				failEvery := min((n-start)/24, 2*rate) // 12 calls within the 1-minute window
				quotaAt := start + failEvery/2
				var rejected, waited, failCalls int
				var firstErr error
				for i := range n {
					t0 := time.Now()
					if st, err := churnGet(tr, "h"+strconv.Itoa(i)+".test"); err != nil || st != 200 {
						if rejected++; firstErr == nil {
							firstErr = fmt.Errorf("host %d: %d %v", i, st, err)
						}
					}
					if time.Since(t0) > 0 {
						waited++
					}
					switch i {
					case quotaAt:
						if st, _ := churnGet(tr, "quota.test"); st != http.StatusTooManyRequests {
							t.Fatalf("quota.test answered %d", st)
						}
					case quotaAt + churnCap:
						if rem := pauseLeft(tr.PauseGates(), "http://quota.test"); rem <= 0 {
							t.Errorf("quota.test's pause was lost to the churn")
						}
					}
					if i >= start && (i-start)%failEvery == failEvery-1 && failCalls < 20 {
						failCalls++
						st, err := churnGet(tr, "fail.test")
						switch {
						case failCalls <= 11 && (err != nil || st != 500):
							t.Fatalf("failing call %d: %d %v, want the 500 itself", failCalls, st, err)
						case failCalls > 11 && !errors.Is(err, bw.ErrCircuitOpen):
							t.Fatalf("failing call %d (after churn of %d keys): %d %v, want ErrCircuitOpen", failCalls, i, st, err)
						}
						if got, want := tr.Breakers().Get("http://fail.test").State(), failCalls >= 11; (got == bw.StateOpen) != want {
							t.Fatalf("after failing call %d the breaker is %s", failCalls, got)
						}
					}
					pace(i, rate)
				}
				snap := tr.Snapshot()
				t.Logf("%d new hosts at %d/s: %d rejected, %d waited; registries: %d breakers, %d limiters, %d bulkheads",
					n, rate, rejected, waited, len(snap.Breakers), len(snap.RateLimiters), len(snap.Bulkheads))
				if rejected != 0 || waited != 0 {
					t.Errorf("%d of %d healthy hosts were rejected and %d waited; first rejection: %v", rejected, n, waited, firstErr)
				}
				for name, l := range map[string]int{"breakers": len(snap.Breakers), "rate limiters": len(snap.RateLimiters), "bulkheads": len(snap.Bulkheads)} {
					if l > churnCap {
						t.Errorf("%s: %d keys, over the cap of %d", name, l, churnCap)
					}
				}
			})
		})
	}
}

// A registry filled at once, so that nothing in it is idle, still makes
// room for new hosts: a failing host gets a breaker of its own that opens,
// and new healthy hosts are never refused by it (they used to share one
// overflow breaker, which that host opened).
func TestFullRegistryNeverSharesABreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, err := bw.NewTransport(bw.WithBase(churnBase()), bw.WithMaxAttempts(1),
			bw.WithPolicy(bw.Window(10, time.Minute)), bw.WithKeyLimits(churnCap, 10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for i := range churnCap {
			churnGet(tr, "h"+strconv.Itoa(i)+".test")
		}
		for range 11 {
			churnGet(tr, "fail.test")
		}
		if s := tr.Breakers().Get("http://fail.test").State(); s != bw.StateOpen {
			t.Fatalf("the failing host's breaker is %s after 11 failures", s)
		}
		rejected := 0
		for i := range 400 {
			if _, err := churnGet(tr, "new"+strconv.Itoa(i)+".test"); errors.Is(err, bw.ErrCircuitOpen) {
				rejected++
			}
		}
		if rejected != 0 {
			t.Fatalf("%d of 400 new healthy hosts got ErrCircuitOpen", rejected)
		}
	})
}

// BenchmarkChurn measures calls per second when every call goes to a new
// host, with every stage on and with the rate limit off.
func BenchmarkChurn(b *testing.B) {
	for _, rl := range []bool{false, true} {
		name := "ratelimit=off"
		if rl {
			name = "stages=all"
		}
		b.Run(name, func(b *testing.B) {
			tr := churnTransport(b, rl)
			var seq atomic.Int64
			var failed atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var sb strings.Builder
				for pb.Next() {
					sb.Reset()
					sb.WriteString("h")
					sb.WriteString(strconv.FormatInt(seq.Add(1), 10))
					sb.WriteString(".test")
					if st, err := churnGet(tr, sb.String()); err != nil || st != 200 {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(float64(failed.Load()), "refused")
		})
	}
}
