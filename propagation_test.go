package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Each attempt of a propagating Transport carries the time it has left and
// its number; the caller's request is left as it was; without the option
// nothing is sent.
func TestPropagationHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		n := len(got)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	for _, on := range []bool{true, false} {
		got = nil
		tr := newTransport(t, srv.Client().Transport, bw.WithPropagation(on), bw.WithAttemptTimeout(300*time.Millisecond))
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Mine", "1")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.Header) != 1 {
			t.Errorf("the caller's request was changed: %v", req.Header)
		}
		if len(got) != 2 {
			t.Fatalf("%d requests, want 2", len(got))
		}
		for i, h := range got {
			if h.Get("X-Mine") != "1" {
				t.Errorf("attempt %d lost the caller's header", i+1)
			}
			a, ms := h.Get("Breakwater-Attempt"), h.Get("Breakwater-Timeout-Ms")
			if !on {
				if a != "" || ms != "" {
					t.Errorf("propagation off: attempt %d sent %q and %q", i+1, a, ms)
				}
				continue
			}
			if want := strconv.Itoa(i+1) + ";max=3"; a != want {
				t.Errorf("attempt %d: Breakwater-Attempt %q, want %q", i+1, a, want)
			}
			if n, err := strconv.Atoi(ms); err != nil || n <= 200 || n > 300 {
				t.Errorf("attempt %d: Breakwater-Timeout-Ms %q, want (200, 300]", i+1, ms)
			}
		}
	}
}

// seen is what a handler saw of a request.
type seen struct {
	left        time.Duration // until the context's deadline; -1: none
	attempt, of int
	cause       error
}

// A server reads the deadline and the attempt from a trusted caller only,
// and ignores what does not parse.
func TestCallerHeaders(t *testing.T) {
	seenBy := func(t *testing.T, trusted string, header map[string]string) seen {
		mw, err := bw.CallerHeaders(trusted)
		if err != nil {
			t.Fatal(err)
		}
		var s seen
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s = seen{left: -1}
			if dl, ok := r.Context().Deadline(); ok {
				s.left = time.Until(dl)
				<-r.Context().Done()
				s.cause = context.Cause(r.Context())
			}
			s.attempt, s.of = bw.CallerAttempt(r.Context())
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "127.0.0.1:4000"
		for k, v := range header {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		return s
	}
	good := map[string]string{"Breakwater-Timeout-Ms": "250", "Breakwater-Attempt": "2;max=3"}
	synctest.Test(t, func(t *testing.T) {
		if s := seenBy(t, "127.0.0.0/8", good); s.left != 250*time.Millisecond || s.attempt != 2 || s.of != 3 || !errors.Is(s.cause, bw.ErrCallerDeadline) {
			t.Errorf("trusted caller: %+v, want 250ms left, attempt 2 of 3, cause ErrCallerDeadline", s)
		}
		if s := seenBy(t, "10.0.0.0/8", good); s.left != -1 || s.attempt != 0 {
			t.Errorf("untrusted peer: %+v, want no deadline and no attempt", s)
		}
		for _, bad := range []map[string]string{
			{"Breakwater-Timeout-Ms": "-5", "Breakwater-Attempt": "0;max=3"},
			{"Breakwater-Timeout-Ms": "1e3", "Breakwater-Attempt": "3;max=2"},
			{"Breakwater-Timeout-Ms": "90000000000", "Breakwater-Attempt": "2"},
			{"Breakwater-Timeout-Ms": " 250", "Breakwater-Attempt": "x;max=3"},
		} {
			if s := seenBy(t, "127.0.0.1", bad); s.left != -1 || s.attempt != 0 {
				t.Errorf("malformed %v: %+v, want them ignored", bad, s)
			}
		}
	})
	if _, err := bw.CallerHeaders(); err == nil {
		t.Error("CallerHeaders with no trusted peer: no error")
	}
	if _, err := bw.CallerHeaders("10.0.0.0/33"); err == nil {
		t.Error("CallerHeaders with a malformed prefix: no error")
	}
}

// A Shedder behind CallerHeaders refuses at once a request its queue would
// hold past its caller's deadline, and serves one that fits.
func TestShedderRefusesWhatCannotMeetItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, _ := newShedder(t, 1)
		ch, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		h := ch(sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(100 * time.Millisecond)
		})))
		call := func(ms string) (int, time.Duration) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = "127.0.0.1:4000"
			req.Header.Set("Breakwater-Timeout-Ms", ms)
			start := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code, time.Since(start)
		}
		// A queue of one moves every 100 ms: keep five requests in it for
		// a while, so that it learns its pace.
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				for range 6 {
					call("10000")
				}
			})
		}
		time.Sleep(time.Second)
		code, took := call("250") // about 5 ahead of it: 600 ms to be done
		if code != http.StatusServiceUnavailable || took != 0 {
			t.Errorf("a request that cannot be served in 250 ms: %d after %s, want 503 at once", code, took)
		}
		wg.Wait()
		code, took = call("250") // the queue is empty
		if code != http.StatusOK || took != 100*time.Millisecond {
			t.Errorf("a request with time enough: %d after %s, want 200 after 100ms", code, took)
		}
	})
}

// A shedding replica tells a breakwater caller to go elsewhere: with
// failover the retry goes at once to another endpoint, without waiting out
// the Retry-After; without, the answer is returned unretried.
func TestPushbackElsewhere(t *testing.T) {
	sh, bh := newShedder(t, 1, bw.WithMaxWait(0))
	trust, err := bw.CallerHeaders("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var tried atomic.Int32 // requests to the full replica
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tried.Add(1)
		trust(sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))).ServeHTTP(w, r)
	}))
	defer full.Close()
	slot, err := bh.Acquire(context.Background(), "") // the replica's one slot, taken
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	var other int
	free := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { other++ }))
	defer free.Close()

	tr := newTransport(t, http.DefaultTransport, bw.WithPropagation(true), bw.WithFailover(bw.Failover{Endpoints: []string{full.URL, free.URL}}))
	start := time.Now()
	resp, err := tr.RoundTrip(newGet(t, full.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || tried.Load() != 1 || other != 1 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("failover: %d after %s with %d and %d requests to the full and the free endpoint, want 200 at once after one each", resp.StatusCode, time.Since(start), tried.Load(), other)
	}

	var report bw.CallReport
	tr = newTransport(t, http.DefaultTransport, bw.WithPropagation(true))
	req := newGet(t, full.URL)
	req = req.WithContext(bw.WithCallReport(req.Context(), &report))
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Breakwater-Pushback") != "elsewhere" || report.NotRetried != bw.ReasonPushback {
		t.Errorf("one endpoint: %d, pushback %q, not retried for %q; want 503, elsewhere, %q", resp.StatusCode, resp.Header.Get("Breakwater-Pushback"), report.NotRetried, bw.ReasonPushback)
	}
}

// A client over its limit has its retries refused before its first
// attempts: a retry must leave half the burst.
func TestClientRateLimitShedsRetriesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buckets, err := bw.NewRateLimiters(1, 4)
		if err != nil {
			t.Fatal(err)
		}
		limit, err := bw.ClientRateLimit(buckets, bw.RemoteAddrKey)
		if err != nil {
			t.Fatal(err)
		}
		trust, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		h := trust(limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		code := func(attempt string) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, fleetRequest("Breakwater-Attempt", attempt))
			return rec.Code
		}
		var got []int
		for _, a := range []string{"2;max=3", "2;max=3", "2;max=3", "1;max=3", "1;max=3", "1;max=3"} {
			got = append(got, code(a))
		}
		want := []int{200, 200, 429, 200, 200, 429} // retries stop with 2 of 4 tokens left
		if !slices.Equal(got, want) {
			t.Errorf("answers %v, want %v", got, want)
		}
	})
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
