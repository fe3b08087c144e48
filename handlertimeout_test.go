package breakwater_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/go-chi/chi/v5"
)

func newTimeout(t *testing.T, d time.Duration, opts ...bw.Option) func(http.Handler) http.Handler {
	t.Helper()
	ht, err := bw.HandlerTimeout(d, opts...)
	if err != nil {
		t.Fatalf("HandlerTimeout: %v", err)
	}
	return ht
}

// TestHandlerTimeoutOnARealServer runs handlers that end in every way
// around the deadline on a real server and checks that the server never
// logs a superfluous or hijacked write. Deadlines are real but nothing
// asserts on durations.
func TestHandlerTimeoutOnARealServer(t *testing.T) {
	ht := newTimeout(t, 20*time.Millisecond)
	r := chi.NewRouter()
	r.Use(ht)
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
		ht := newTimeout(t, 3*time.Second, bw.WithTimeoutStatus(http.StatusGatewayTimeout), bw.WithObserver(&obs))
		var waited time.Duration
		h := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		fast := ht(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }))
		rec = httptest.NewRecorder()
		fast.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/fast", nil))
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
			t.Fatalf("a handler done in time got %d %q", rec.Code, rec.Body)
		}

		// A client that went away gets nothing written.
		ctx, cancel := context.WithCancel(context.Background())
		gone := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		h := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != 503 || rec.Body.String() != "custom" {
			t.Fatalf("got %d %q", rec.Code, rec.Body)
		}
		if got.Mechanism != bw.MechTimeout || !errors.Is(got.Err, http.ErrHandlerTimeout) || got.Status != 503 {
			t.Fatalf("rejection %+v", got)
		}
	})
}

// The timeout status may be any 4xx or 5xx, 400 and 599 included, and is
// what a timed-out request is answered; 399 and 600 are refused.
func TestHandlerTimeoutStatusRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, status := range []int{400, 599} {
			ht := newTimeout(t, time.Second, bw.WithTimeoutStatus(status))
			h := ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/slow", nil))
			if rec.Code != status {
				t.Errorf("WithTimeoutStatus(%d): answered %d", status, rec.Code)
			}
		}
	})
	for _, status := range []int{399, 600} {
		if _, err := bw.HandlerTimeout(time.Second, bw.WithTimeoutStatus(status)); err == nil {
			t.Errorf("WithTimeoutStatus(%d) accepted", status)
		}
	}
}
