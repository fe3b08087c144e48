package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// flaky answers 503 to the first n requests and 200 after that.
func flaky(n int32) (*httptest.Server, *atomic.Int32) {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if seen.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	return srv, &seen
}

// The default Transport under an http.Client retries a flaky upstream.
func ExampleNewTransport() {
	srv, seen := flaky(2)
	defer srv.Close()

	tr, err := bw.NewTransport(bw.WithBackoff(bw.Constant(time.Millisecond)))
	if err != nil {
		panic(err)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "after", seen.Load(), "requests")
	// Output: 200 ok after 3 requests
}

// A POST is retried only when it carries an idempotency key (or provably
// never reached the server); its body is replayed byte for byte.
func ExampleNewTransport_idempotencyKey() {
	srv, seen := flaky(1)
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBackoff(bw.Constant(time.Millisecond)))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	resp, _ := client.Post(srv.URL, "text/plain", strings.NewReader("charge 42"))
	resp.Body.Close()
	fmt.Println("without a key:", resp.StatusCode, "after", seen.Load(), "request")

	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("charge 42"))
	req.Header.Set("Idempotency-Key", "charge-42")
	seen.Store(0)
	resp, _ = client.Do(req)
	resp.Body.Close()
	fmt.Println("with a key:", resp.StatusCode, "after", seen.Load(), "requests")
	// Output:
	// without a key: 503 after 1 request
	// with a key: 200 after 2 requests
}

// WithRequestPolicy changes the settings for one request: here, no retry.
func ExampleWithRequestPolicy() {
	srv, seen := flaky(1)
	defer srv.Close()
	tr, _ := bw.NewTransport()
	defer tr.CloseIdleConnections()

	ctx := bw.WithRequestPolicy(context.Background(), bw.RequestPolicy{MaxAttempts: 1})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, _ := (&http.Client{Transport: tr}).Do(req)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "request")
	// Output: 503 after 1 request
}

// Chain composes stages in any order; the first listed is outermost.
func ExampleChain() {
	srv, seen := flaky(1)
	defer srv.Close()
	breakers, _ := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(3)))
	retry, err := bw.RetryStage(bw.WithBackoff(bw.Constant(time.Millisecond)))
	if err != nil {
		panic(err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	rt := bw.Chain(base,
		bw.CallTimeout(5*time.Second),
		retry,
		bw.BreakerStage(breakers, nil, nil),
		bw.AttemptTimeout(time.Second),
	)
	resp, _ := (&http.Client{Transport: rt}).Get(srv.URL)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests; breaker", breakers.Get(bw.HostKey(resp.Request)).State())
	// Output: 200 after 2 requests; breaker closed
}

// A server turns a downstream rejection into its own 503 with Retry-After.
func ExampleRetryAfter() {
	tr, _ := bw.NewTransport()
	tr.Breakers().Get("payments.internal").Trip(30 * time.Second)
	upstream := &http.Client{Transport: tr}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := upstream.Get("https://payments.internal/v1/balance")
		if d, ok := bw.RetryAfter(err); ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			http.Error(w, "payments unavailable", http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
	})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/balance", nil))
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	// Output: 503 30
}

// Errors tell the breaker's rejection apart from the upstream's failure.
func ExampleError() {
	tr, _ := bw.NewTransport()
	tr.Breakers().Get("ledger.internal").Trip(time.Minute)
	_, err := (&http.Client{Transport: tr}).Get("https://ledger.internal/")
	var e *bw.Error
	fmt.Println(errors.Is(err, bw.ErrCircuitOpen), errors.As(err, &e) && e.Key == "ledger.internal", e.Mechanism)
	// Output: true true breaker
}

// The base makes the requests: here one that names the client to the
// upstream, beneath breakwater's retries.
func ExampleWithBase() {
	var agents []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		agents = append(agents, r.Header.Get("User-Agent"))
		if len(agents) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	named := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("User-Agent", "inventory/1.2")
		return srv.Client().Transport.RoundTrip(r)
	})
	tr, _ := bw.NewTransport(bw.WithBase(named), bw.WithBackoff(bw.Constant(time.Millisecond)))
	resp, _ := (&http.Client{Transport: tr}).Get(srv.URL)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(resp.StatusCode, agents)
	// Output: 200 [inventory/1.2 inventory/1.2]
}
