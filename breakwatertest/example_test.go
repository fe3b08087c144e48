package breakwatertest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

// fetch sends a GET with c and prints what came back.
func fetch(c *http.Client, url string) {
	resp, err := c.Get(url)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %q Retry-After=%q\n", resp.StatusCode, body, resp.Header.Get("Retry-After"))
}

// An upstream that is throttled once, then healthy. In a test, pass the
// test's t instead of nil and leave closing to t.Cleanup.
func ExampleNewUpstream() {
	u := breakwatertest.NewUpstream(nil,
		breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}},
		breakwatertest.Step{Body: []byte("hello")},
	)
	defer u.Close()

	for range 3 {
		fetch(u.Client(), u.URL+"/greeting")
	}
	for _, r := range u.Requests() {
		fmt.Println(r.N, r.Method, r.Path, "on connection", r.ConnID)
	}
	// Output:
	// 429 "Too Many Requests\n" Retry-After="1"
	// 200 "hello" Retry-After=""
	// 200 "hello" Retry-After=""
	// 1 GET /greeting on connection 1
	// 2 GET /greeting on connection 1
	// 3 GET /greeting on connection 1
}

// A script can look at the request; SetFunc moves the upstream into its
// next phase.
func ExampleUpstream_SetFunc() {
	u := breakwatertest.NewUpstreamFunc(nil, func(n int, r *http.Request) breakwatertest.Step {
		return breakwatertest.Step{Body: fmt.Appendf(nil, "healthy, request %d to %s", n, r.URL.Path)}
	})
	defer u.Close()
	fetch(u.Client(), u.URL+"/a")

	// Outage: every request fails.
	u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{Status: http.StatusServiceUnavailable}))
	fetch(u.Client(), u.URL+"/b")

	// Recovery: one more failure, then good answers.
	u.SetFunc(breakwatertest.Sequence(
		breakwatertest.Step{Status: http.StatusBadGateway},
		breakwatertest.Step{Body: []byte("recovered")},
	))
	fetch(u.Client(), u.URL+"/c")
	fetch(u.Client(), u.URL+"/d")
	fmt.Println(u.Count(), "requests")
	// Output:
	// 200 "healthy, request 1 to /a" Retry-After=""
	// 503 "Service Unavailable\n" Retry-After=""
	// 502 "Bad Gateway\n" Retry-After=""
	// 200 "recovered" Retry-After=""
	// 4 requests
}

// The pipe upstream has the same API but lives in memory; it is the one to
// use inside testing/synctest bubbles (see the package documentation).
func ExampleNewPipeUpstream() {
	u := breakwatertest.NewPipeUpstream(nil, breakwatertest.Step{Status: http.StatusCreated})
	defer u.Close()
	fetch(u.Client(), u.URL+"/items")
	fmt.Println(u.URL, u.Requests()[0].Host)
	// Output:
	// 201 "Created\n" Retry-After=""
	// http://upstream.test upstream.test
}

// A fault transport in front of an upstream: the fault applies to every
// request here, so the upstream never sees one.
func ExampleNewFaultTransport() {
	u := breakwatertest.NewUpstream(nil)
	defer u.Close()

	throttled := breakwatertest.NewFaultTransport(u.Transport(), 1, breakwatertest.Fault{
		Probability: 1,
		Status:      http.StatusServiceUnavailable,
		Header:      http.Header{"Retry-After": {"30"}},
	})
	fetch(&http.Client{Transport: throttled}, u.URL)

	errDown := errors.New("upstream unreachable")
	broken := breakwatertest.NewFaultTransport(u.Transport(), 1, breakwatertest.Fault{Probability: 1, Err: errDown})
	_, err := (&http.Client{Transport: broken}).Get(u.URL)
	fmt.Println(errors.Is(err, errDown))

	fmt.Println("injected:", throttled.Injected()+broken.Injected(), "upstream saw:", u.Count())
	// Output:
	// 503 "Service Unavailable\n" Retry-After="30"
	// true
	// injected: 2 upstream saw: 0
}
