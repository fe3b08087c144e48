package breakwater_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// ends counts the EventCallEnd events rec holds.
func (r *recorder) ends() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == bw.EventCallEnd {
			n++
		}
	}
	return n
}

// Without timeouts an observed call still ends when its response does:
// at the body's close, or with RoundTrip when the response has no body.
func TestCallEndWithoutTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Body: []byte("ok")}, breakwatertest.Step{Status: 204})
		rec := &recorder{}
		tr := newTransport(t, u.Transport(), bw.WithObserver(rec), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if n := rec.ends(); n != 0 {
			t.Errorf("the call ended before its body: %d ends", n)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := rec.ends(); n != 1 {
			t.Errorf("%d ends after the body's close, want 1", n)
		}
		if resp, err = tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if n := rec.ends(); n != 2 {
			t.Errorf("a 204's call did not end with RoundTrip: %d ends", n)
		}
		resp.Body.Close()
		if n := rec.ends(); n != 2 {
			t.Errorf("%d ends after the 204's close, want 2", n)
		}
	})
}

// An unobserved call without timeouts that holds nothing past RoundTrip
// gets the base's response body as it is.
func TestUnheldBodyIsTheBase(t *testing.T) {
	body := io.NopCloser(strings.NewReader("ok"))
	base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body, Request: req}, nil
	})
	tr := newTransport(t, base, bw.WithCallTimeout(0), bw.WithAttemptTimeout(0))
	req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Body != body {
		t.Errorf("the body of a call that holds nothing is wrapped (%T)", resp.Body)
	}
}

// When the attempt's deadline is the call's own, the call timeout is what
// ends a body that outlives it.
func TestEqualDeadlinesAreTheCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: 1 << 10, SlowBody: time.Hour, ChunkSize: 1})
		tr := newTransport(t, u.Transport(), bw.WithCallTimeout(2*time.Second), bw.WithAttemptTimeout(2*time.Second))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		if !errors.Is(err, bw.ErrCallTimeout) || errors.Is(err, bw.ErrAttemptTimeout) {
			t.Errorf("body read: %v, want the call timeout's error", err)
		}
	})
}
