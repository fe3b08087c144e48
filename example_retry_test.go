package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// counted is an httptest server that counts the requests it receives and
// answers the nth (from 1) with answer.
type counted struct {
	*httptest.Server
	n atomic.Int32
}

func newCounted(answer func(n int, w http.ResponseWriter, r *http.Request)) *counted {
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(int(c.n.Add(1)), w, r)
	}))
	return c
}

// requests returns how many requests the server has received.
func (c *counted) requests() int { return int(c.n.Load()) }

// sent says "1 request" or "n requests".
func sent(n int) string {
	if n == 1 {
		return "1 request"
	}
	return strconv.Itoa(n) + " requests"
}

// always answers every request with status.
func always(status int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// failFirst answers the first n requests with status and the others 200.
func failFirst(n, status int) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if i <= n {
			w.WriteHeader(status)
		}
	}
}

// sentinels are the errors outcome names, most specific first.
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrHalfOpenBusy", bw.ErrHalfOpenBusy},
	{"ErrCircuitOpen", bw.ErrCircuitOpen},
	{"ErrPaused", bw.ErrPaused},
	{"ErrRateLimited", bw.ErrRateLimited},
	{"ErrConcurrencyLimit", bw.ErrConcurrencyLimit},
	{"ErrRetryBudget", bw.ErrRetryBudget},
	{"ErrAttemptTimeout", bw.ErrAttemptTimeout},
	{"ErrCallTimeout", bw.ErrCallTimeout},
}

// outcome closes resp's body and says what a call returned: its status,
// or the breakwater error it matches.
func outcome(resp *http.Response, err error) string {
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return strconv.Itoa(resp.StatusCode)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "error"
}

// getVia makes one GET through rt and says what it returned.
func getVia(rt http.RoundTripper, url string) string {
	return outcome((&http.Client{Transport: rt}).Get(url))
}

// Five attempts instead of three: a call outlasts four failures.
func ExampleWithMaxAttempts() {
	srv := newCounted(failFirst(4, http.StatusServiceUnavailable))
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
		bw.WithMaxAttempts(5), bw.WithBackoff(bw.Constant(time.Millisecond)))
	fmt.Println(getVia(tr, srv.URL), "after", sent(srv.requests()))
	// Output: 200 after 5 requests
}

// A 404 is not retried by default; a store that is only eventually
// consistent answers 404 for a moment after a write, so retry it there.
func ExampleWithRetryIf() {
	srv := newCounted(failFirst(1, http.StatusNotFound))
	defer srv.Close()
	retryNotFound := func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if err != nil {
			return ctx.Err() == nil, nil
		}
		return resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500, nil
	}
	for _, opts := range [][]bw.Option{nil, {bw.WithRetryIf(retryNotFound)}} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport),
			bw.WithBackoff(bw.Constant(time.Millisecond)))...)
		fmt.Println(getVia(tr, srv.URL), "after", sent(srv.requests()))
	}
	// Output:
	// 404 after 1 request
	// 200 after 2 requests
}

// A POST without an Idempotency-Key that reached the server is sent once;
// an upstream that deduplicates POSTs by other means may have them retried.
func ExampleWithRetryNonIdempotent() {
	srv := newCounted(failFirst(1, http.StatusServiceUnavailable))
	defer srv.Close()
	for _, on := range []bool{false, true} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
			bw.WithRetryNonIdempotent(on), bw.WithBackoff(bw.Constant(time.Millisecond)))
		client := &http.Client{Transport: tr}
		fmt.Println(on, outcome(client.Post(srv.URL, "text/plain", strings.NewReader("order 7"))),
			"after", sent(srv.requests()))
	}
	// Output:
	// false 503 after 1 request
	// true 200 after 2 requests
}

// A body that cannot be replayed (no GetBody: here a plain io.Reader) is
// sent once; buffering bodies of up to 1 KiB lets such a PUT be retried,
// the same bytes each time.
func ExampleWithBodyBuffering() {
	var mu sync.Mutex
	var bodies []string
	srv := newCounted(func(n int, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	defer srv.Close()
	for _, max := range []int64{0, 1 << 10} {
		srv.n.Store(0)
		mu.Lock()
		bodies = nil
		mu.Unlock()
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
			bw.WithBodyBuffering(max), bw.WithBackoff(bw.Constant(time.Millisecond)))
		body := io.MultiReader(strings.NewReader("name=ada"))
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/users/7", body)
		got := outcome((&http.Client{Transport: tr}).Do(req))
		mu.Lock()
		fmt.Println(max, got, "after", sent(srv.requests())+":", bodies)
		mu.Unlock()
	}
	// Output:
	// 0 503 after 1 request: [name=ada]
	// 1024 200 after 2 requests: [name=ada name=ada]
}

// Calls to an upstream that is down: the retry budget stops the retries
// once the key shows an outage, and without it every call retries.
func ExampleWithoutRetryBudget() {
	srv := newCounted(always(http.StatusBadGateway))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithoutRetryBudget()}} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport), bw.WithoutBreaker(),
			bw.WithBackoff(bw.Constant(time.Millisecond)))...)
		for range 10 {
			getVia(tr, srv.URL)
		}
		fmt.Println(srv.requests(), "requests for 10 calls")
	}
	// Output:
	// 13 requests for 10 calls
	// 30 requests for 10 calls
}

// A Retry-After longer than the longest hint honoured ends the call at
// once with the server's answer, instead of waiting it out.
func ExampleWithMaxRetryAfter() {
	srv := newCounted(func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxRetryAfter(time.Second))
	fmt.Println(getVia(tr, srv.URL), "after", sent(srv.requests()))
	// Output: 429 after 1 request
}

// An upstream that hangs on the first request: the attempt timeout cuts
// it, and the retry gets the answer.
func ExampleWithAttemptTimeout() {
	srv := newCounted(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // hang until the client gives up
		}
	})
	defer srv.Close()
	var timeouts atomic.Int32
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
		bw.WithAttemptTimeout(50*time.Millisecond), bw.WithBackoff(bw.Constant(time.Millisecond)),
		bw.WithObserver(bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			if e.Kind == bw.EventRetry && e.Category == bw.Timeout {
				timeouts.Add(1)
			}
		})))
	fmt.Println(getVia(tr, srv.URL), "after", srv.requests(), "requests;", timeouts.Load(), "retry after a timeout")
	// Output: 200 after 2 requests; 1 retry after a timeout
}

// A lock service answers 423 Locked while another writer holds the lock:
// classified as Throttled it is retried, where the default (a client
// error) returns it at once.
func ExampleWithClassifier() {
	srv := newCounted(failFirst(1, http.StatusLocked))
	defer srv.Close()
	locked := func(resp *http.Response, err error) bool {
		return resp != nil && resp.StatusCode == http.StatusLocked
	}
	for _, opts := range [][]bw.Option{nil, {bw.WithClassifier(bw.When(bw.Classify, locked, bw.Throttled))}} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport),
			bw.WithBackoff(bw.Constant(time.Millisecond)))...)
		fmt.Println(getVia(tr, srv.URL), "after", sent(srv.requests()))
	}
	// Output:
	// 423 after 1 request
	// 200 after 2 requests
}

// Answers slower than 5 ms count as failures for the breaker (they are
// still returned): two slow answers in a row open it.
func ExampleWithSlowCallThreshold() {
	srv := newCounted(func(int, http.ResponseWriter, *http.Request) { time.Sleep(10 * time.Millisecond) })
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
		bw.WithSlowCallThreshold(5*time.Millisecond), bw.WithPolicy(bw.Consecutive(2)))
	for range 3 {
		fmt.Println(getVia(tr, srv.URL))
	}
	fmt.Println(srv.requests(), "requests")
	// Output:
	// 200
	// 200
	// ErrCircuitOpen
	// 2 requests
}

// By default a call is charged to the breaker once, however many of its
// attempts failed; charged per attempt, one call of three failing attempts
// opens a breaker of three consecutive failures.
func ExampleWithChargePerAttempt() {
	srv := newCounted(always(http.StatusBadGateway))
	defer srv.Close()
	for _, on := range []bool{false, true} {
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithChargePerAttempt(on),
			bw.WithPolicy(bw.Consecutive(3)), bw.WithBackoff(bw.Constant(time.Millisecond)))
		fmt.Println(on, getVia(tr, srv.URL), "then", getVia(tr, srv.URL))
	}
	// Output:
	// false 502 then 502
	// true 502 then ErrCircuitOpen
}
