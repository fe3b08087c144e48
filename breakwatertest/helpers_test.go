package breakwatertest_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

// result is what a client got for one request.
type result struct {
	status int
	header http.Header
	body   string
	err    error // from the round trip or from reading the body
}

// do sends a request on rt and reads the whole response.
func do(ctx context.Context, rt http.RoundTripper, method, url string, body io.Reader) result {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return result{err: err}
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// get sends a GET on rt and fails the test on any error.
func get(t testing.TB, rt http.RoundTripper, url string) result {
	t.Helper()
	r := do(context.Background(), rt, http.MethodGet, url, nil)
	if r.err != nil {
		t.Fatalf("GET %s: %v", url, r.err)
	}
	return r
}

// arrivals wraps a script so that each request the upstream scripts is
// announced on the returned channel (buffered for n requests).
func arrivals(n int, fn func(int, *http.Request) breakwatertest.Step) (func(int, *http.Request) breakwatertest.Step, <-chan int) {
	ch := make(chan int, n)
	return func(k int, r *http.Request) breakwatertest.Step {
		s := fn(k, r)
		ch <- k
		return s
	}, ch
}
