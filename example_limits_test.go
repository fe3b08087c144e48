package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Per-client token buckets that never wait, with the numbers an inbound
// rate limit puts in its RateLimit and Retry-After fields.
func ExampleNewRateLimiters() {
	// 2 requests per second per client, in bursts of up to 2.
	limiters, err := bw.NewRateLimiters(2, 2, bw.WithMaxWait(0))
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		st := limiters.Take("client-a")
		fmt.Printf("request %d: limited=%v remaining=%d retry-after=%s\n",
			i+1, st.Limited, st.Remaining, st.RetryAfter.Round(100*time.Millisecond))
	}
	fmt.Println("client-b limited:", limiters.Take("client-b").Limited)
	// Output:
	// request 1: limited=false remaining=1 retry-after=0s
	// request 2: limited=false remaining=0 retry-after=500ms
	// request 3: limited=true remaining=0 retry-after=500ms
	// client-b limited: false
}

// A wait that cannot fit the caller's deadline fails at once, quoting the
// wait it would have needed.
func ExampleRateLimiters_Wait() {
	lim, _ := bw.NewRateLimiters(1, 1) // one request per second per key
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	fmt.Println(lim.Wait(ctx, "api"))
	err := lim.Wait(ctx, "api")
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrRateLimited), d.Round(time.Second))
	}
	// Output:
	// <nil>
	// true 1s
}

// A throttled answer pauses its key; calls that cannot outlast the pause
// fail at once instead of collecting more 429s.
func ExamplePauseGates() {
	gates, _ := bw.NewPauseGates(bw.WithMaxRetryAfter(time.Minute))
	// A 429 asking for two minutes: the pause is clamped to one.
	gates.Observe("api.example.com", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: 2 * time.Minute, HasRetryAfter: true}, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := gates.Wait(ctx, "api.example.com")
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrPaused), d.Round(time.Second))
	}
	fmt.Println(gates.Wait(ctx, "other.example.com"))
	gates.Resume("api.example.com")
	fmt.Println(gates.Wait(ctx, "api.example.com"))
	// Output:
	// true 1m0s
	// <nil>
	// <nil>
}

// A bulkhead of two slots per key, refusing at once when both are taken
// (by default a request waits up to 5 s for a slot).
func ExampleBulkheads() {
	bh, _ := bw.NewBulkheads(2, bw.WithMaxWait(0))
	ctx := context.Background()
	first, _ := bh.Acquire(ctx, "db")
	second, _ := bh.Acquire(ctx, "db")
	_, err := bh.Acquire(ctx, "db")
	var e *bw.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bw.ErrConcurrencyLimit), e.Mechanism)
	}
	first.Release()
	third, err := bh.Acquire(ctx, "db")
	fmt.Println(err, bh.Snapshot().Bulkheads[0].InFlight)
	second.Release()
	third.Release()
	// Output:
	// true concurrency
	// <nil> 2
}

// Bulkheads used on their own as load-shedding middleware: one request at
// a time, the rest answered 503 with Retry-After.
func ExampleBulkheads_loadShedding() {
	bh, _ := bw.NewBulkheads(1, bw.WithMaxWait(0))
	shed := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slot, err := bh.Acquire(r.Context(), "")
			if err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
			defer slot.Release()
			next.ServeHTTP(w, r)
		})
	}
	var inner *httptest.ResponseRecorder
	h := shed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While this request holds the only slot, another one is shed.
		inner = httptest.NewRecorder()
		shed(http.NotFoundHandler()).ServeHTTP(inner, r)
		fmt.Fprintln(w, "done")
	}))
	outer := httptest.NewRecorder()
	h.ServeHTTP(outer, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(outer.Code, inner.Code, inner.Header().Get("Retry-After"))
	// Output:
	// 200 503 1
}

// A Transport whose attempts to each host are limited to one per second,
// refused at once when no token is left.
func ExampleWithRateLimit() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr, err := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimit(1, 1, bw.WithMaxWait(0)))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(errors.Is(err, bw.ErrRateLimited))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// true
}

// The pause gate is on by default: after a 429 with Retry-After, calls to
// that host whose deadline is too short to wait fail at once.
func ExampleWithMaxWait() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1))
	client := &http.Client{Transport: tr}

	resp, _ := client.Get(srv.URL)
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := client.Do(req)
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(d.Round(time.Second))
	}
	// Output:
	// 429
	// 30s
}
