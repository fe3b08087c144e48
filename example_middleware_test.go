package breakwater_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

// A handler that runs out of time answers 503 with a problem document,
// unless it already started its response.
func ExampleHandlerTimeout() {
	timeout, err := bw.HandlerTimeout(20 * time.Millisecond)
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.Use(timeout)
	r.Get("/report", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the deadline passed: give up, write nothing
		case <-time.After(time.Minute):
			io.WriteString(w, "report\n")
		}
	})

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/report", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body)
	// Output:
	// 503 application/problem+json
	// {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"The server did not finish handling the request in time."}
}

// A route whose handler keeps failing is answered 503 without calling the
// handler until its breaker's open time is over.
func ExampleRouteBreaker() {
	breakers, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(2)), bw.WithOpenTimeout(5*time.Second, time.Minute), bw.WithOpenJitter(0))
	if err != nil {
		panic(err)
	}
	rb, err := bw.RouteBreaker(breakers)
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.Use(rb)
	r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database unavailable", http.StatusInternalServerError)
	})

	for _, path := range []string{"/orders/1", "/orders/2", "/orders/3"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Printf("%s %d Retry-After=%q\n", path, rec.Code, rec.Header().Get("Retry-After"))
	}
	fmt.Println(breakers.Get("/orders/{id}").State())
	// Output:
	// /orders/1 500 Retry-After=""
	// /orders/2 500 Retry-After=""
	// /orders/3 503 Retry-After="5"
	// open
}

// Rejections can be answered in the application's own format.
func ExampleWithDenyHandler() {
	deny := func(w http.ResponseWriter, r *http.Request, rej bw.Rejection) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rej.Status)
		fmt.Fprintf(w, `{"error":%q}`+"\n", rej.Mechanism)
	}
	timeout, _ := bw.HandlerTimeout(time.Millisecond, bw.WithDenyHandler(deny))
	h := timeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Print(rec.Code, " ", rec.Body)
	// Output:
	// 503 {"error":"timeout"}
}

// Behind a load balancer, the client's address comes from X-Forwarded-For,
// but only on connections from the balancer itself.
func ExampleForwardedForKey() {
	key, err := bw.ForwardedForKey("X-Forwarded-For", "10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	viaProxy := httptest.NewRequest(http.MethodGet, "/", nil)
	viaProxy.RemoteAddr = "10.0.0.5:31000"
	viaProxy.Header.Set("X-Forwarded-For", "203.0.113.50, 198.51.100.7")

	direct := httptest.NewRequest(http.MethodGet, "/", nil)
	direct.RemoteAddr = "192.0.2.44:5000"
	direct.Header.Set("X-Forwarded-For", "198.51.100.7") // spoofed

	ipv6 := httptest.NewRequest(http.MethodGet, "/", nil)
	ipv6.RemoteAddr = "[2001:db8:aa:bb:1:2:3:4]:443"

	fmt.Println(key(viaProxy))
	fmt.Println(key(direct))
	fmt.Println(key(ipv6))
	// Output:
	// 198.51.100.7
	// 192.0.2.44
	// 2001:db8:aa:bb::/64
}

// At most one request runs at a time here; the next one is shed at once
// with 503 and a Retry-After instead of piling up (by default it would
// wait up to 5 s for the slot; WithMaxQueue bounds how many may wait).
func ExampleShedder() {
	bulkhead, err := bw.NewBulkheads(1, bw.WithMaxWait(0))
	if err != nil {
		panic(err)
	}
	shedder, err := bw.Shedder(bulkhead, bw.WithShedRetryAfter(time.Second, time.Second))
	if err != nil {
		panic(err)
	}
	inHandler, release := make(chan struct{}), make(chan struct{})
	r := chi.NewRouter()
	r.Use(shedder)
	r.Get("/export", func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		io.WriteString(w, "export\n")
	})

	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		r.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/export", nil))
		close(done)
	}()
	<-inHandler

	second := httptest.NewRecorder()
	r.ServeHTTP(second, httptest.NewRequest(http.MethodGet, "/export", nil))
	fmt.Println("second:", second.Code, "Retry-After", second.Header().Get("Retry-After"))

	close(release)
	<-done
	fmt.Println("first:", first.Code)
	// Output:
	// second: 503 Retry-After 1
	// first: 200
}

// Each client address gets a token bucket of 2 requests, refilled at one per
// second; every response says where the client stands.
func ExampleClientRateLimit() {
	buckets, err := bw.NewRateLimiters(1, 2, bw.WithKeyLimits(100_000, 10*time.Minute))
	if err != nil {
		panic(err)
	}
	limit, err := bw.ClientRateLimit(buckets, bw.RemoteAddrKey)
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.Use(limit)
	r.Get("/search", func(w http.ResponseWriter, r *http.Request) {})

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/search", nil)
		req.RemoteAddr = "198.51.100.7:52100"
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit-Policy: %s RateLimit: %s Retry-After: %q\n", rec.Code,
			rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy: "default";q=2;w=2 RateLimit: "default";r=1;t=1 Retry-After: ""
	// 200 RateLimit-Policy: "default";q=2;w=2 RateLimit: "default";r=0;t=1 Retry-After: ""
	// 429 RateLimit-Policy: "default";q=2;w=2 RateLimit: "default";r=0;t=1 Retry-After: "1"
}

// Health checks pass a rate limit of one request per client untouched,
// and leave the client's token for its real request.
func ExampleWithExempt() {
	buckets, _ := bw.NewRateLimiters(1, 1)
	limit, err := bw.ClientRateLimit(buckets, bw.RemoteAddrKey,
		bw.WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, path := range []string{"/healthz", "/healthz", "/search", "/search"} {
		rec := serve(h, http.MethodGet, path)
		fmt.Printf("%s %d RateLimit: %q\n", path, rec.Code, rec.Header().Get("RateLimit"))
	}
	// Output:
	// /healthz 200 RateLimit: ""
	// /healthz 200 RateLimit: ""
	// /search 200 RateLimit: "\"default\";r=0;t=1"
	// /search 429 RateLimit: "\"default\";r=0;t=1"
}

// The limit's name in the RateLimit fields, where clients and logs see it.
func ExampleWithRateLimitPolicyName() {
	buckets, _ := bw.NewRateLimiters(10, 10)
	limit, _ := bw.ClientRateLimit(buckets, bw.RemoteAddrKey, bw.WithRateLimitPolicyName("search"))
	rec := serve(limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), http.MethodGet, "/search")
	fmt.Println(rec.Header().Get("RateLimit-Policy"))
	fmt.Println(rec.Header().Get("RateLimit"))
	// Output:
	// "search";q=10;w=1
	// "search";r=9;t=1
}

// The older X-RateLimit-* fields beside the standard ones, for clients
// that read only those.
func ExampleWithXRateLimitHeaders() {
	buckets, _ := bw.NewRateLimiters(1, 5)
	limit, _ := bw.ClientRateLimit(buckets, bw.RemoteAddrKey, bw.WithXRateLimitHeaders(true))
	rec := serve(limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), http.MethodGet, "/search")
	fmt.Println(rec.Header().Get("X-RateLimit-Limit"), rec.Header().Get("X-RateLimit-Remaining"),
		rec.Header().Get("X-RateLimit-Reset") != "")
	// Output: 5 4 true
}

// Shed requests are told to come back in 5 to 10 s, spread so that they
// do not all come back at once.
func ExampleWithShedRetryAfter() {
	bulkhead, _ := bw.NewBulkheads(1, bw.WithMaxWait(0))
	shedder, _ := bw.Shedder(bulkhead, bw.WithShedRetryAfter(5*time.Second, 10*time.Second))
	var inner *httptest.ResponseRecorder
	var h http.Handler
	h = shedder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inner == nil { // while this request holds the only slot, another is shed
			inner = serve(h, http.MethodGet, "/export")
		}
	}))
	serve(h, http.MethodGet, "/export")
	after, _ := strconv.Atoi(inner.Header().Get("Retry-After"))
	fmt.Println(inner.Code, after >= 5 && after <= 10)
	// Output: 503 true
}

// A handler that mostly waits on an upstream answers 504 Gateway Timeout
// when it runs out of time, instead of the default 503.
func ExampleWithTimeoutStatus() {
	timeout, _ := bw.HandlerTimeout(time.Millisecond, bw.WithTimeoutStatus(http.StatusGatewayTimeout))
	h := timeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the upstream call gives up at the deadline
	}))
	fmt.Println(serve(h, http.MethodGet, "/quote").Code)
	// Output: 504
}
