package breakwater_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// tailStep answers in 5 ms ± 0.5 ms, but in 200 ms for a random 5 % of
// requests, drawn from seed in the order requests arrive.
func tailStep(seed uint64) func(int, *http.Request) breakwatertest.Step {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed+1))
	return func(int, *http.Request) breakwatertest.Step {
		mu.Lock()
		defer mu.Unlock()
		d := 4500*time.Microsecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
		if rng.Float64() < 0.05 {
			d = 200 * time.Millisecond
		}
		return breakwatertest.Step{Delay: d}
	}
}

// tailRun makes calls from workers goroutines through rt and returns the
// latencies of the calls after the first warmup, sorted, and the number of
// calls that did not get a 200.
func tailRun(t *testing.T, rt http.RoundTripper, url string, workers, calls, warmup int) ([]time.Duration, int) {
	t.Helper()
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed int
		next   atomic.Int64
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= int64(calls+warmup); n = next.Add(1) {
				req, _ := http.NewRequest(http.MethodGet, url+"/item", nil)
				t0 := time.Now()
				r := do(rt, req)
				d := time.Since(t0)
				mu.Lock()
				if r.err != nil || r.status != 200 {
					failed++
				}
				if n > int64(warmup) {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, failed
}

func p99(sorted []time.Duration) time.Duration { return sorted[len(sorted)*99/100-1] }

// TestHedgingCutsTheTail: against an upstream that answers in 5 ms but in
// 200 ms for a random 5 % of requests, the default hedging cuts the p99 of
// calls to under a third of what it is without, for at most 10 % more
// requests. Virtual time: the figures are exact and repeatable.
func TestHedgingCutsTheTail(t *testing.T) {
	const workers, calls, warmup = 8, 2000, 200
	measure := func(opts ...bw.Option) (p99v time.Duration, extra float64) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstreamFunc(t, tailStep(42))
			tr := newTransport(t, u.Transport(), opts...)
			tailRun(t, tr, breakwatertest.PipeURL, workers, warmup, 0)
			before := u.Count()
			lat, failed := tailRun(t, tr, breakwatertest.PipeURL, workers, calls, 0)
			synctest.Wait()
			if failed > 0 {
				t.Errorf("%d calls failed", failed)
			}
			p99v = p99(lat)
			extra = float64(u.Count()-before-calls) / calls
			u.Close()
		})
		return p99v, extra
	}
	plain, plainExtra := measure()
	hedged, extra := measure(bw.WithHedging(bw.Hedging{}))
	fixed, fixedExtra := measure(bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond}))
	t.Logf("p99 without hedging %s (%.1f%% extra requests); default hedging %s (%.1f%% extra, %.2f of it); fixed 10ms %s (%.1f%% extra, %.2f of it)",
		plain, 100*plainExtra, hedged, 100*extra, float64(hedged)/float64(plain), fixed, 100*fixedExtra, float64(fixed)/float64(plain))
	if hedged > plain/3 {
		t.Errorf("p99 with hedging %s, more than a third of %s", hedged, plain)
	}
	if extra > 0.10 {
		t.Errorf("hedging added %.1f%% requests, more than 10%%", 100*extra)
	}
	if fixed > plain/3 || fixedExtra > 0.10 {
		t.Errorf("fixed delay: p99 %s, %.1f%% extra", fixed, 100*fixedExtra)
	}
}

// TestHedgingNeverRepeatsWhatMayNotBeRepeated: a POST without an
// idempotency key is never hedged, however slow; with a key it is.
func TestHedgingNeverRepeatsWhatMayNotBeRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 100 * time.Millisecond})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}))
		// Calls to fill the budget's window.
		for range 10 {
			req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/pay", strings.NewReader("amount=1"))
			if r := do(tr, req); r.status != 200 {
				t.Fatalf("POST: %+v", r)
			}
		}
		if n := u.Count(); n != 10 {
			t.Fatalf("10 POSTs without a key made %d requests: a POST was hedged", n)
		}
		req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/pay", strings.NewReader("amount=1"))
		req.Header.Set("Idempotency-Key", "k-1")
		if r := do(tr, req); r.status != 200 {
			t.Fatalf("POST with key: %+v", r)
		}
		synctest.Wait()
		if n := u.Count(); n != 12 {
			t.Fatalf("a slow POST with an Idempotency-Key made %d requests, want 2 (hedged)", n-10)
		}
	})
}

// TestHedgingIgnoresRetryNonIdempotent: WithRetryNonIdempotent lets a POST
// without a key be retried after a failure, never hedged: 30 slow POSTs
// that succeed make 30 requests. A request whose RequestPolicy declares it
// idempotent, as a key would, is hedged.
func TestHedgingIgnoresRetryNonIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 100 * time.Millisecond})
		tr := newTransport(t, u.Transport(), bw.WithRetryNonIdempotent(true),
			bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}))
		for range 30 {
			req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/pay", strings.NewReader("amount=1"))
			if r := do(tr, req); r.status != 200 {
				t.Fatalf("POST: %+v", r)
			}
		}
		synctest.Wait()
		if n := u.Count(); n != 30 {
			t.Fatalf("30 POSTs without a key made %d requests, want 30: a POST was hedged", n)
		}
		ctx := bw.WithRequestPolicy(context.Background(), bw.RequestPolicy{Idempotent: true})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, breakwatertest.PipeURL+"/pay", strings.NewReader("amount=1"))
		if r := do(tr, req); r.status != 200 {
			t.Fatalf("POST declared idempotent: %+v", r)
		}
		synctest.Wait()
		if n := u.Count() - 30; n != 2 {
			t.Fatalf("a slow POST declared idempotent made %d requests, want 2 (hedged)", n)
		}
	})
}

// TestHedgedBodiesAreIdentical: a hedged GET with a body sends the same
// bytes twice; a body that cannot be replayed is not hedged.
func TestHedgedBodiesAreIdentical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 100 * time.Millisecond})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}))
		body := breakwatertest.Pattern(100 << 10)
		for range 4 {
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/search", bytes.NewReader(body))
			if r := do(tr, req); r.status != 200 {
				t.Fatalf("GET: %+v", r)
			}
		}
		synctest.Wait()
		reqs := u.Requests()
		if len(reqs) < 5 {
			t.Fatalf("%d requests for 4 slow calls: nothing was hedged", len(reqs))
		}
		want := sha256.Sum256(body)
		for _, r := range reqs {
			if sha256.Sum256(r.Body) != want {
				t.Fatalf("request %d carried %d bytes that differ from the caller's %d", r.N, len(r.Body), len(body))
			}
		}
		n := u.Count()
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/search", io.NopCloser(bytes.NewReader(body)))
		if r := do(tr, req); r.status != 200 {
			t.Fatalf("GET with a one-shot body: %+v", r)
		}
		synctest.Wait()
		if u.Count() != n+1 {
			t.Fatal("a body without GetBody was hedged")
		}
	})
}

// TestHedgingDoesNotMultiplyAnOutage: against a hard-down upstream (500
// after 20 ms, slower than the hedge delay) hedging adds next to nothing:
// the breaker opens and the calls cost at most 0.3 requests each.
func TestHedgingDoesNotMultiplyAnOutage(t *testing.T) {
	for _, step := range []breakwatertest.Step{
		{Status: 500, Delay: 20 * time.Millisecond},
		{Status: 500},
	} {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, step)
			tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 5 * time.Millisecond}))
			const calls = 200
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 8 {
				wg.Go(func() {
					for next.Add(1) <= calls {
						get(tr)
					}
				})
			}
			wg.Wait()
			synctest.Wait()
			per := float64(u.Count()) / calls
			t.Logf("500 after %s: %d requests for %d calls (%.2f per call)", step.Delay, u.Count(), calls, per)
			if per > 0.3 {
				t.Errorf("%.2f requests per call against a hard-down upstream", per)
			}
		})
	}
	// Nothing listens: every connection is refused, after 10 ms.
	synctest.Test(t, func(t *testing.T) {
		var dials atomic.Int64
		refuse := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			dials.Add(1)
			time.Sleep(10 * time.Millisecond)
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		})
		tr := newTransport(t, refuse, bw.WithHedging(bw.Hedging{Delay: 5 * time.Millisecond}))
		const calls = 200
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 8 {
			wg.Go(func() {
				for next.Add(1) <= calls {
					get(tr)
				}
			})
		}
		wg.Wait()
		per := float64(dials.Load()) / calls
		t.Logf("connection refused: %d dials for %d calls (%.2f per call)", dials.Load(), calls, per)
		if per > 0.3 {
			t.Errorf("%.2f dials per call against a refusing upstream", per)
		}
	})
}

// TestHedgeLoserIsCancelledAndNeutral: the first attempt hangs, the hedge
// answers; the call returns the hedge's answer, the hanging attempt is
// cancelled (the upstream sees its client go away), the breaker counts no
// failure, the bulkhead gets both slots back.
func TestHedgeLoserIsCancelledAndNeutral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true}, breakwatertest.Step{Body: []byte("hedge")})
		var events []bw.Event
		var mu sync.Mutex
		obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}),
			bw.WithConcurrencyLimit(4), bw.WithObserver(obs), bw.WithRetryBudget(1, 1, time.Second))
		t0 := time.Now()
		r := get(tr)
		if r.err != nil || r.body != "hedge" {
			t.Fatalf("call: %+v", r)
		}
		if d := time.Since(t0); d != 10*time.Millisecond {
			t.Fatalf("call took %s, want the hedge delay", d)
		}
		synctest.Wait()
		snap := tr.Snapshot()
		if len(snap.Breakers) != 1 || snap.Breakers[0].Failures != 0 || snap.Breakers[0].StateName != "closed" {
			t.Fatalf("breaker after a cancelled loser: %+v", snap.Breakers)
		}
		if n := slotsHeld(tr, upstreamKey); n != 0 {
			t.Fatalf("%d bulkhead slots still held", n)
		}
		mu.Lock()
		defer mu.Unlock()
		var attempts, hedges int
		var end bw.Event
		for _, e := range events {
			switch e.Kind {
			case bw.EventAttempt:
				attempts++
				if e.Hedge {
					hedges++
					if e.Category != bw.Success {
						t.Errorf("hedge attempt: %v", e.Category)
					}
				} else if e.Category != bw.Canceled {
					t.Errorf("cancelled loser: %v, want canceled", e.Category)
				}
			case bw.EventCallEnd:
				end = e
			}
		}
		if attempts != 2 || hedges != 1 || !end.Hedge || end.Attempts != 2 || end.Retries != 0 {
			t.Fatalf("%d attempt events, %d hedges, call end %+v: want 2 attempts, a hedge that answered, no retry", attempts, hedges, end)
		}
	})
}

// TestHedgesPassAdmission: a hedge needs the same admission as any
// attempt and never waits for it: with one bulkhead slot no hedge is sent.
func TestHedgesPassAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 50 * time.Millisecond})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}),
			bw.WithConcurrencyLimit(1, bw.WithMaxQueue(8), bw.WithMaxWait(time.Second)))
		for range 3 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
		}
		if n := u.Count(); n != 3 {
			t.Fatalf("%d requests for 3 calls: a hedge went past a full bulkhead", n)
		}
	})
}

// TestHedgesAreAttempts: hedges count toward the maximum attempts: with
// two, a call whose first attempt and hedge both fail is not retried.
func TestHedgesAreAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503, Delay: 30 * time.Millisecond})
		var (
			mu      sync.Mutex
			numbers []int
		)
		base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			numbers = append(numbers, bw.AttemptFromContext(req.Context()))
			mu.Unlock()
			return u.Transport().RoundTrip(req)
		})
		// No timeouts: the hedge's context is the caller's, made cancellable.
		tr := newTransport(t, base, bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}),
			bw.WithMaxAttempts(2), bw.WithRetryBudget(1, 10, time.Second), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0))
		r := get(tr)
		synctest.Wait()
		if r.status != 503 || u.Count() != 2 {
			t.Fatalf("status %d after %d requests, want 503 after 2", r.status, u.Count())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(numbers) != 2 || numbers[0] != 1 || numbers[1] != 2 {
			t.Fatalf("attempt numbers in the requests' contexts: %v, want [1 2]", numbers)
		}
	})
}

// TestHedgingCutsTheTailOnLoopback is TestHedgingCutsTheTail on real
// sockets and the real clock, an httptest upstream sleeping 5 ms, or
// 200 ms for a random 5 % of requests: it logs the p99s and checks the
// extra load, and that hedging leaves no connection behind (cancelled
// losers' connections are closed, the others go back to the pool and close
// with it).
func TestHedgingCutsTheTailOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("wall-clock run of a few seconds")
	}
	const workers, calls, warmup = 8, 1000, 200
	measure := func(opts ...bw.Option) (time.Duration, float64) {
		var (
			mu    sync.Mutex
			rng   = rand.New(rand.NewPCG(7, 8))
			reqs  atomic.Int64
			conns atomic.Int64
		)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reqs.Add(1)
			mu.Lock()
			d := 5 * time.Millisecond
			if rng.Float64() < 0.05 {
				d = 200 * time.Millisecond
			}
			mu.Unlock()
			select {
			case <-time.After(d):
				_, _ = w.Write([]byte("ok"))
			case <-r.Context().Done():
			}
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				conns.Add(-1)
			}
		}
		srv.Start()
		defer srv.Close()
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 64
		tr := newTransport(t, base, opts...)
		tailRun(t, tr, srv.URL, workers, warmup, 0)
		before := reqs.Load()
		lat, failed := tailRun(t, tr, srv.URL, workers, calls, 0)
		if failed > 0 {
			t.Errorf("%d calls failed", failed)
		}
		extra := float64(reqs.Load()-before-calls) / calls
		tr.CloseIdleConnections()
		for end := time.Now().Add(2 * time.Second); conns.Load() != 0 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
			tr.CloseIdleConnections()
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("%d server connections left open", n)
		}
		return p99(lat), extra
	}
	plain, _ := measure()
	hedged, extra := measure(bw.WithHedging(bw.Hedging{}))
	t.Logf("loopback: p99 without hedging %s; with default hedging %s (%.2f of it), %.1f%% extra requests",
		plain.Round(10*time.Microsecond), hedged.Round(10*time.Microsecond), float64(hedged)/float64(plain), 100*extra)
	if extra > 0.10 {
		t.Errorf("hedging added %.1f%% requests", 100*extra)
	}
	// The latencies are wall-clock figures, logged and not checked: a
	// shared machine stalls for tens or hundreds of milliseconds at times.
	// TestHedgingCutsTheTail checks them in virtual time.
}

func TestHedgingConfigErrors(t *testing.T) {
	_, err := bw.NewTransport(bw.WithHedging(bw.Hedging{Delay: -1, Budget: 2}), bw.WithMaxAttempts(1))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"hedge delay must be >= 0", "hedge budget must be in [0, 1]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if _, err := bw.NewTransport(bw.WithHedging(bw.Hedging{}), bw.WithMaxAttempts(1)); err == nil || !strings.Contains(err.Error(), "at least 2 attempts") {
		t.Errorf("hedging with 1 attempt: %v", err)
	}
	if _, err := bw.RetryStage(bw.WithHedging(bw.Hedging{})); err == nil {
		t.Error("RetryStage accepted WithHedging")
	}
}

// TestHedgeGoesToAnotherEndpoint: with failover, a hedge goes to an
// endpoint the call has not tried, and the call end names the endpoint
// that answered and says a hedge did.
func TestHedgeGoesToAnotherEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.Host == "slow.test" {
				return breakwatertest.Step{Delay: 100 * time.Millisecond, Body: []byte("slow")}
			}
			return breakwatertest.Step{Body: []byte("fast")}
		})
		var (
			mu  sync.Mutex
			end bw.Event
		)
		obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			if e.Kind == bw.EventCallEnd {
				mu.Lock()
				end = e
				mu.Unlock()
			}
		})
		tr := newTransport(t, u.Transport(), bw.WithObserver(obs),
			bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}),
			bw.WithFailover(bw.Failover{Endpoints: []string{"http://slow.test", "http://fast.test"}}))
		t0 := time.Now()
		r := get(tr)
		if r.body != "fast" || time.Since(t0) != 10*time.Millisecond {
			t.Fatalf("%+v after %s, want the hedge's answer from fast.test after 10ms", r, time.Since(t0))
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !end.Hedge || end.Endpoint != "http://fast.test" || end.Key != upstreamKey {
			t.Fatalf("call end %+v", end)
		}
	})
}

// TestSnapshotShowsHedging: a Transport's Snapshot (and its JSON) shows the
// hedging of each key: its delay, the latencies it comes from, the calls
// and the hedges of the window.
func TestSnapshotShowsHedging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 5 * time.Millisecond})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{}))
		for range 30 {
			get(tr)
		}
		s := tr.Snapshot()
		if len(s.Hedges) != 1 || s.Hedges[0].Key != upstreamKey || s.Hedges[0].Calls != 30 || s.Hedges[0].Samples != 30 ||
			s.Hedges[0].Delay < 4500*time.Microsecond || s.Hedges[0].Delay > 5500*time.Microsecond {
			t.Fatalf("hedges %+v", s.Hedges)
		}
		rec := jsonOf(t, tr.Snapshot())
		for _, want := range []string{`"hedges": [`, `"delay_seconds": 0.005`} {
			if !strings.Contains(rec.String(), want) {
				t.Fatalf("snapshot JSON lacks %s:\n%s", want, rec)
			}
		}
	})
}

func TestExplainHedging(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithHedging(bw.Hedging{}))
	if err != nil {
		t.Fatal(err)
	}
	want := `  hedging
    after            the key's p92 of recent first attempts, at least 1ms (once 20 were seen)
    hedges           up to 1 per call, counted as attempts, admitted without waiting
    budget           10% extra requests per key over 10s, and the retry budget
    applies to       requests that may be repeated, with bodies GetBody replays
`
	if got := tr.Explain(); !strings.Contains(got, want) {
		t.Fatalf("Explain:\n%s\nwant it to contain:\n%s", got, want)
	}
	p95, _ := bw.NewTransport(bw.WithHedging(bw.Hedging{Percentile: 95, Delay: 2 * time.Millisecond}))
	if got := p95.Explain(); !strings.Contains(got, "the key's p95 of recent first attempts, at least 2ms") {
		t.Fatalf("Explain:\n%s", got)
	}
	fixed, _ := bw.NewTransport(bw.WithHedging(bw.Hedging{Delay: 20 * time.Millisecond, MaxHedges: 2}))
	if got := fixed.Explain(); !strings.Contains(got, "    after            20ms\n    hedges           up to 2 per call") {
		t.Fatalf("Explain:\n%s", got)
	}
}

// Calls allowed a single attempt cannot be hedged, and add nothing to the
// hedge budget: after ten of them, a budget of 0.5 holds no hedge for the
// next slow call (its own half a hedge is not one).
func TestHedgeBudgetCountsOnlyHedgeableCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.URL.Path == "/slow" {
				return breakwatertest.Step{Delay: time.Second}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithHedging(bw.Hedging{Delay: 100 * time.Millisecond, Budget: 0.5}))
		once := bw.WithRequestPolicy(context.Background(), bw.RequestPolicy{MaxAttempts: 1})
		for range 10 {
			req, _ := http.NewRequestWithContext(once, http.MethodGet, breakwatertest.PipeURL+"/", nil)
			if r := do(tr, req); r.status != 200 {
				t.Fatalf("a call of one attempt: %+v", r)
			}
		}
		before := u.Count()
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/slow", nil)
		if r := do(tr, req); r.status != 200 || u.Count()-before != 1 {
			t.Fatalf("%+v after %d requests, want the answer of 1, unhedged", r, u.Count()-before)
		}
	})
}
