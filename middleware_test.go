package breakwater_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

// syncBuffer is a bytes.Buffer safe for a server's error log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newLoggedServer starts h on a real loopback server whose error log is
// returned; at cleanup the log must not mention a superfluous or hijacked
// write.
func newLoggedServer(t *testing.T, h http.Handler) (*httptest.Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(logs, "", 0)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		for _, bad := range []string{"superfluous", "hijacked connection"} {
			if strings.Contains(logs.String(), bad) {
				t.Errorf("server log mentions %q:\n%s", bad, logs)
			}
		}
	})
	return srv, logs
}

func fetch(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading: %v", url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func newTimeout(t *testing.T, d time.Duration, opts ...bw.TimeoutOption) *bw.HandlerTimeout {
	t.Helper()
	ht, err := bw.NewHandlerTimeout(d, opts...)
	if err != nil {
		t.Fatalf("NewHandlerTimeout: %v", err)
	}
	return ht
}

// problem decodes an RFC 9457 body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func decodeProblem(t *testing.T, h http.Header, body string) problem {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p
}

// TestHandlerTimeoutOnARealServer runs handlers that end in every way
// around the deadline on a real server and checks that the server never
// logs a superfluous or hijacked write. Deadlines are real but nothing
// asserts on durations.
func TestHandlerTimeoutOnARealServer(t *testing.T) {
	ht := newTimeout(t, 20*time.Millisecond)
	r := chi.NewRouter()
	r.Use(ht.Middleware)
	r.Get("/early-header", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	r.Get("/early-body", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		<-r.Context().Done()
	})
	r.Get("/silent", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		if c := context.Cause(r.Context()); c != http.ErrHandlerTimeout {
			t.Errorf("cause %v, want http.ErrHandlerTimeout", c)
		}
	})
	r.Get("/late", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		http.Error(w, "late", http.StatusInternalServerError)
	})
	r.Get("/late-header", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		w.WriteHeader(http.StatusGatewayTimeout)
	})
	r.Get("/hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack through the middleware: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		brw.Flush()
		<-r.Context().Done()
	})
	srv, _ := newLoggedServer(t, r)

	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/early-header", http.StatusAccepted, ""},
		{"/early-body", http.StatusOK, "partial"},
		{"/late", http.StatusInternalServerError, "late\n"},
		{"/late-header", http.StatusGatewayTimeout, ""},
		{"/hijack", http.StatusOK, "hijacked"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, _, body := fetch(t, srv.URL+tc.path)
			if status != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}
	t.Run("/silent", func(t *testing.T) {
		status, h, body := fetch(t, srv.URL+"/silent")
		if status != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", status)
		}
		if p := decodeProblem(t, h, body); p.Status != 503 || p.Type != "about:blank" || p.Title != "Service Unavailable" {
			t.Fatalf("problem %+v", p)
		}
		if h.Get("Retry-After") != "" {
			t.Fatalf("a timeout carries no Retry-After, got %q", h.Get("Retry-After"))
		}
	})
}

func TestHandlerTimeoutVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var obs eventLog
		ht := newTimeout(t, 3*time.Second, bw.WithTimeoutStatus(http.StatusGatewayTimeout), bw.WithInboundObserver(&obs))
		var waited time.Duration
		h := ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			select {
			case <-r.Context().Done():
			case <-time.After(time.Hour):
			}
			waited = time.Since(start)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/slow", nil))
		if waited != 3*time.Second {
			t.Fatalf("the handler's context ended after %s, want 3s", waited)
		}
		if rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", rec.Code)
		}
		decodeProblem(t, rec.Header(), rec.Body.String())
		evs := obs.events()
		if len(evs) != 2 || evs[0].Kind != bw.EventReject || evs[0].Mechanism != bw.MechTimeout ||
			evs[1].Kind != bw.EventRequest || evs[1].Category != bw.Timeout || evs[1].Status != 504 || evs[1].Duration != 3*time.Second {
			t.Fatalf("events %+v", evs)
		}

		// A handler that finishes in time and writes nothing gets net/http's 200.
		fast := ht.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }))
		rec = httptest.NewRecorder()
		fast.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/fast", nil))
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
			t.Fatalf("a handler done in time got %d %q", rec.Code, rec.Body)
		}

		// A client that went away gets nothing written.
		ctx, cancel := context.WithCancel(context.Background())
		gone := ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		}))
		rec = httptest.NewRecorder()
		gone.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/gone", nil).WithContext(ctx))
		if rec.Body.Len() != 0 {
			t.Fatalf("wrote %q to a client that left", rec.Body)
		}
	})
}

func TestHandlerTimeoutPanicPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ht := newTimeout(t, time.Second)
		h := ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			panic("boom")
		}))
		rec := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("recovered %v, want the handler's panic", v)
				}
			}()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		}()
		if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
			t.Fatalf("the timeout wrote over a panic: %q", rec.Body)
		}
	})
}

func TestHandlerTimeoutDenyHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got bw.Rejection
		ht := newTimeout(t, time.Second, bw.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, rej bw.Rejection) {
			got = rej
			w.WriteHeader(rej.Status)
			io.WriteString(w, "custom")
		}))
		rec := httptest.NewRecorder()
		ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != 503 || rec.Body.String() != "custom" {
			t.Fatalf("got %d %q", rec.Code, rec.Body)
		}
		if got.Mechanism != bw.MechTimeout || !errors.Is(got.Err, http.ErrHandlerTimeout) || got.Status != 503 {
			t.Fatalf("rejection %+v", got)
		}
	})
}

func TestMiddlewareOptionErrors(t *testing.T) {
	if _, err := bw.NewHandlerTimeout(0); err == nil {
		t.Error("NewHandlerTimeout(0) succeeded")
	}
	if _, err := bw.NewHandlerTimeout(time.Second, bw.WithTimeoutStatus(200)); err == nil || !strings.Contains(err.Error(), "4xx or 5xx") {
		t.Errorf("timeout status 200: %v", err)
	}
	if _, err := bw.NewRouteBreaker(nil, bw.WithRouteKey(nil)); err == nil {
		t.Error("NewRouteBreaker with a nil key succeeded")
	}
}

// eventLog is an Observer that keeps events.
type eventLog struct {
	mu  sync.Mutex
	evs []bw.Event
}

func (o *eventLog) Observe(_ context.Context, e bw.Event) {
	o.mu.Lock()
	o.evs = append(o.evs, e)
	o.mu.Unlock()
}

func (o *eventLog) events() []bw.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bw.Event(nil), o.evs...)
}

// serve runs one request through h and returns the recorder.
func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestHijackThroughTheWrapper(t *testing.T) {
	ht := newTimeout(t, time.Minute)
	h := ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Hijacker); !ok {
			t.Error("the wrapper hides http.Hijacker")
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		brw.Flush()
	}))
	srv, _ := newLoggedServer(t, h)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestWrapperKeepsFlushAndReadFrom(t *testing.T) {
	ht := newTimeout(t, time.Minute)
	h := ht.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(io.ReaderFrom); !ok {
			t.Error("the wrapper hides io.ReaderFrom")
		}
		io.Copy(w, strings.NewReader("line 1\n"))
		w.(http.Flusher).Flush()
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through Unwrap: %v", err)
		}
		io.WriteString(w, "line 2\n")
	}))
	srv, _ := newLoggedServer(t, h)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var lines []string
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, l)
	}
	if strings.Join(lines, "") != "line 1\nline 2\n" || resp.ContentLength != -1 {
		t.Fatalf("got %q (length %d), want two streamed lines", lines, resp.ContentLength)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
