package breakwater_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

func TestMiddlewareOptionErrors(t *testing.T) {
	if _, err := bw.HandlerTimeout(0); err == nil {
		t.Error("HandlerTimeout(0) succeeded")
	}
	if _, err := bw.HandlerTimeout(time.Second, bw.WithTimeoutStatus(200)); err == nil || !strings.Contains(err.Error(), "4xx or 5xx") {
		t.Errorf("timeout status 200: %v", err)
	}
	if _, err := bw.RouteBreaker(nil, bw.WithKeyFunc(nil)); err == nil {
		t.Error("RouteBreaker with a nil key succeeded")
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
	h := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	h := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
