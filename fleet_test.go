package breakwater_test

// A fleet: a client calls service A, whose handler calls backend B, both
// hops through breakwater Transports, A behind CallerHeaders, over real
// loopback servers. Its figures are logged (go test -v -run TestFleet).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// fleetFigures are what an outage of the last service cost.
type fleetFigures struct {
	calls, after, afterOK int // client calls; those sent after B came back, and those that succeeded
	perCall               map[string]int
	mean                  float64       // B's requests per client call
	most                  int           // B's requests for one client call, at most
	firstOK               time.Duration // from B's return to its first 200; -1: none
}

// measureTwoTiers runs a client -> A -> B chain, the propagation on or off
// at both hops: B answers 500 for outage, then 200; the client sends a call
// every 40 ms for total, each with a 2 s deadline and its number in
// X-Call, which A passes on.
func measureTwoTiers(t *testing.T, propagate bool, outage, total time.Duration) fleetFigures {
	var mu sync.Mutex
	perCall := map[string]int{}
	var recovery time.Time
	firstOK := time.Duration(-1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perCall[r.Header.Get("X-Call")]++
		down := time.Now().Before(recovery)
		if !down && firstOK < 0 {
			firstOK = time.Since(recovery)
		}
		mu.Unlock()
		if down {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer b.Close()
	toB := newTransport(t, b.Client().Transport, bw.WithPropagation(propagate))
	trust, err := bw.CallerHeaders("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a := httptest.NewServer(trust(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, b.URL, nil)
		req.Header.Set("X-Call", r.Header.Get("X-Call"))
		resp, err := toB.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})))
	defer a.Close()
	toA := newTransport(t, a.Client().Transport, bw.WithPropagation(propagate))

	start := time.Now()
	mu.Lock()
	recovery = start.Add(outage)
	mu.Unlock()
	const interval = 40 * time.Millisecond
	n := int(total / interval)
	ok := make([]bool, n)
	sent := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		sent[i] = time.Now()
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
			req.Header.Set("X-Call", strconv.Itoa(i))
			if resp, err := toA.RoundTrip(req); err == nil {
				ok[i] = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
		})
		time.Sleep(interval)
	}
	wg.Wait()
	f := fleetFigures{calls: n, perCall: perCall, firstOK: firstOK}
	for i := range n {
		if !sent[i].Before(recovery) {
			f.after++
			if ok[i] {
				f.afterOK++
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sum := 0
	for _, c := range perCall {
		sum += c
		f.most = max(f.most, c)
	}
	f.mean = float64(sum) / float64(n)
	return f
}

// B is down for 2 s behind A: with propagation, the tier next to B retries
// once and the client not at all, so B sees at most 2 requests for any one
// client call and at most 1.2 on average, and the calls after B's return
// succeed as they do without it.
func TestFleetTwoTiersRetryOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4 s outage and recovery in real time")
	}
	off := measureTwoTiers(t, false, 2*time.Second, 4*time.Second)
	on := measureTwoTiers(t, true, 2*time.Second, 4*time.Second)
	t.Logf("B down 2 s behind A, %d client calls: B saw %.2f requests per call, at most %d (without propagation %.2f, at most %d); after B's return %d/%d ok (without %d/%d), the first %s after it (without %s)",
		on.calls, on.mean, on.most, off.mean, off.most, on.afterOK, on.after, off.afterOK, off.after, on.firstOK, off.firstOK)
	if on.firstOK < 0 || on.firstOK > 500*time.Millisecond {
		t.Errorf("B answered its first 200 %s after its return, want within 500ms", on.firstOK)
	}
	if on.most > 2 {
		t.Errorf("B saw %d requests for one client call, want at most 2", on.most)
	}
	if on.mean > 1.2 {
		t.Errorf("B saw %.2f requests per client call, want at most 1.2", on.mean)
	}
	// The calls lost after B's return are the client's own breaker's
	// refusals in the last 100 ms of its opening, with or without
	// propagation: 0 to 3 of about 50 over runs.
	if rate, was := float64(on.afterOK)/float64(on.after), float64(off.afterOK)/float64(off.after); rate < was-0.06 || rate < 0.9 {
		t.Errorf("%d/%d calls after B's return succeeded, want as many as without propagation (%d/%d)", on.afterOK, on.after, off.afterOK, off.after)
	}
}

// overloadFigures are how a server's workers spent their time in an
// overload.
type overloadFigures struct {
	busy, wasted time.Duration // worker time, and the part spent on answers that came after their caller's deadline or never
	served, shed int
}

// measureOverload offers a server of 4 workers (a Shedder of 4 slots) 280
// calls per second for 4 s, each with a 500 ms deadline that the server
// learns only through CallerHeaders when propagate is set; work takes
// 10 ms (400 per second), and 30 ms from 1 s to 3 s. The handler honours
// its context; a client that gives up does not end it (as behind a proxy).
func measureOverload(t *testing.T, propagate bool) overloadFigures {
	sh, _ := newShedder(t, 4)
	trust, err := bw.CallerHeaders("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var mu sync.Mutex
	var f overloadFigures
	h := trust(sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		work := 10 * time.Millisecond
		if at := began.Sub(start); at >= time.Second && at < 3*time.Second {
			work = 30 * time.Millisecond
		}
		done := true
		select {
		case <-time.After(work):
		case <-r.Context().Done():
			done = false // cut short: no answer
		}
		end := time.Now()
		deadline, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Deadline"))
		mu.Lock()
		f.busy += end.Sub(began)
		if !done || end.After(deadline) {
			f.wasted += end.Sub(began)
		} else {
			f.served++
		}
		mu.Unlock()
	})))
	var wg sync.WaitGroup
	for range 4 * 280 {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = "127.0.0.1:4000"
			req.Header.Set("X-Deadline", time.Now().Add(500*time.Millisecond).Format(time.RFC3339Nano))
			if propagate {
				req.Header.Set("Breakwater-Timeout-Ms", "500")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusServiceUnavailable {
				mu.Lock()
				f.shed++
				mu.Unlock()
			}
		})
		time.Sleep(time.Second / 280)
	}
	wg.Wait()
	return f
}

// In an overload, a server that knows its callers' deadlines spends at
// most 1 % of its workers' time on answers nobody waits for.
func TestFleetOverloadWorksForWaitingCallers(t *testing.T) {
	var off, on overloadFigures
	synctest.Test(t, func(t *testing.T) { off = measureOverload(t, false) })
	synctest.Test(t, func(t *testing.T) { on = measureOverload(t, true) })
	share := func(f overloadFigures) float64 { return 100 * f.wasted.Seconds() / f.busy.Seconds() }
	t.Logf("overload of 280 calls/s on 4 workers of 400/s, a third of it for 2 s: %.1f %% of the workers' time on answers nobody waited for, %d answered in time, %d shed (without the deadline: %.1f %%, %d in time, %d shed)",
		share(on), on.served, on.shed, share(off), off.served, off.shed)
	if share(on) > 1 {
		t.Errorf("%.1f %% of the workers' time went to answers after their caller's deadline, want at most 1 %%", share(on))
	}
	if on.served < off.served {
		t.Errorf("%d answers in time, want at least as many as without the deadline (%d)", on.served, off.served)
	}
}
