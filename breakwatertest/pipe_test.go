package breakwatertest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestPipeUpstreamDelayRunsOnVirtualTime(t *testing.T) {
	const delay = 5 * time.Second
	realStart := time.Now()
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: delay, Body: []byte("late")})
		start := time.Now()
		r := get(t, u.Transport(), u.URL)
		if elapsed := time.Since(start); elapsed != delay {
			t.Errorf("answered after %v of virtual time, want exactly %v", elapsed, delay)
		}
		if r.body != "late" {
			t.Errorf("body = %q, want %q", r.body, "late")
		}
	})
	// Had the delay been real, the bubble could not have returned sooner.
	if real := time.Since(realStart); real >= delay {
		t.Errorf("the test took %v of real time, want far less than %v", real, delay)
	}
}

func TestPipeUpstreamHangAndContextTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		r := do(ctx, u.Transport(), http.MethodGet, u.URL, nil)
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", r.err)
		}
		if elapsed := time.Since(start); elapsed != 2*time.Second {
			t.Errorf("gave up after %v, want exactly 2s", elapsed)
		}
		if u.Count() != 1 {
			t.Errorf("Count() = %d, want 1", u.Count())
		}
	})
}

func TestPipeUpstreamClientTimeoutShorterThanDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{Delay: time.Minute},
			breakwatertest.Step{Status: 201},
		)
		c := &http.Client{Transport: u.Transport(), Timeout: 3 * time.Second}
		start := time.Now()
		_, err := c.Get(u.URL)
		if err == nil || time.Since(start) != 3*time.Second {
			t.Fatalf("err = %v after %v, want a timeout after 3s", err, time.Since(start))
		}
		// The handler saw the client go away; the next request is answered
		// at once by the next step.
		start = time.Now()
		if r := get(t, u.Transport(), u.URL); r.status != 201 || time.Since(start) != 0 {
			t.Errorf("next request: %d after %v, want 201 at once", r.status, time.Since(start))
		}
	})
}

func TestPipeUpstreamSlowBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: 3, ChunkSize: 1, SlowBody: time.Second})
		start := time.Now()
		resp, err := u.Client().Get(u.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("headers after %v, want at once", elapsed)
		}
		var got []byte
		for i := 1; i <= 3; i++ {
			b := make([]byte, 10)
			n, err := resp.Body.Read(b)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			got = append(got, b[:n]...)
			if elapsed := time.Since(start); elapsed != time.Duration(i)*time.Second {
				t.Errorf("chunk %d after %v, want %ds", i, elapsed, i)
			}
		}
		if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
			t.Errorf("after three chunks: %q, %v", rest, err)
		}
		if string(got) != "abc" {
			t.Errorf("body = %q, want %q", got, "abc")
		}
	})
}

func TestPipeUpstreamResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{ResetBeforeHeaders: true},
			breakwatertest.Step{BodySize: 1000, ResetMidBody: true},
		)
		r := do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil)
		if !errors.Is(r.err, io.EOF) {
			t.Errorf("reset before headers: err = %v, want io.EOF", r.err)
		}

		req, _ := http.NewRequest(http.MethodGet, u.URL, nil)
		resp, err := u.Transport().RoundTrip(req)
		if err != nil {
			t.Fatalf("reset mid-body: RoundTrip: %v, want a response", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("reset mid-body: read error %v, want io.ErrUnexpectedEOF", err)
		}
		if !bytes.Equal(b, breakwatertest.Pattern(500)) {
			t.Errorf("reset mid-body: read %d bytes, want the first 500 of the pattern", len(b))
		}
	})
}

func TestPipeUpstreamConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		for range 3 {
			get(t, u.Transport(), u.URL+"/seq")
		}
		// Two requests in flight at once need two connections.
		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{Delay: time.Second}))
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { get(t, u.Transport(), u.URL+"/par") })
		}
		wg.Wait()
		// Any host name reaches the upstream, on its own connections.
		get(t, u.Transport(), "http://other.test:8080/host")

		var ids []int
		var hosts []string
		for _, r := range u.Requests() {
			ids = append(ids, r.ConnID)
			hosts = append(hosts, r.Host)
		}
		if ids[0] != 1 || ids[1] != 1 || ids[2] != 1 || ids[3] == ids[4] || ids[5] < 2 {
			t.Errorf("ConnIDs = %v; want three on connection 1, two in parallel on distinct ones, a new one for the other host", ids)
		}
		if want := []string{"upstream.test", "upstream.test", "upstream.test", "upstream.test", "upstream.test", "other.test:8080"}; !slices.Equal(hosts, want) {
			t.Errorf("hosts = %q, want %q", hosts, want)
		}
	})
}

func TestPipeUpstreamRequestTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		start := time.Now()
		get(t, u.Transport(), u.URL)
		time.Sleep(90 * time.Second)
		get(t, u.Transport(), u.URL)
		reqs := u.Requests()
		if !reqs[0].At.Equal(start) || reqs[1].At.Sub(reqs[0].At) != 90*time.Second {
			t.Errorf("At = %v, %v; want %v and 90s later", reqs[0].At, reqs[1].At, start)
		}
	})
}

// Closing inside the bubble must end every goroutine: synctest.Test fails
// if any is left blocked when the bubble ends.
func TestPipeUpstreamCloseInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{},
			breakwatertest.Step{Hang: true},
			breakwatertest.Step{Delay: time.Hour},
			breakwatertest.Step{BodySize: 10, ChunkSize: 1, SlowBody: time.Hour},
		)
		get(t, u.Transport(), u.URL) // leaves an idle keep-alive connection
		results := make(chan result, 3)
		for range 3 {
			go func() { results <- do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil) }()
			synctest.Wait() // let each request take its step in order
		}
		if u.Count() != 4 {
			t.Fatalf("Count() = %d, want 4", u.Count())
		}
		u.Close()
		for range 3 {
			if r := <-results; r.err == nil {
				t.Errorf("got %d %q after Close, want an error", r.status, r.body)
			}
		}
		r := do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil)
		if !errors.Is(r.err, breakwatertest.ErrUpstreamClosed) {
			t.Errorf("request after Close: %v, want ErrUpstreamClosed", r.err)
		}
	})
}

// Outside a bubble the pipe upstream runs on the real clock; TestMain's leak
// check covers its goroutines.
func TestPipeUpstreamOutsideBubble(t *testing.T) {
	u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 418, Body: []byte("teapot")})
	r := do(context.Background(), u.Transport(), http.MethodPost, u.URL+"/brew", bytes.NewReader([]byte("leaves")))
	if r.err != nil || r.status != 418 || r.body != "teapot" {
		t.Errorf("got %d %q %v", r.status, r.body, r.err)
	}
	if reqs := u.Requests(); len(reqs) != 1 || string(reqs[0].Body) != "leaves" || reqs[0].Path != "/brew" {
		t.Errorf("Requests() = %+v", reqs)
	}
}

// Why the pipe upstream exists: a client in a bubble that waits on a real
// socket is not durably blocked, so the bubble's clock cannot move while it
// waits. Even a 1ns timeout does not fire, and the request succeeds with no
// virtual time elapsed.
func TestLoopbackDoesNotAdvanceVirtualTime(t *testing.T) {
	u := breakwatertest.NewUpstream(t) // outside the bubble: inside, it would hang
	synctest.Test(t, func(t *testing.T) {
		tr := u.Transport().Clone()
		tr.DisableKeepAlives = true // an idle connection would freeze the clock too
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		start := time.Now()
		r := do(ctx, tr, http.MethodGet, u.URL, nil)
		if r.err != nil || r.status != 200 || time.Since(start) != 0 {
			t.Errorf("got %d, %v after %v of virtual time; want 200 with the clock stopped", r.status, r.err, time.Since(start))
		}
	})
}
