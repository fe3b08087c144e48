package breakwater_test

// Partial outages: upstreams that fail partly (a flap, one bad backend of
// several, a quota, a hang) must never get less out of the default
// Transport than a bare http.Client gets, and a total outage must stay as
// cheap as before. Each test logs its figures (go test -v -run
// TestPartialOutage).

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// openCounter counts a registry's openings.
type openCounter struct{ n atomic.Int32 }

func (o *openCounter) option() bw.Option {
	return onTransition(func(tr bw.Transition) {
		if tr.To == bw.StateOpen {
			o.n.Add(1)
		}
	})
}

// seeded returns a concurrency-safe source of uniform numbers in [0, 1).
func seeded(seed uint64) func() float64 {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
}

// A flapping upstream: 30 % of attempts fail at once, the rest answer in
// 5 ms. Retries absorb the failures; the budget must not run dry and the
// breaker must not open. A bare client gets about 70 % through.
func TestPartialOutageFlap(t *testing.T) {
	flap := func(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (ok, calls, requests int) {
		draw := seeded(1)
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			switch x := draw(); {
			case x < 0.15:
				return breakwatertest.Step{Status: 500}
			case x < 0.30:
				return breakwatertest.Step{Status: 503}
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		results, _ := load(wrap(u.Transport()), 200, 5*time.Second, 0)
		for _, r := range results {
			if r.status == 200 {
				ok++
			}
		}
		return ok, len(results), u.Count()
	}
	var bare int
	synctest.Test(t, func(t *testing.T) {
		bare, _, _ = flap(t, func(rt http.RoundTripper) http.RoundTripper { return rt })
	})
	synctest.Test(t, func(t *testing.T) {
		var opens openCounter
		ok, calls, requests := flap(t, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt, opens.option()) })
		perCall := float64(requests) / float64(calls)
		t.Logf("flap: %d/%d calls ok (%.1f%%; bare client %d), %.2f upstream requests per call, %d openings",
			ok, calls, 100*float64(ok)/float64(calls), bare, perCall, opens.n.Load())
		if float64(ok) < 0.95*float64(calls) || ok < bare {
			t.Errorf("%d/%d calls succeeded, want at least 95%% and the bare client's %d", ok, calls, bare)
		}
		if perCall > 1.5 {
			t.Errorf("%.2f upstream requests per call, want at most 1.5", perCall)
		}
		if opens.n.Load() != 0 {
			t.Errorf("the breaker opened %d times", opens.n.Load())
		}
	})
}

// Every first attempt fails with a 503 carrying a 64 KiB body; every retry
// succeeds.
func TestPartialOutageRetriedFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 1 {
				return breakwatertest.Step{Status: 503, BodySize: 64 << 10}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport())
		ok := 0
		for range 100 {
			if r := get(tr); r.status == 200 {
				ok++
			}
		}
		t.Logf("retried first attempts: %d/100 calls ok, %d upstream requests", ok, u.Count())
		if ok != 100 {
			t.Fatalf("%d/100 calls succeeded", ok)
		}
	})
}

// A hard-down upstream stays as cheap as before the breaker became
// volume-aware: few requests per call, and once open, calls fail at once.
func TestPartialOutageHardDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport())
		var fast, opened atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 25 {
					open := tr.Breakers().Get(upstreamKey).State() == bw.StateOpen
					start := time.Now()
					r := get(tr)
					if open && errors.Is(r.err, bw.ErrCircuitOpen) {
						opened.Add(1)
						if time.Since(start) < time.Millisecond {
							fast.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		perCall := float64(u.Count()) / 200
		t.Logf("hard down: %d upstream requests for 200 calls (%.2f per call), %d calls made while open, %d of them failed in under 1ms",
			u.Count(), perCall, opened.Load(), fast.Load())
		if perCall > 0.3 {
			t.Errorf("%.2f upstream requests per call, want at most 0.3", perCall)
		}
		if opened.Load() == 0 || fast.Load() != opened.Load() {
			t.Errorf("%d calls made while open, %d of them failed fast", opened.Load(), fast.Load())
		}
	})
}

// The default breaker counts a failing fraction: calls that fail 30 % of
// the time (not retried) never open it, a total outage does on the 11th
// failing call.
func TestPartialOutageDefaultPolicyIsVolumeAware(t *testing.T) {
	bs, err := bw.NewBreakers()
	if err != nil {
		t.Fatal(err)
	}
	b := bs.Get("flaky")
	draw := seeded(7)
	for i := range 1000 {
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("call %d rejected: 30%% failing calls opened the default breaker", i)
		}
		cat := bw.Success
		if draw() < 0.3 {
			cat = bw.ServerError
		}
		p.Done(bw.Outcome{Category: cat})
	}
	b = bs.Get("down")
	for i := 1; i <= 11; i++ {
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("call %d rejected", i)
		}
		p.Done(bw.Outcome{Category: bw.ServerError})
		if want := i == 11; (b.State() == bw.StateOpen) != want {
			t.Fatalf("after %d failing calls the breaker is %s", i, b.State())
		}
	}
}

// One backend of four behind a load balancer answers 503 with
// Retry-After: 1, the others answer fast, slowly, or too slowly for the
// callers' 800 ms deadlines. The 503 must not pause the whole host.
func TestPartialOutageOneBadBackend(t *testing.T) {
	script := func(n int, _ *http.Request) breakwatertest.Step {
		switch n % 4 {
		case 1:
			return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"1"}}}
		case 2:
			return breakwatertest.Step{Delay: 10 * time.Millisecond}
		case 3:
			return breakwatertest.Step{Delay: 300 * time.Millisecond}
		}
		return breakwatertest.Step{Delay: time.Second}
	}
	run := func(rt http.RoundTripper) int {
		ok := 0
		results, _ := load(rt, 32, 3*time.Second, 800*time.Millisecond)
		for _, r := range results {
			if r.status == 200 {
				ok++
			}
		}
		return ok
	}
	var bare, withBW int
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, script)
		bare = run(u.Transport())
	})
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, script)
		withBW = run(newTransport(t, u.Transport()))
	})
	t.Logf("one bad backend of four: bare client %d/96 ok, breakwater %d/96", bare, withBW)
	if withBW < bare {
		t.Fatalf("breakwater delivered %d/96, less than the bare client's %d/96", withBW, bare)
	}
}

// A maintenance window: every request answered 503 with Retry-After: 1 for
// 3 s at 50 calls/s, then the upstream is back. Calls meet it cold, after
// a healthy second, or after a healthy minute (the hold's age counts from
// its start, not the Transport's).
func TestPartialOutageMaintenance(t *testing.T) {
	for _, warm := range []time.Duration{0, time.Second, time.Minute} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			begin, recovery := start.Add(warm), start.Add(warm+3*time.Second)
			u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
				if now := time.Now(); !now.Before(begin) && now.Before(recovery) {
					return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"1"}}}
				}
				return breakwatertest.Step{Delay: 5 * time.Millisecond}
			})
			tr := newTransport(t, u.Transport())
			results, _ := load(tr, 50, warm+4*time.Second, 0)
			ok := 0
			for _, r := range results {
				if r.status == 200 {
					ok++
				}
			}
			during, firstOK := 0, time.Duration(-1)
			for _, r := range u.Requests() {
				switch {
				case r.At.Before(begin):
				case r.At.Before(recovery):
					during++
				case firstOK < 0:
					firstOK = r.At.Sub(recovery)
				}
			}
			t.Logf("maintenance after %s of health: %d upstream requests during the 3 s window (150 calls), first success %s after recovery; %d/%d calls ok in the end",
				warm, during, firstOK, ok, len(results))
			// The host is held from the second 503 within a second on
			// (overloadMinimum), then probed every 175 ms: 2 + 3 s / 175 ms,
			// give or take a request in flight at the edges.
			if during > 20 {
				t.Errorf("%d requests during the maintenance window, want at most 20", during)
			}
			if firstOK < 0 || firstOK > 175*time.Millisecond {
				t.Errorf("first request after recovery came %s after it, want within 175ms", firstOK)
			}
		})
	}
}

// When a pause ends, the calls it held reach the upstream spread out, one
// probe first.
func TestPartialOutageNoHerdAfterPause(t *testing.T) {
	t.Run("recovery", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var throttled atomic.Bool
			u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
				if time.Since(start) >= time.Second && throttled.CompareAndSwap(false, true) {
					return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
				}
				return breakwatertest.Step{Delay: 5 * time.Millisecond}
			})
			tr := newTransport(t, u.Transport())
			load(tr, 50, 4*time.Second, 0)
			var recovering []time.Time
			for _, at := range arrivals(u) {
				if d := at.Sub(start); d >= 2*time.Second && d < 3500*time.Millisecond {
					recovering = append(recovering, at)
				}
			}
			n := maxInWindow(recovering, 50*time.Millisecond)
			t.Logf("herd after a 1 s pause at 50 calls/s: at most %d arrivals in any 50 ms at recovery (offered 2.5)", n)
			if n > 5 {
				t.Fatalf("%d arrivals within 50 ms at recovery, more than twice the offered load (2.5)", n)
			}
		})
	})
	t.Run("probe refused again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
				if d := time.Since(start); d >= time.Second && d < 2500*time.Millisecond {
					return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
				}
				return breakwatertest.Step{Delay: 5 * time.Millisecond}
			})
			tr := newTransport(t, u.Transport())
			load(tr, 50, 4*time.Second, 0)
			var first []time.Time // arrivals in the 100 ms after the pause ended
			for _, at := range arrivals(u) {
				if d := at.Sub(start); d >= 2*time.Second && d < 2100*time.Millisecond {
					first = append(first, at)
				}
			}
			t.Logf("a probe refused again: %d arrivals in the 100 ms after the first pause ended", len(first))
			if len(first) != 1 {
				t.Fatalf("%d arrivals in the 100 ms after the pause ended, want the probe alone", len(first))
			}
		})
	})
}

// When an open breaker lets calls through again, they arrive as offered.
func TestPartialOutageNoHerdAfterBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			if time.Since(start) < 2*time.Second {
				return breakwatertest.Step{Status: 500}
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		var opens openCounter
		tr := newTransport(t, u.Transport(), opens.option())
		load(tr, 50, 10*time.Second, 0)
		var late []time.Time
		for _, at := range arrivals(u) {
			if at.Sub(start) >= 2*time.Second {
				late = append(late, at)
			}
		}
		n := maxInWindow(late, 50*time.Millisecond)
		t.Logf("breaker recovery at 50 calls/s: %d openings, at most %d arrivals in any 50 ms once the upstream is back (offered 2.5)", opens.n.Load(), n)
		if opens.n.Load() == 0 || n > 5 {
			t.Fatalf("%d openings; %d arrivals within 50 ms at recovery", opens.n.Load(), n)
		}
	})
}

// A hang is learned when our attempt timeout cuts the first attempt and
// the caller's deadline the second.
func TestPartialOutageHangWithShortCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(200*time.Millisecond))
		calls := 0
		for calls < 30 && tr.Breakers().Get(upstreamKey).State() == bw.StateClosed {
			calls++
			ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
			send(ctx, tr, "upstream.test")
			cancel()
		}
		s, _ := breakerOf(tr.Breakers(), upstreamKey)
		t.Logf("hang, 200 ms attempts, 350 ms callers: breaker %s after %d calls and %d upstream requests", s.StateName, calls, u.Count())
		if s.State != bw.StateOpen || calls > 12 {
			t.Fatalf("breaker %s after %d calls, want open within 12", s.StateName, calls)
		}
	})
}

// A hang is learned when callers' deadlines (2 s) are shorter than the
// attempt timeout (10 s): a second wave fails fast.
func TestPartialOutageHangWithLongAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport())
		wave := func() (fast int) {
			var n atomic.Int32
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					if r, took := send(ctx, tr, "upstream.test"); errors.Is(r.err, bw.ErrCircuitOpen) && took < time.Millisecond {
						n.Add(1)
					}
				})
			}
			wg.Wait()
			return int(n.Load())
		}
		wave()
		fast := wave()
		t.Logf("hang, 10 s attempts, 2 s callers: %d of a second wave of 10 failed fast; %d upstream requests", fast, u.Count())
		if fast < 9 {
			t.Fatalf("%d of the second wave failed fast, want at least 9", fast)
		}
	})
}

// Callers that give up before the upstream could answer never open the
// breaker: their own cancellation, or a deadline shorter than the
// upstream's normal latency.
func TestPartialOutageImpatientCallersAreNeutral(t *testing.T) {
	t.Run("deadline shorter than the normal latency", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 500 * time.Millisecond})
			var opens openCounter
			tr := newTransport(t, u.Transport(), opens.option())
			load(tr, 20, 5*time.Second, 300*time.Millisecond)
			if s, _ := breakerOf(tr.Breakers(), upstreamKey); opens.n.Load() != 0 || s.Failures != 0 {
				t.Fatalf("300 ms callers of a 500 ms upstream: %d openings, %+v", opens.n.Load(), s)
			}
		})
	})
	t.Run("slow upstream seen answering", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 1500 * time.Millisecond})
			var opens openCounter
			tr := newTransport(t, u.Transport(), opens.option())
			for range 3 { // patient callers see it answer in 1.5 s
				if r, _ := send(context.Background(), tr, "upstream.test"); r.status != 200 {
					t.Fatalf("%+v", r)
				}
			}
			load(tr, 20, 5*time.Second, 1200*time.Millisecond)
			if s, _ := breakerOf(tr.Breakers(), upstreamKey); opens.n.Load() != 0 || s.Failures != 0 {
				t.Fatalf("1.2 s callers of a 1.5 s upstream: %d openings, %+v", opens.n.Load(), s)
			}
		})
	})
	t.Run("cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
			tr := newTransport(t, u.Transport())
			for range 30 {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(3*time.Second, cancel)
				if r, _ := send(ctx, tr, "upstream.test"); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("%+v", r)
				}
			}
			if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.State != bw.StateClosed || s.Failures != 0 {
				t.Fatalf("callers cancelling a hung call: %+v", s)
			}
		})
	})
}

// A 429 whose only hint is the structured RateLimit field (what
// ClientRateLimit sends) is retried no earlier than its reset.
func TestPartialOutageRateLimitFieldHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{Status: 429, Header: http.Header{
				"Ratelimit":        {`"default";r=0;t=2`},
				"Ratelimit-Policy": {`"default";q=10;w=60`},
			}},
			breakwatertest.Step{})
		tr := newTransport(t, u.Transport())
		if r := get(tr); r.status != 200 {
			t.Fatalf("%+v", r)
		}
		reqs := u.Requests()
		if gap := reqs[1].At.Sub(reqs[0].At); gap < 2*time.Second {
			t.Fatalf("retried after %s, the RateLimit field asked for 2s", gap)
		}
	})
}

// A fixed-window quota that announces itself on every response: the
// defaults pace on it instead of collecting 429s.
func TestPartialOutageQuota(t *testing.T) {
	const quota = 10 // per second, in fixed windows
	run := func(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (ok, throttled int, took time.Duration) {
		start := time.Now()
		var mu sync.Mutex
		window, used := -1, 0
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			mu.Lock()
			defer mu.Unlock()
			elapsed := time.Since(start)
			if w := int(elapsed / time.Second); w != window {
				window, used = w, 0
			}
			reset := time.Duration(window+1)*time.Second - elapsed
			status := 200
			if used < quota {
				used++
			} else {
				status = 429
			}
			secs := int((reset + time.Second - 1) / time.Second)
			return breakwatertest.Step{Status: status, Header: http.Header{
				"Ratelimit-Policy": {`"default";q=` + strconv.Itoa(quota) + `;w=1`},
				"Ratelimit":        {`"default";r=` + strconv.Itoa(quota-used) + `;t=` + strconv.Itoa(secs)},
			}}
		})
		rt := wrap(u.Transport())
		var n atomic.Int32
		var wg sync.WaitGroup
		calls := make(chan struct{}, 100)
		for range 100 {
			calls <- struct{}{}
		}
		close(calls)
		for range 4 {
			wg.Go(func() {
				for range calls {
					if r := get(rt); r.status == 200 {
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return int(n.Load()), u.Count() - int(n.Load()), time.Since(start)
	}
	var bare int
	synctest.Test(t, func(t *testing.T) {
		bare, _, _ = run(t, func(rt http.RoundTripper) http.RoundTripper { return rt })
	})
	synctest.Test(t, func(t *testing.T) {
		ok, throttled, took := run(t, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
		perOK := float64(throttled) / max(1, float64(ok))
		t.Logf("quota of %d/s, 4 workers: %d/100 calls ok (bare client %d), %d 429s (%.2f per ok call) in %s", quota, ok, bare, throttled, perOK, took)
		if ok < 95 || perOK > 0.2 {
			t.Fatalf("%d/100 ok with %.2f 429s per ok call; want at least 95 and at most 0.2", ok, perOK)
		}
	})
}

// One of two backends down behind a round-robin proxy, 25 calls/s for 8 s:
// every other request fails, and the retry goes to the other backend.
func TestPartialOutageOneOfTwoDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 0 {
				return breakwatertest.Step{Status: http.StatusBadGateway} // the dead backend's turn
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		tr := newTransport(t, u.Transport())
		calls := openLoop(tr, 40*time.Millisecond, 8*time.Second, 2*time.Second)
		ok := 0
		for _, c := range calls {
			if c.r.status == http.StatusOK {
				ok++
			}
		}
		t.Logf("one of two backends down: %d/%d calls ok, %.2f requests per call (bare: half)", ok, len(calls), float64(u.Count())/float64(len(calls)))
		if ok < 190*len(calls)/200 {
			t.Errorf("%d/%d calls ok, want at least 190/200", ok, len(calls))
		}
	})
}

// A maintenance that does not end: every request answered 503 with
// Retry-After: 1 for 3 minutes, 20 calls/s with 2 s deadlines. The hold
// probes at the breaker's cadence for an old outage: after the first
// minute the host costs well under a request per second, the cadence's
// 0.29; a fixed probe interval would send one every 175 ms for ever.
func TestPartialOutageLongMaintenance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"1"}}})
		load(newTransport(t, u.Transport()), 20, 3*time.Minute, 2*time.Second)
		var first, later int
		for _, at := range arrivals(u) {
			if at.Sub(start) < time.Minute {
				first++
			} else {
				later++
			}
		}
		perSecond := float64(later) / 120
		t.Logf("a 3 min maintenance at 20 calls/s: %d requests in its first minute, %.2f/s after it (bare: 20/s)", first, perSecond)
		// The cadence probes 22 times per doubling of the hold's age: about
		// 35 probes from the first minute to the third, 0.29/s.
		if perSecond > 0.4 {
			t.Errorf("%.2f requests/s after the first minute of a maintenance, want at most 0.4 (the cadence's 0.29)", perSecond)
		}
	})
}

// The maintenance window again, each call with a 2 s deadline, the
// recovery at three phases of the probes: the calls held through it whose
// deadline is more than one arrival gap (20 ms) later than the first
// success after it get through, none failing ErrPaused, while the upstream
// sees at most twice the offered load in any 50 ms: the held calls leave in
// one line, earliest deadline first, a little over twice as fast as they
// arrived. A call due within a line's turn of that first success may not
// get one; those are counted apart.
func TestPartialOutageMaintenanceHeldCallsMeetTheirDeadlines(t *testing.T) {
	for _, phase := range []time.Duration{0, 60 * time.Millisecond, 120 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			recovery := start.Add(3*time.Second + phase)
			u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
				if time.Now().Before(recovery) {
					return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"1"}}}
				}
				return breakwatertest.Step{Delay: 5 * time.Millisecond}
			})
			tr := newTransport(t, u.Transport())
			calls := openLoop(tr, 20*time.Millisecond, 6*time.Second, 2*time.Second)
			var firstOK time.Time
			var after []time.Time
			for _, r := range u.Requests() {
				if !r.At.Before(recovery) {
					if firstOK.IsZero() {
						firstOK = r.At
					}
					after = append(after, r.At)
				}
			}
			paused, soon, later, laterOK := 0, 0, 0, 0
			for _, c := range calls {
				due := c.at.Add(2 * time.Second)
				if !due.After(firstOK) {
					continue
				}
				later++
				switch {
				case c.r.status == http.StatusOK:
					laterOK++
				case errors.Is(c.r.err, bw.ErrPaused) && due.Sub(firstOK) <= 20*time.Millisecond:
					soon++
				case errors.Is(c.r.err, bw.ErrPaused):
					paused++
				}
			}
			n := maxInWindow(after, 50*time.Millisecond)
			t.Logf("maintenance ending %s into the probes' cycle, 2 s deadlines: of %d calls whose deadline is later than the first success (%s after the recovery), %d ok, %d ErrPaused (and %d due within 20 ms of it); at most %d requests in 50 ms after it (2.5 offered)",
				phase, later, firstOK.Sub(recovery), laterOK, paused, soon, n)
			if paused > 0 || soon > 1 {
				t.Errorf("%d calls with a deadline more than 20 ms later than the first success failed with ErrPaused, and %d due sooner; want none, and at most 1", paused, soon)
			}
			if n > 5 {
				t.Errorf("%d requests in 50 ms after the recovery, more than twice the offered load (2.5)", n)
			}
		})
	}
}
