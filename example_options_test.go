package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// answering is a base transport that answers every request with status.
func answering(status int) bw.RoundTripperFunc {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
	}
}

// show makes one call through rt and prints its status or its error.
func show(rt http.RoundTripper, url string, header ...string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rt.RoundTrip(req)
	var e *bw.Error
	switch {
	case errors.As(err, &e):
		fmt.Printf("refused by the %s of %q\n", e.Mechanism, e.Key)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
}

// explained prints the lines of tr's Explain that start with one of labels.
func explained(tr *bw.Transport, labels ...string) {
	for line := range strings.Lines(tr.Explain()) {
		for _, l := range labels {
			if strings.HasPrefix(strings.TrimSpace(line), l) {
				fmt.Println(strings.Join(strings.Fields(line), " "))
			}
		}
	}
}

// A breaker that opens on the third failing call in a row.
func ExampleWithPolicy() {
	tr, _ := bw.NewTransport(bw.WithBase(answering(500)), bw.WithMaxAttempts(1),
		bw.WithPolicy(bw.Consecutive(3)))
	for range 4 {
		show(tr, "https://api.example/")
	}
	// Output:
	// 500
	// 500
	// 500
	// refused by the breaker of "api.example"
}

// Two transports that share one registry of breakers: a trip (or an
// opening) of one refuses the calls of both. Configuring the breakers of a
// transport that shares them is a construction error.
func ExampleWithBreakers() {
	bs, _ := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(5)))
	a, _ := bw.NewTransport(bw.WithBase(answering(200)), bw.WithBreakers(bs))
	b, _ := bw.NewTransport(bw.WithBase(answering(200)), bw.WithBreakers(bs))
	bs.Get("api.example").Trip(time.Minute)
	show(a, "https://api.example/")
	show(b, "https://api.example/")
	show(b, "https://other.example/")

	_, err := bw.NewTransport(bw.WithBreakers(bs), bw.WithOpenTimeout(time.Second, time.Minute))
	fmt.Println(err)
	// Output:
	// refused by the breaker of "api.example"
	// refused by the breaker of "api.example"
	// 200
	// breakwater: the breaker is configured (WithOpenTimeout) and shared (WithBreakers): give one of them
}

// A breaker in shadow mode counts and reports what it would refuse, and
// refuses nothing: a way to try a policy on production traffic.
func ExampleWithShadowMode() {
	tr, _ := bw.NewTransport(bw.WithBase(answering(500)), bw.WithMaxAttempts(1),
		bw.WithPolicy(bw.Consecutive(2)), bw.WithShadowMode(true))
	for range 3 {
		show(tr, "https://api.example/")
	}
	b, _ := tr.Breakers().Lookup("api.example")
	fmt.Println(b.State())
	// Output:
	// 500
	// 500
	// 500
	// open
}

// A breaker per tenant instead of per host: one tenant's failing calls
// open its own breaker, not the others'.
func ExampleWithKeyFunc() {
	base := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		status := 200
		if r.Header.Get("X-Tenant") == "acme" {
			status = 500
		}
		return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
	})
	tr, _ := bw.NewTransport(bw.WithBase(base), bw.WithMaxAttempts(1),
		bw.WithPolicy(bw.Consecutive(2)), bw.WithKeyFunc(bw.HeaderKey("X-Tenant")))
	for range 3 {
		show(tr, "https://api.example/", "X-Tenant", "acme")
	}
	show(tr, "https://api.example/", "X-Tenant", "globex")
	// Output:
	// 500
	// 500
	// refused by the breaker of "acme"
	// 200
}

// An observer sees every call, attempt and retry.
func ExampleWithObserver() {
	var attempts, retries atomic.Int32
	obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
		switch e.Kind {
		case bw.EventAttempt:
			attempts.Add(1)
		case bw.EventRetry:
			retries.Add(1)
		case bw.EventCallEnd:
			fmt.Println("call ended:", e.Category, "after", attempts.Load(), "attempts,", retries.Load(), "retries")
		}
	})
	tr, _ := bw.NewTransport(bw.WithBase(answering(503)), bw.WithObserver(obs),
		bw.WithBackoff(bw.Constant(time.Millisecond)))
	show(tr, "https://api.example/")
	// Output:
	// call ended: server_error after 3 attempts, 2 retries
	// 503
}

// A call timeout bounds the whole call, retries and waits included; the
// error matches context.DeadlineExceeded as well as ErrCallTimeout.
func ExampleWithCallTimeout() {
	hang := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	tr, _ := bw.NewTransport(bw.WithBase(hang), bw.WithCallTimeout(50*time.Millisecond))
	_, err := tr.RoundTrip(must(http.NewRequest(http.MethodGet, "https://api.example/", nil)))
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, bw.ErrCallTimeout))
	explained(tr, "call timeout", "attempt timeout")
	// Output:
	// true true
	// call timeout 50ms
	// attempt timeout 50ms
}

// A constant wait between attempts, and the plan Explain draws from it.
func ExampleWithBackoff() {
	tr, _ := bw.NewTransport(bw.WithBackoff(bw.Constant(250*time.Millisecond)), bw.WithMaxAttempts(4))
	explained(tr, "attempts", "delays")
	// Output:
	// attempts up to 4
	// delays 250ms, 250ms, 250ms, never shorter than a Retry-After; a 502's first retry at once
}

// A retry budget of 10 % of calls plus one retry per second per key, over
// 30 s; WithoutRetryBudget removes it.
func ExampleWithRetryBudget() {
	tr, _ := bw.NewTransport(bw.WithRetryBudget(0.1, 1, 30*time.Second))
	explained(tr, "retry budget")
	tr, _ = bw.NewTransport(bw.WithoutRetryBudget())
	explained(tr, "retry budget")
	// Output:
	// retry budget 10% of calls + 1/s per key over 30s; a retry that succeeds is given back
	// retry budget none
}

// At most one attempt in flight per key; another call waits for the slot,
// here refused at once since it may not wait.
func ExampleWithConcurrencyLimit() {
	inside, release := make(chan struct{}), make(chan struct{})
	base := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/slow" {
			close(inside)
			<-release
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	tr, _ := bw.NewTransport(bw.WithBase(base), bw.WithConcurrencyLimit(1, bw.WithMaxWait(0)))
	done := make(chan struct{})
	go func() { show(tr, "https://api.example/slow"); close(done) }()
	<-inside
	show(tr, "https://api.example/")
	close(release)
	<-done
	show(tr, "https://api.example/")
	// Output:
	// refused by the concurrency of "api.example"
	// 200
	// 200
}

// Two transports that share a pause gate: a pause one of them learns (a
// 429's Retry-After, or one set by hand) holds the calls of both.
func ExampleWithPauseGates() {
	gates, _ := bw.NewPauseGates()
	a, _ := bw.NewTransport(bw.WithBase(answering(200)), bw.WithPauseGates(gates))
	b, _ := bw.NewTransport(bw.WithBase(answering(200)), bw.WithPauseGates(gates))
	gates.Pause("api.example", time.Minute)
	show(a, "https://api.example/")
	show(b, "https://api.example/")
	gates.Resume("api.example")
	show(b, "https://api.example/")
	// Output:
	// refused by the pause of "api.example"
	// refused by the pause of "api.example"
	// 200
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A breaker per tenant, for at most two tenants: a third tenant's breaker
// takes the place of one that costs nothing to lose (closed, idle).
func ExampleWithKeyLimits() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithKeyLimits(2, time.Minute)}} {
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport),
			bw.WithKeyFunc(bw.HeaderKey("X-Tenant")))...)
		for _, tenant := range []string{"acme", "globex", "initech"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("X-Tenant", tenant)
			outcome(tr.RoundTrip(req))
		}
		fmt.Println(len(tr.Breakers().Snapshot().Breakers), "breakers")
	}
	// Output:
	// 3 breakers
	// 2 breakers
}
