package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
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

// healthLog records the endpoint health events a transport reports, with
// the time each arrived.
type healthLog struct {
	mu     sync.Mutex
	events []healthEvent
}

type healthEvent struct {
	bw.Event
	At time.Time
}

func (h *healthLog) Observe(_ context.Context, e bw.Event) {
	if e.Kind != bw.EventHealth {
		return
	}
	h.mu.Lock()
	h.events = append(h.events, healthEvent{e, time.Now()})
	h.mu.Unlock()
}

func (h *healthLog) list() []healthEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]healthEvent(nil), h.events...)
}

// TestFailoverRewritesAndTakesTurns: attempts go to the endpoints in
// turns, with the endpoint's scheme, host and path prefix; the Host header
// follows the endpoint unless the caller set its own.
func TestFailoverRewritesAndTakesTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{Endpoints: []string{
			"http://a.test/v1", "http://b.test", "http://c.test:8080/base/",
		}}))
		for range 6 {
			req, _ := http.NewRequest(http.MethodGet, "http://logical.test/items?x=1", nil)
			if r := do(tr, req); r.status != 200 {
				t.Fatalf("%+v", r)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, "http://logical.test/items", nil)
		req.Host = "virtual.test"
		do(tr, req)
		var got []string
		for _, r := range u.Requests() {
			got = append(got, r.Host+r.Path)
		}
		want := "a.test/v1/items b.test/items c.test:8080/base/items a.test/v1/items b.test/items c.test:8080/base/items virtual.test/v1/items"
		if strings.Join(got, " ") != want {
			t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, " "), want)
		}
	})
}

// TestFailoverRetriesElsewhere: one endpoint answers 500; every call still
// succeeds, its retry going to another endpoint, and the failing endpoint
// is ejected after 5 failures in a row.
func TestFailoverRetriesElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.Host == "bad.test" {
				return breakwatertest.Step{Status: 500}
			}
			return breakwatertest.Step{}
		})
		var h healthLog
		tr := newTransport(t, u.Transport(), bw.WithObserver(&h), bw.WithFailover(bw.Failover{Endpoints: []string{
			"http://bad.test", "http://good1.test", "http://good2.test",
		}}))
		for i := range 30 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		bad := 0
		for _, r := range u.Requests() {
			if r.Host == "bad.test" {
				bad++
			}
		}
		if bad != 5 {
			t.Fatalf("bad.test got %d requests, want 5 (then ejected)", bad)
		}
		for _, e := range tr.Snapshot().Endpoints {
			if e.InFlight != 0 {
				t.Errorf("%s: %d attempts in flight after every call ended", e.Endpoint, e.InFlight)
			}
		}
		ev := h.list()
		if len(ev) != 1 || ev[0].Endpoint != "http://bad.test" || ev[0].Health != bw.HealthEjected {
			t.Fatalf("health events: %+v", ev)
		}
	})
}

// TestFailoverOutlierRate: one endpoint of three answers 500 to 30 % of
// its requests; it is ejected and the other two stay in. With the 500s
// spread so that never 5 come in a row, it is the failure rate that ejects
// it; with 30 % drawn at random, either rule may come first.
func TestFailoverOutlierRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(k int64, rng *rand.Rand) bool
		outlier bool
	}{
		{"spread", func(k int64, _ *rand.Rand) bool { return k%10 == 2 || k%10 == 5 || k%10 == 8 }, true},
		{"random", func(_ int64, rng *rand.Rand) bool { return rng.Float64() < 0.3 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					n   atomic.Int64
					mu  sync.Mutex
					rng = rand.New(rand.NewPCG(3, 4))
				)
				u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
					if r.Host == "flaky.test" {
						mu.Lock()
						defer mu.Unlock()
						if tc.fail(n.Add(1), rng) {
							return breakwatertest.Step{Status: 500}
						}
					}
					return breakwatertest.Step{}
				})
				var h healthLog
				tr := newTransport(t, u.Transport(), bw.WithObserver(&h), bw.WithFailover(bw.Failover{Endpoints: []string{
					"http://flaky.test", "http://a.test", "http://b.test",
				}}))
				for i := range 300 {
					if r := get(tr); r.status != 200 {
						t.Fatalf("call %d: %+v", i, r)
					}
					time.Sleep(10 * time.Millisecond)
				}
				var ejected []string
				for _, e := range h.list() {
					if e.Health == bw.HealthEjected {
						ejected = append(ejected, e.Endpoint+" "+string(e.Reason))
					}
				}
				if len(ejected) == 0 {
					t.Fatal("the flaky endpoint was never ejected")
				}
				for _, e := range ejected {
					if !strings.HasPrefix(e, "http://flaky.test ") {
						t.Fatalf("ejections: %v", ejected)
					}
				}
				if tc.outlier && !strings.HasSuffix(ejected[0], string(bw.ReasonOutlier)) {
					t.Fatalf("first ejection %q, want for its failure rate", ejected[0])
				}
				t.Logf("ejections: %v", ejected)
			})
		})
	}
}

// TestFailoverAllBreakersOpen: with every endpoint's breaker open a call
// fails fast with an ErrCircuitOpen and sends nothing.
func TestFailoverAllBreakersOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test"}}))
		tr.Breakers().Get("http://a.test").Trip(time.Minute)
		tr.Breakers().Get("http://b.test").Trip(time.Minute)
		r := get(tr)
		var be *bw.Error
		if !errors.As(r.err, &be) || !errors.Is(r.err, bw.ErrCircuitOpen) {
			t.Fatalf("err = %v, want an *Error matching ErrCircuitOpen", r.err)
		}
		if u.Count() != 0 {
			t.Fatal("a request was sent")
		}
		// One open: calls go to the other.
		tr.Breakers().Get("http://b.test").Reset()
		for range 4 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
		}
		for _, r := range u.Requests() {
			if r.Host != "b.test" {
				t.Fatalf("a request went to %s, whose breaker is open", r.Host)
			}
		}
	})
}

// restartable is a loopback server that can die (listener closed and
// connections dropped) and come back on the same address.
type restartable struct {
	t     *testing.T
	addr  string
	h     http.Handler
	mu    sync.Mutex
	srv   *httptest.Server
	conns atomic.Int64 // open server-side connections
}

func newRestartable(t *testing.T, h http.Handler) *restartable {
	r := &restartable{t: t, h: h}
	r.start("127.0.0.1:0")
	r.addr = r.srv.Listener.Addr().String()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start(addr string) {
	var l net.Listener
	var err error
	for range 50 { // the port may linger a moment
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("listen %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(r.h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			r.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			r.conns.Add(-1)
		}
	}
	srv.Start()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

func (r *restartable) url() string { return "http://" + r.addr }

// TestFailoverSurvivesADeadEndpoint: three loopback endpoints under eight
// callers; one dies mid-run (listener closed, connections dropped). After
// the death each caller sees at most one failed call, the dead endpoint is
// ejected within a second, and once it comes back it is probed back in.
// No connection is left open.
func TestFailoverSurvivesADeadEndpoint(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(time.Millisecond)
		_, _ = w.Write([]byte("ok"))
	})
	eps := []*restartable{newRestartable(t, ok), newRestartable(t, ok), newRestartable(t, ok)}
	var h healthLog
	tr, err := bw.NewTransport(bw.WithObserver(&h), bw.WithFailover(bw.Failover{
		Endpoints: []string{eps[0].url(), eps[1].url(), eps[2].url()},
		Ejection:  500 * time.Millisecond,
	}))
	if err != nil {
		t.Fatal(err)
	}
	const workers = 8
	var (
		stop      atomic.Bool
		deadAt    atomic.Int64 // unix nanos; 0 while alive
		failed    [workers]int // after the death
		calls     atomic.Int64
		wg        sync.WaitGroup
		ctx, done = context.WithCancel(context.Background())
	)
	defer done()
	for w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://service/item", nil)
				r := do(tr, req)
				calls.Add(1)
				if (r.err != nil || r.status != 200) && deadAt.Load() != 0 {
					failed[w]++
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	deadAt.Store(time.Now().UnixNano())
	eps[0].stop()
	time.Sleep(time.Second)
	eps[0].start(eps[0].addr)
	returnedAt := time.Now()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	tr.CloseIdleConnections()

	var ejectedAfter, backAfter time.Duration = -1, -1
	for _, e := range h.list() {
		if e.Endpoint != eps[0].url() {
			t.Errorf("a live endpoint changed health: %+v", e)
			continue
		}
		switch {
		case e.Health == bw.HealthEjected && ejectedAfter < 0:
			ejectedAfter = e.At.Sub(time.Unix(0, deadAt.Load()))
		case e.Health == bw.HealthHealthy && backAfter < 0 && e.At.After(returnedAt):
			backAfter = e.At.Sub(returnedAt)
		}
	}
	t.Logf("%d calls; failed after the death, per caller: %v; ejected %s after the death; back %s after it returned",
		calls.Load(), failed, ejectedAfter, backAfter)
	for w, n := range failed {
		if n > 1 {
			t.Errorf("caller %d saw %d failed calls after the death", w, n)
		}
	}
	if ejectedAfter < 0 || ejectedAfter > time.Second {
		t.Errorf("dead endpoint ejected %s after its death, want within 1s", ejectedAfter)
	}
	if backAfter < 0 {
		t.Error("the endpoint never came back after it returned")
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, ep := range eps {
		for ep.conns.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := ep.conns.Load(); n != 0 {
			t.Errorf("%s: %d server connections left open", ep.url(), n)
		}
	}
}

// TestSnapshotShowsEndpoints: a Transport's Snapshot (and its JSON)
// covers the endpoints of a Failover.
func TestSnapshotShowsEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.Host == "down.test" {
				return breakwatertest.Step{Status: 500}
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{Endpoints: []string{"http://up.test", "http://down.test"}}))
		for range 30 {
			get(tr)
		}
		s := tr.Snapshot()
		if len(s.Endpoints) != 2 {
			t.Fatalf("endpoints %+v", s.Endpoints)
		}
		up, down := s.Endpoints[0], s.Endpoints[1]
		if up.Endpoint != "http://up.test" || up.Health != bw.HealthHealthy || up.Attempts < 25 || up.Failures != 0 {
			t.Fatalf("up: %+v", up)
		}
		if down.Health != bw.HealthEjected || down.Ejections != 1 || down.RemainingSeconds <= 0 {
			t.Fatalf("down: %+v", down)
		}
		rec := jsonOf(t, tr.Snapshot())
		for _, want := range []string{`"endpoint": "http://down.test"`, `"health": "ejected"`} {
			if !strings.Contains(rec.String(), want) {
				t.Fatalf("snapshot JSON lacks %s:\n%s", want, rec)
			}
		}
	})
}

// TestFailoverSurvivesADeadEndpointInVirtualTime is
// TestFailoverSurvivesADeadEndpoint in a synctest bubble, where the
// figures are exact: one endpoint of three starts refusing connections at
// 300 ms and accepts them again at 1.3 s.
func TestFailoverSurvivesADeadEndpointInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: time.Millisecond})
		var dead atomic.Bool
		base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Host == "a.test" && dead.Load() {
				if req.Body != nil {
					req.Body.Close()
				}
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
			}
			return u.Transport().RoundTrip(req)
		})
		var h healthLog
		tr := newTransport(t, base, bw.WithObserver(&h), bw.WithFailover(bw.Failover{
			Endpoints: []string{"http://a.test", "http://b.test", "http://c.test"},
			Ejection:  500 * time.Millisecond,
		}))
		const workers = 8
		var (
			stop   atomic.Bool
			failed [workers]int
			calls  atomic.Int64
			wg     sync.WaitGroup
		)
		for w := range workers {
			wg.Go(func() {
				for !stop.Load() {
					r := get(tr)
					calls.Add(1)
					if (r.err != nil || r.status != 200) && dead.Load() {
						failed[w]++
					}
				}
			})
		}
		start := time.Now()
		time.Sleep(300 * time.Millisecond)
		dead.Store(true)
		time.Sleep(time.Second)
		dead.Store(false)
		time.Sleep(2 * time.Second)
		stop.Store(true)
		wg.Wait()

		var ejected, back []time.Duration
		for _, e := range h.list() {
			if e.Endpoint != "http://a.test" {
				t.Errorf("a live endpoint changed health: %+v", e.Event)
			}
			switch e.Health {
			case bw.HealthEjected:
				ejected = append(ejected, e.At.Sub(start))
			case bw.HealthHealthy:
				back = append(back, e.At.Sub(start))
			}
		}
		t.Logf("%d calls; failed after the death, per caller: %v; ejections at %v, back at %v", calls.Load(), failed, ejected, back)
		for w, n := range failed {
			if n > 1 {
				t.Errorf("caller %d saw %d failed calls after the death", w, n)
			}
		}
		if len(ejected) == 0 || ejected[0]-300*time.Millisecond > time.Second {
			t.Errorf("ejections at %v, want the first within 1s of the death at 300ms", ejected)
		}
		if len(back) == 0 || back[len(back)-1] < 1300*time.Millisecond {
			t.Errorf("returns at %v, want one after the endpoint came back at 1.3s", back)
		}
	})
}

func TestFailoverConfigErrors(t *testing.T) {
	_, err := bw.NewTransport(bw.WithFailover(bw.Failover{Endpoints: []string{"ftp://a", "http://b", "http://b"}, MaxEjected: 2}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"scheme must be http or https", "listed twice", "MaxEjected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if _, err := bw.RetryStage(bw.WithFailover(bw.Failover{Endpoints: []string{"http://a"}})); err == nil {
		t.Error("RetryStage accepted WithFailover")
	}
}

func TestExplainFailover(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithFailover(bw.Failover{
		Endpoints: []string{"https://eu.example", "https://us.example", "https://ap.example"}, LeastInFlight: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `  failover
    endpoints        3: https://eu.example, https://us.example, https://ap.example
    choice           fewest in flight within the best health tier; a retry or a hedge to an endpoint not tried yet
    ejects after     5 failing attempts in a row, or a failure rate >= 2x the others' + 10 points over 10s (>= 20 attempts)
    ejected for      500ms while the outage is young, then 1/32 of its age up to 60s, +10% jitter; at most 1 of 3 at once
    all out          the endpoint whose ejection ends first; ErrCircuitOpen when every breaker is open
`
	if got := tr.Explain(); !strings.Contains(got, want) {
		t.Fatalf("Explain:\n%s\nwant it to contain:\n%s", got, want)
	}
}

// An ejection that ended is probed by the next attempt that can be
// repeated elsewhere, with failover alone (no hedging): a GET brings the
// endpoint back once its ejection (1 s, plus up to 10 % jitter) is over.
func TestFailoverProbesAfterTheEjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var badSeen atomic.Int64
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			if r.Host == "bad.test" && badSeen.Add(1) == 1 {
				return breakwatertest.Step{Status: 500}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{
			Endpoints:   []string{"http://bad.test", "http://good1.test", "http://good2.test"},
			Consecutive: 1, Ejection: time.Second,
		}))
		for i := range 3 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		if badSeen.Load() != 1 {
			t.Fatalf("bad.test got %d requests, want 1 (then ejected)", badSeen.Load())
		}
		time.Sleep(1200 * time.Millisecond)
		if r := get(tr); r.status != 200 || badSeen.Load() != 2 {
			t.Fatalf("%+v; bad.test got %d requests, want its probe (2)", r, badSeen.Load())
		}
	})
}

// TestFailoverRoutesAroundAThrottledEndpoint: one endpoint of three
// answers 429 (or 503) with Retry-After; the call's retry goes at once to
// another endpoint, whether the hint fits the call's deadline or not, and
// only the throttled endpoint is paused: the next calls go to the others
// at once.
func TestFailoverRoutesAroundAThrottledEndpoint(t *testing.T) {
	for _, tc := range []struct {
		status int
		hint   string
	}{{429, "10"}, {429, "100"}, {503, "10"}, {503, "100"}} {
		t.Run(fmt.Sprintf("%d Retry-After %s", tc.status, tc.hint), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
					if r.Host == "a.test" {
						return breakwatertest.Step{Status: tc.status, Header: http.Header{"Retry-After": {tc.hint}}}
					}
					return breakwatertest.Step{}
				})
				tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{Endpoints: []string{
					"http://a.test", "http://b.test", "http://c.test",
				}}))
				for i := range 6 {
					start := time.Now()
					if r := get(tr); r.status != 200 || time.Since(start) != 0 {
						t.Fatalf("call %d: %+v after %s, want a 200 at once", i, r, time.Since(start))
					}
				}
				hosts := map[string]int{}
				for _, r := range u.Requests() {
					hosts[r.Host]++
				}
				if hosts["a.test"] != 1 || hosts["b.test"]+hosts["c.test"] != 6 {
					t.Fatalf("requests by endpoint: %v, want a.test once and the 6 calls on b and c", hosts)
				}
				paused := map[string]bool{}
				for _, p := range tr.Snapshot().Pauses {
					paused[p.Key] = p.Paused
				}
				if tc.status == 429 && !paused["http://a.test"] || paused["http://b.test"] || paused["http://c.test"] {
					t.Fatalf("pauses: %v, want a.test alone paused", paused)
				}
			})
		})
	}
}

// TestFailoverPassesOverAPausedEndpoint: a.test is paused for 100 s by a
// 429; b.test and c.test are degraded by one 503 with Retry-After each,
// which holds neither. Calls go to b and c at once, never to the paused
// endpoint, which would refuse them with ErrPaused.
func TestFailoverPassesOverAPausedEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			mu.Lock()
			defer mu.Unlock()
			seen[r.Host]++
			switch {
			case r.Host == "a.test":
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"100"}}}
			case seen[r.Host] == 1:
				return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"10"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithFailover(bw.Failover{Endpoints: []string{
			"http://a.test", "http://b.test", "http://c.test",
		}}))
		// a's 429, then b's and c's 503s, at once: the attempts ran out.
		start := time.Now()
		if r := get(tr); r.status != 503 || time.Since(start) != 0 {
			t.Fatalf("first call: %+v after %s, want the last 503 at once", r, time.Since(start))
		}
		for i := range 9 {
			start := time.Now()
			if r := get(tr); r.status != 200 || time.Since(start) != 0 {
				t.Fatalf("call %d: %+v after %s, want a 200 at once", i+2, r, time.Since(start))
			}
		}
		if seen["a.test"] != 1 {
			t.Fatalf("requests by endpoint: %v, want a.test once", seen)
		}
	})
}

// A failover endpoint killed for 3 s and restarted gets traffic again
// within a second of its restart, with the default ejection times.
func TestFailoverRestartedEndpointGetsTrafficBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: time.Millisecond})
		var dead atomic.Bool
		var restarted, back atomic.Int64 // nanoseconds since start; 0: not yet
		start := time.Now()
		base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Host == "a.test" {
				if dead.Load() {
					if req.Body != nil {
						req.Body.Close()
					}
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
				}
				if restarted.Load() != 0 {
					back.CompareAndSwap(0, int64(time.Since(start)))
				}
			}
			return u.Transport().RoundTrip(req)
		})
		tr := newTransport(t, base, bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test"}}))
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					get(tr)
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		time.Sleep(500 * time.Millisecond)
		dead.Store(true)
		time.Sleep(3 * time.Second)
		dead.Store(false)
		restarted.Store(int64(time.Since(start)))
		time.Sleep(3 * time.Second)
		stop.Store(true)
		wg.Wait()
		if back.Load() == 0 {
			t.Fatal("the restarted endpoint got no traffic in 3 s")
		}
		after := time.Duration(back.Load() - restarted.Load())
		t.Logf("a killed endpoint, restarted after 3 s, got its first request %s after its restart", after)
		if after > time.Second {
			t.Errorf("the restarted endpoint waited %s for traffic, want at most 1s", after)
		}
	})
}

// TestFailoverBreakerKeptThroughChurn: an endpoint's breaker stays in the
// registry while an attempt to it runs, however many other keys come and
// go meanwhile, so the failure the attempt shows is charged to the breaker
// later calls consult.
func TestFailoverBreakerKeptThroughChurn(t *testing.T) {
	var tr *bw.Transport
	sent := map[string]int{}
	base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sent[req.URL.Host]++
		for i := range 50 { // other keys crowd the registry while the attempt runs
			tr.Breakers().Get(fmt.Sprintf("other-%d", i))
		}
		return &http.Response{StatusCode: http.StatusInternalServerError, Body: http.NoBody, Request: req}, nil
	})
	tr = newTransport(t, base,
		bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test"}}),
		bw.WithKeyLimits(4, time.Hour),
		bw.WithPolicy(bw.Consecutive(1)),
		bw.WithMaxAttempts(1))
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	for host, n := range sent {
		b, ok := tr.Breakers().Lookup("http://" + host)
		if n > 0 && (!ok || b.State() != bw.StateOpen) {
			t.Errorf("%s failed %d times, and its breaker is not open in the registry (present: %v)", host, n, ok)
		}
	}
	if len(sent) == 0 {
		t.Fatal("nothing was sent")
	}
}
