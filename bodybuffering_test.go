package breakwater_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// WithBodyBuffering(n) makes a body of up to n bytes replayable, byte for
// byte, and leaves a longer one unreplayable (sent once, not retried).
func TestBodyBufferingLimit(t *testing.T) {
	const limit = 4
	for _, body := range []string{"abc", "abcd", "abcde"} {
		t.Run(body, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
				tr := newTransport(t, u.Transport(), bw.WithBodyBuffering(limit))
				// onlyReader hides the reader's type: no GetBody, so only
				// buffering can make the body replayable.
				req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/", onlyReader{strings.NewReader(body)})
				r := do(tr, req)
				want, attempts := 200, 2
				if len(body) > limit {
					want, attempts = 503, 1
				}
				if r.err != nil || r.status != want || u.Count() != attempts {
					t.Fatalf("%d bytes: %+v after %d requests, want %d after %d", len(body), r, u.Count(), want, attempts)
				}
				for _, got := range u.Requests() {
					if string(got.Body) != body {
						t.Fatalf("the upstream got %q, want %q", got.Body, body)
					}
				}
			})
		})
	}
}

// Without WithBodyBuffering nothing is buffered: a body without GetBody,
// even an empty one, is sent once and not retried.
func TestNoBodyBufferingByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport())
		req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/", onlyReader{strings.NewReader("")})
		if r := do(tr, req); r.err != nil || r.status != 503 || u.Count() != 1 {
			t.Fatalf("%+v after %d requests, want the 503 after 1", r, u.Count())
		}
	})
}
