package breakwater_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A registry of breakers, one per upstream host, that opens on the third
// failure within a minute.
func ExampleNewBreakers() {
	breakers, err := bw.NewBreakers(
		bw.WithPolicy(bw.Window(2, time.Minute)),
		onTransition(func(t bw.Transition) {
			fmt.Printf("%s: %s -> %s (%s after %d failures)\n", t.Key, t.From, t.To, t.Reason, t.Failures)
		}),
	)
	if err != nil {
		panic(err)
	}
	for range 4 {
		permit, err := breakers.Get("payments.internal:443").Allow()
		if errors.Is(err, bw.ErrCircuitOpen) {
			fmt.Println("rejected:", err != nil)
			continue
		}
		// ... make the attempt, classify it, and report the outcome:
		permit.Done(bw.Outcome{Category: bw.ServerError, Status: 502})
	}
	fmt.Println("available:", available(breakers, "payments.internal:443"))
	// Output:
	// payments.internal:443: closed -> open (failures after 3 failures)
	// rejected: true
	// available: false
}

// Consecutive counting with a lower threshold for timeouts, in the manner of
// Lasso's per-category thresholds.
func ExampleConsecutive() {
	breakers, _ := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.Timeout, 2)))
	for _, c := range []bw.Category{bw.ServerError, bw.Timeout} {
		breakers.Get("search").RecordFailure(c)
		fmt.Println(c, "->", breakers.Get("search").State())
	}
	// Output:
	// server_error -> closed
	// timeout -> open
}

// Trip forces a breaker open, for a planned maintenance window or an
// operator's decision; Reset closes it again.
func ExampleBreaker_Trip() {
	breakers, _ := bw.NewBreakers()
	breakers.Get("ledger").Trip(10 * time.Minute)
	_, err := breakers.Get("ledger").Allow()
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrCircuitOpen), d > 9*time.Minute)
	}
	breakers.Get("ledger").Reset()
	fmt.Println(breakers.Get("ledger").State())
	// Output:
	// true true
	// closed
}

// hostKey is the key a Transport counts calls to url under.
func hostKey(url string) string { return bw.HostKey(httptest.NewRequest(http.MethodGet, url, nil)) }

// An opening lasts 50 ms at first: a call refused by the open breaker
// learns when to come back, and then is let through as a probe.
func ExampleWithOpenTimeout() {
	srv := newCounted(failFirst(1, http.StatusBadGateway))
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1),
		bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(50*time.Millisecond, time.Second))
	fmt.Println(getVia(tr, srv.URL))
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	d, _ := bw.RetryAfter(err)
	fmt.Println(outcome(nil, err), "back within 50ms:", d > 0 && d <= 50*time.Millisecond)
	time.Sleep(d)
	fmt.Println(tr.Breakers().Get(hostKey(srv.URL)).State())
	fmt.Println(getVia(tr, srv.URL), "after", sent(srv.requests()))
	// Output:
	// 502
	// ErrCircuitOpen back within 50ms: true
	// half_open
	// 200 after 2 requests
}

// Without jitter an opening lasts the open timeout exactly; by default it
// is shortened by up to 10 %, so that replicas do not probe in lockstep.
func ExampleWithOpenJitter() {
	srv := newCounted(always(http.StatusBadGateway))
	defer srv.Close()
	for _, jitter := range []float64{0, 0.1} {
		var openFor time.Duration
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1),
			bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(time.Second, time.Minute),
			bw.WithOpenJitter(jitter), onTransition(func(t bw.Transition) { openFor = t.OpenFor }))
		getVia(tr, srv.URL)
		fmt.Println(jitter, openFor == time.Second, openFor >= 900*time.Millisecond && openFor <= time.Second)
	}
	// Output:
	// 0 true true
	// 0.1 false true
}

// By default a half-open breaker closes after two successful probes; with
// WithHalfOpen(1, 1), after one.
func ExampleWithHalfOpen() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithHalfOpen(1, 1)}} {
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport))...)
		b := tr.Breakers().Get(hostKey(srv.URL))
		b.Trip(time.Millisecond)
		time.Sleep(2 * time.Millisecond)
		fmt.Println(b.State(), getVia(tr, srv.URL), b.State())
	}
	// Output:
	// half_open 200 half_open
	// half_open 200 closed
}

// A probe whose outcome never comes back (its permit lost) holds the only
// probe slot until the probe timeout reclaims it.
func ExampleWithProbeTimeout() {
	breakers, _ := bw.NewBreakers(bw.WithProbeTimeout(40 * time.Millisecond))
	b := breakers.Get("api")
	b.Trip(time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	fmt.Println(b.State())
	_, err := b.Allow() // a probe whose Done is never called
	fmt.Println("probe:", err)
	_, err = b.Allow()
	fmt.Println("while it is out:", errors.Is(err, bw.ErrHalfOpenBusy))
	time.Sleep(40 * time.Millisecond)
	p, err := b.Allow()
	fmt.Println("after the probe timeout:", err)
	p.Done(bw.Outcome{Category: bw.Success, Status: 200})
	// Output:
	// half_open
	// probe: <nil>
	// while it is out: true
	// after the probe timeout: <nil>
}

// 401 counts as a success by default (the upstream answered); counted as
// a failure, expired credentials open the breaker.
func ExampleWithCountAsFailure() {
	srv := newCounted(always(http.StatusUnauthorized))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithCountAsFailure(bw.AuthError)}} {
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1),
			bw.WithPolicy(bw.Consecutive(2)))...)
		fmt.Println(getVia(tr, srv.URL), getVia(tr, srv.URL), getVia(tr, srv.URL))
	}
	// Output:
	// 401 401 401
	// 401 401 ErrCircuitOpen
}

// Rehearsing an outage: every call is refused as by an open breaker, and
// the refusal says it was injected; the upstream sees nothing.
func ExampleWithFaultInjection() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithFaultInjection(1))
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	var e *bw.Error
	fmt.Println(outcome(nil, err), errors.As(err, &e) && e.Injected, sent(srv.requests()))
	// Output: ErrCircuitOpen true 0 requests
}

// Twenty calls to an upstream that is down: the default breaker opens on
// the 11th failing call and spares the upstream the rest; without a
// breaker every call reaches it.
func ExampleWithoutBreaker() {
	srv := newCounted(always(http.StatusInternalServerError))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithoutBreaker()}} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1))...)
		for range 20 {
			getVia(tr, srv.URL)
		}
		fmt.Println(sent(srv.requests()), "for 20 calls")
	}
	// Output:
	// 11 requests for 20 calls
	// 20 requests for 20 calls
}

// replicaBus is an in-memory ClusterBus of several replicas in one
// process: each replica's member delivers what the others publish.
type replicaBus struct {
	mu   sync.Mutex
	subs map[int][]func(bw.ClusterEvent)
}

// member is replica id's end of a replicaBus.
type member struct {
	bus *replicaBus
	id  int
}

// replicas returns the buses of n replicas that share one bus.
func replicas(n int) []bw.ClusterBus {
	rb := &replicaBus{subs: map[int][]func(bw.ClusterEvent){}}
	buses := make([]bw.ClusterBus, n)
	for i := range buses {
		buses[i] = member{rb, i}
	}
	return buses
}

func (m member) Publish(e bw.ClusterEvent) {
	m.bus.mu.Lock()
	var fns []func(bw.ClusterEvent)
	for id, fs := range m.bus.subs {
		if id != m.id {
			fns = append(fns, fs...)
		}
	}
	m.bus.mu.Unlock()
	for _, fn := range fns {
		fn(e)
	}
}

func (m member) Subscribe(fn func(bw.ClusterEvent)) {
	m.bus.mu.Lock()
	defer m.bus.mu.Unlock()
	m.bus.subs[m.id] = append(m.bus.subs[m.id], fn)
}

// Two replicas that share breaker trips: the second refuses calls to an
// upstream the first found down, without sending one.
func ExampleWithClusterBus() {
	srv := newCounted(always(http.StatusBadGateway))
	defer srv.Close()
	buses := replicas(2)
	a, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithClusterBus(buses[0]),
		bw.WithMaxAttempts(1), bw.WithPolicy(bw.Consecutive(1)))
	b, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithClusterBus(buses[1]),
		bw.WithMaxAttempts(1), bw.WithPolicy(bw.Consecutive(1)))
	fmt.Println("a:", getVia(a, srv.URL))
	fmt.Println("b:", getVia(b, srv.URL))
	fmt.Println(sent(srv.requests()))
	// Output:
	// a: 502
	// b: ErrCircuitOpen
	// 1 request
}
