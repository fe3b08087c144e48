package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A service that calls another breakwater service tells it how long each
// attempt has left and which attempt it is; the service reads them from
// its trusted callers only.
func ExampleCallerHeaders() {
	trust, err := bw.CallerHeaders("127.0.0.1", "10.0.0.0/8") // the fleet's addresses
	if err != nil {
		panic(err)
	}
	var failures atomic.Int32
	failures.Store(1)
	srv := httptest.NewServer(trust(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, most := bw.CallerAttempt(r.Context())
		dl, _ := r.Context().Deadline()
		fmt.Printf("attempt %d of %d, at most %s left\n", n, most, time.Until(dl).Round(time.Second))
		if failures.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})))
	defer srv.Close()

	tr, err := bw.NewTransport(bw.WithPropagation(true), bw.WithAttemptTimeout(2*time.Second))
	if err != nil {
		panic(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// attempt 1 of 3, at most 2s left
	// attempt 2 of 3, at most 2s left
	// 200
}

// A call made while serving a breakwater caller's first attempt retries
// once; when it fails, the 5xx the handler answers tells the caller not to
// retry: B sees two requests, not nine.
func ExampleWithPropagation() {
	var toB atomic.Int32
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toB.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer b.Close()
	trB, err := bw.NewTransport(bw.WithPropagation(true), bw.WithBackoff(bw.Constant(time.Millisecond)))
	if err != nil {
		panic(err)
	}
	trust, err := bw.CallerHeaders("127.0.0.1")
	if err != nil {
		panic(err)
	}
	a := httptest.NewServer(trust(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, b.URL, nil)
		resp, err := trB.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return // 200
			}
		}
		w.WriteHeader(http.StatusBadGateway)
	})))
	defer a.Close()

	trA, err := bw.NewTransport(bw.WithPropagation(true), bw.WithBackoff(bw.Constant(time.Millisecond)))
	if err != nil {
		panic(err)
	}
	resp, err := (&http.Client{Transport: trA}).Get(a.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Breakwater-Pushback"), "after", toB.Load(), "requests to B")
	// Output:
	// 502 none after 2 requests to B
}

// A queue that has stood for its interval lets a request wait only its
// target: under overload, delay stays bounded and the rest is shed at
// once, while a Critical request keeps its place ahead of the others.
func ExampleWithQueueTarget() {
	slots, err := bw.NewBulkheads(1, bw.WithQueueTarget(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		panic(err)
	}
	held, _ := slots.Acquire(context.Background(), "") // the one slot, held for 200 ms
	time.AfterFunc(200*time.Millisecond, held.Release)
	queued := make(chan error, 1)
	go func() { // queues at once: waits as WithMaxWait lets it
		s, err := slots.Acquire(context.Background(), "")
		s.Release()
		queued <- err
	}()
	time.Sleep(100 * time.Millisecond) // the queue has stood for its interval
	start := time.Now()
	_, err = slots.Acquire(context.Background(), "")
	fmt.Println("default:", errors.Is(err, bw.ErrConcurrencyLimit), time.Since(start) < 50*time.Millisecond)
	critical := bw.ContextWithCriticality(context.Background(), bw.Critical)
	go func() {
		s, err := slots.Acquire(critical, "")
		s.Release()
		queued <- err
	}()
	fmt.Println("waited:", <-queued == nil, <-queued == nil)
	// Output:
	// default: true true
	// waited: true true
}

// A request's criticality orders the queue it waits in: with one slot
// taken, a critical request that arrives last is served first.
func ExampleContextWithCriticality() {
	slots, err := bw.NewBulkheads(1, bw.WithMaxWait(10*time.Second))
	if err != nil {
		panic(err)
	}
	held, _ := slots.Acquire(context.Background(), "")
	order := make(chan string, 2)
	queue := func(name string, ctx context.Context) {
		s, err := slots.Acquire(ctx, "")
		if err == nil {
			order <- name
			s.Release()
		}
	}
	queued := func(n int) { // wait until n requests wait for the slot
		for slots.Snapshot().Bulkheads[0].Queued < n {
			time.Sleep(time.Millisecond)
		}
	}
	go queue("default", context.Background())
	queued(1) // the default request queues first
	go queue("critical", bw.ContextWithCriticality(context.Background(), bw.Critical))
	queued(2)
	held.Release()
	fmt.Println(<-order, <-order)
	// Output:
	// critical default
}
