package breakwatertest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestUpstreamStep(t *testing.T) {
	tests := []struct {
		name       string
		step       breakwatertest.Step
		method     string
		wantStatus int
		wantBody   string
		wantHeader http.Header
	}{
		{
			name:       "zero step",
			wantStatus: 200,
			wantBody:   "OK\n",
			wantHeader: http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {"3"}},
		},
		{
			name:       "status with default body",
			step:       breakwatertest.Step{Status: 503},
			wantStatus: 503,
			wantBody:   "Service Unavailable\n",
		},
		{
			name:       "status without text",
			step:       breakwatertest.Step{Status: 599},
			wantStatus: 599,
			wantBody:   "status code 599\n",
		},
		{
			name:       "explicit body",
			step:       breakwatertest.Step{Status: 201, Body: []byte("created")},
			wantStatus: 201,
			wantBody:   "created",
			wantHeader: http.Header{"Content-Length": {"7"}},
		},
		{
			name:       "explicit empty body",
			step:       breakwatertest.Step{Body: []byte{}},
			wantStatus: 200,
			wantBody:   "",
			wantHeader: http.Header{"Content-Length": {"0"}},
		},
		{
			name:       "body size",
			step:       breakwatertest.Step{BodySize: 100_000, Body: []byte("ignored")},
			wantStatus: 200,
			wantBody:   string(breakwatertest.Pattern(100_000)),
			wantHeader: http.Header{"Content-Length": {"100000"}},
		},
		{
			name: "extra headers",
			step: breakwatertest.Step{Status: 429, Header: http.Header{
				"Retry-After":  {"7"},
				"x-multi":      {"a", "b"},
				"Content-Type": {"application/json"},
			}, Body: []byte(`{}`)},
			wantStatus: 429,
			wantBody:   `{}`,
			wantHeader: http.Header{
				"Retry-After":  {"7"},
				"X-Multi":      {"a", "b"},
				"Content-Type": {"application/json"},
			},
		},
		{
			name:       "no content",
			step:       breakwatertest.Step{Status: 204, Body: []byte("dropped")},
			wantStatus: 204,
			wantBody:   "",
		},
		{
			name:       "head",
			step:       breakwatertest.Step{Status: 404},
			method:     http.MethodHead,
			wantStatus: 404,
			wantBody:   "",
			wantHeader: http.Header{"Content-Length": {"10"}},
		},
		{
			name:       "slow body",
			step:       breakwatertest.Step{BodySize: 5, ChunkSize: 2, SlowBody: time.Millisecond},
			wantStatus: 200,
			wantBody:   "abcde",
			wantHeader: http.Header{"Content-Length": {"5"}},
		},
		{
			name:       "delay",
			step:       breakwatertest.Step{Delay: time.Millisecond, Status: 502},
			wantStatus: 502,
			wantBody:   "Bad Gateway\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := breakwatertest.NewUpstream(t, tt.step)
			method := cmpOr(tt.method, http.MethodGet)
			r := do(context.Background(), u.Transport(), method, u.URL+"/p", nil)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.status != tt.wantStatus {
				t.Errorf("status = %d, want %d", r.status, tt.wantStatus)
			}
			if r.body != tt.wantBody {
				t.Errorf("body = %.40q (%d bytes), want %.40q (%d bytes)", r.body, len(r.body), tt.wantBody, len(tt.wantBody))
			}
			for k, want := range tt.wantHeader {
				if got := r.header.Values(k); !slices.Equal(got, want) {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func TestUpstreamPlaysStepsInOrderThenRepeatsLast(t *testing.T) {
	u := breakwatertest.NewUpstream(t,
		breakwatertest.Step{Status: 500},
		breakwatertest.Step{Status: 503},
		breakwatertest.Step{Status: 200},
	)
	var got []int
	for range 5 {
		got = append(got, get(t, u.Transport(), u.URL).status)
	}
	if want := []int{500, 503, 200, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if u.Count() != 5 {
		t.Errorf("Count() = %d, want 5", u.Count())
	}
}

func TestUpstreamNoStepsAnswersOK(t *testing.T) {
	u := breakwatertest.NewUpstream(t)
	if r := get(t, u.Transport(), u.URL); r.status != 200 || r.body != "OK\n" {
		t.Errorf("got %d %q, want 200 \"OK\\n\"", r.status, r.body)
	}
}

func TestUpstreamRecordsRequests(t *testing.T) {
	u := breakwatertest.NewUpstream(t)

	// Every byte value, 1 MiB, so that truncation or re-encoding shows.
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	req, err := http.NewRequest(http.MethodPost, u.URL+"/upload/x?q=1", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test", "yes")
	resp, err := u.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	get(t, u.Transport(), u.URL+"/second")

	reqs := u.Requests()
	if len(reqs) != 2 {
		t.Fatalf("len(Requests()) = %d, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	if first.N != 1 || first.Method != http.MethodPost || first.Path != "/upload/x" ||
		first.Host != strings.TrimPrefix(u.URL, "http://") || first.Header.Get("X-Test") != "yes" {
		t.Errorf("first request = %d %s %s %s %v", first.N, first.Method, first.Host, first.Path, first.Header)
	}
	if !bytes.Equal(first.Body, payload) {
		t.Errorf("recorded body differs from the sent body (%d bytes recorded, %d sent)", len(first.Body), len(payload))
	}
	if first.ConnID < 1 || first.At.IsZero() {
		t.Errorf("ConnID = %d, At = %v; want both set", first.ConnID, first.At)
	}
	if second.N != 2 || second.Method != http.MethodGet || second.Path != "/second" || second.Body == nil || len(second.Body) != 0 {
		t.Errorf("second request = %d %s %s body %q", second.N, second.Method, second.Path, second.Body)
	}
	if second.At.Before(first.At) {
		t.Errorf("second.At %v before first.At %v", second.At, first.At)
	}

	// Requests returns copies.
	reqs[0].Body[0]++
	reqs[0].Header.Set("X-Test", "changed")
	if again := u.Requests()[0]; again.Body[0] != payload[0] || again.Header.Get("X-Test") != "yes" {
		t.Error("changing the result of Requests changed the upstream's record")
	}
}

func TestUpstreamScriptSeesRequestAndBody(t *testing.T) {
	u := breakwatertest.NewUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return breakwatertest.Step{Status: 500}
		}
		return breakwatertest.Step{Body: fmt.Appendf(nil, "%d %s %s %s", n, r.Method, r.URL.Path, b)}
	})
	for i, want := range []string{"1 PUT /a hello", "2 PUT /b world"} {
		path, body := []string{"/a", "/b"}[i], []string{"hello", "world"}[i]
		r := do(context.Background(), u.Transport(), http.MethodPut, u.URL+path, strings.NewReader(body))
		if r.err != nil || r.body != want {
			t.Errorf("got %q, %v; want %q", r.body, r.err, want)
		}
	}
}

func TestUpstreamConnectionIDs(t *testing.T) {
	connIDs := func(u *breakwatertest.Upstream) []int {
		var ids []int
		for _, r := range u.Requests() {
			ids = append(ids, r.ConnID)
		}
		return ids
	}

	t.Run("drained and closed bodies reuse one connection", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t, breakwatertest.Step{BodySize: 10_000})
		for range 3 {
			get(t, u.Transport(), u.URL) // reads to EOF and closes
		}
		if got := connIDs(u); !slices.Equal(got, []int{1, 1, 1}) {
			t.Errorf("ConnIDs = %v, want [1 1 1]", got)
		}
	})

	t.Run("bodies closed unread cost a connection each", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t, breakwatertest.Step{BodySize: 1 << 20})
		for range 3 {
			resp, err := u.Client().Get(u.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if got := connIDs(u); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("ConnIDs = %v, want [1 2 3]", got)
		}
	})

	t.Run("keep-alives disabled", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t)
		tr := u.Transport().Clone()
		tr.DisableKeepAlives = true
		defer tr.CloseIdleConnections()
		for range 3 {
			get(t, tr, u.URL)
		}
		if got := connIDs(u); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("ConnIDs = %v, want [1 2 3]", got)
		}
	})
}

func TestUpstreamResetBeforeHeaders(t *testing.T) {
	t.Run("fresh connection", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t, breakwatertest.Step{ResetBeforeHeaders: true})
		r := do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil)
		if !errors.Is(r.err, syscall.ECONNRESET) {
			t.Errorf("err = %v, want ECONNRESET", r.err)
		}
		if u.Count() != 1 {
			t.Errorf("Count() = %d, want 1", u.Count())
		}
	})

	// net/http's Transport replays an idempotent request once, silently,
	// when a reused connection breaks before the first response byte. The
	// replay is a second request and plays the next step.
	t.Run("reused connection GET is replayed by net/http", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t,
			breakwatertest.Step{},
			breakwatertest.Step{ResetBeforeHeaders: true},
			breakwatertest.Step{Body: []byte("replayed")},
		)
		get(t, u.Transport(), u.URL)
		if r := get(t, u.Transport(), u.URL); r.body != "replayed" {
			t.Errorf("body = %q, want %q", r.body, "replayed")
		}
		reqs := u.Requests()
		if len(reqs) != 3 || reqs[1].ConnID != reqs[0].ConnID || reqs[2].ConnID == reqs[1].ConnID {
			t.Errorf("requests = %+v; want 3, the third on a new connection", reqs)
		}
	})

	t.Run("reused connection POST fails", func(t *testing.T) {
		u := breakwatertest.NewUpstream(t,
			breakwatertest.Step{},
			breakwatertest.Step{ResetBeforeHeaders: true},
		)
		for i := range 2 {
			r := do(context.Background(), u.Transport(), http.MethodPost, u.URL, strings.NewReader("x"))
			if i == 0 && r.err != nil {
				t.Fatal(r.err)
			}
			if i == 1 && !errors.Is(r.err, syscall.ECONNRESET) {
				t.Errorf("err = %v, want ECONNRESET", r.err)
			}
		}
		if u.Count() != 2 {
			t.Errorf("Count() = %d, want 2", u.Count())
		}
	})
}

func TestUpstreamResetMidBody(t *testing.T) {
	u := breakwatertest.NewUpstream(t, breakwatertest.Step{Status: 200, BodySize: 1000, ResetMidBody: true})
	req, _ := http.NewRequest(http.MethodGet, u.URL, nil)
	resp, err := u.Transport().RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v; want a response", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 1000 {
		t.Errorf("status %d, ContentLength %d; want 200, 1000", resp.StatusCode, resp.ContentLength)
	}
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the body: %v, want ECONNRESET", err)
	}
	if len(b) > 500 || !bytes.Equal(b, breakwatertest.Pattern(len(b))) {
		t.Errorf("read %d bytes %.20q, want at most the first 500 of the pattern", len(b), b)
	}
}

func TestUpstreamHangUntilClientGoesAway(t *testing.T) {
	script, arrived := arrivals(1, breakwatertest.Sequence(breakwatertest.Step{Hang: true}))
	u := breakwatertest.NewUpstreamFunc(t, script)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result)
	go func() { done <- do(ctx, u.Transport(), http.MethodGet, u.URL, nil) }()
	<-arrived
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	u.Close() // returns once the handler has seen the client go away
}

func TestUpstreamCloseUnblocksHandlers(t *testing.T) {
	steps := map[string]breakwatertest.Step{
		"hang":      {Hang: true},
		"delay":     {Delay: time.Hour},
		"slow body": {BodySize: 10, ChunkSize: 1, SlowBody: time.Hour},
	}
	for name, step := range steps {
		t.Run(name, func(t *testing.T) {
			script, arrived := arrivals(1, breakwatertest.Sequence(step))
			u := breakwatertest.NewUpstreamFunc(t, script)
			done := make(chan result)
			go func() { done <- do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil) }()
			<-arrived
			u.Close()
			if r := <-done; r.err == nil {
				t.Errorf("got %d %q, want an error", r.status, r.body)
			}
			u.Close() // idempotent
			if r := do(context.Background(), u.Transport(), http.MethodGet, u.URL, nil); r.err == nil {
				t.Error("request after Close succeeded")
			}
		})
	}
}

func TestUpstreamSetFunc(t *testing.T) {
	u := breakwatertest.NewUpstream(t, breakwatertest.Step{Status: 503})
	var got []int
	for range 2 {
		got = append(got, get(t, u.Transport(), u.URL).status)
	}
	var ns []int
	var mu sync.Mutex
	next := breakwatertest.Sequence(breakwatertest.Step{Status: 500}, breakwatertest.Step{Status: 200})
	u.SetFunc(func(n int, r *http.Request) breakwatertest.Step {
		mu.Lock()
		ns = append(ns, n)
		mu.Unlock()
		return next(n, r)
	})
	for range 3 {
		got = append(got, get(t, u.Transport(), u.URL).status)
	}
	if want := []int{503, 503, 500, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if want := []int{3, 4, 5}; !slices.Equal(ns, want) {
		t.Errorf("request numbers seen by the new script = %v, want %v", ns, want)
	}
}

func TestUpstreamConcurrentRequests(t *testing.T) {
	const n = 64
	u := breakwatertest.NewUpstreamFunc(t, func(k int, r *http.Request) breakwatertest.Step {
		b, _ := io.ReadAll(r.Body)
		return breakwatertest.Step{Body: b}
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf("request %d", i)
			r := do(context.Background(), u.Transport(), http.MethodPost, u.URL, strings.NewReader(body))
			if r.err != nil || r.body != body {
				t.Errorf("got %q, %v; want %q", r.body, r.err, body)
			}
		})
	}
	wg.Wait()
	reqs := u.Requests()
	if len(reqs) != n || u.Count() != n {
		t.Fatalf("len(Requests()) = %d, Count() = %d; want %d", len(reqs), u.Count(), n)
	}
	bodies := map[string]bool{}
	for i, r := range reqs {
		if r.N != i+1 {
			t.Errorf("Requests()[%d].N = %d", i, r.N)
		}
		bodies[string(r.Body)] = true
	}
	if len(bodies) != n {
		t.Errorf("%d distinct bodies recorded, want %d", len(bodies), n)
	}
}

func TestSequence(t *testing.T) {
	s := breakwatertest.Sequence(breakwatertest.Step{Status: 201}, breakwatertest.Step{Status: 202})
	var got []int
	for n := range 4 {
		got = append(got, s(n+1, nil).Status)
	}
	if want := []int{201, 202, 202, 202}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if st := breakwatertest.Sequence()(1, nil); st.Status != 0 || st.Hang {
		t.Errorf("empty Sequence = %+v, want the zero Step", st)
	}
}

func TestInvalidStatus(t *testing.T) {
	for _, status := range []int{-1, 100, 199, 600} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Sequence accepted status %d", status)
				}
			}()
			breakwatertest.Sequence(breakwatertest.Step{}, breakwatertest.Step{Status: status})
		})
	}

	u := breakwatertest.NewUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
		return breakwatertest.Step{Status: 103}
	})
	r := get(t, u.Transport(), u.URL)
	if r.status != 500 || !strings.Contains(r.body, "status 103") {
		t.Errorf("got %d %q, want a 500 naming status 103", r.status, r.body)
	}
}

func TestPattern(t *testing.T) {
	if got := string(breakwatertest.Pattern(28)); got != "abcdefghijklmnopqrstuvwxyzab" {
		t.Errorf("Pattern(28) = %q", got)
	}
	if got := breakwatertest.Pattern(0); len(got) != 0 {
		t.Errorf("Pattern(0) = %q", got)
	}
}
