package breakwater_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A panicking user callback ends the call with an error (an observer's is
// ignored), never a panic out of RoundTrip, and the request body is closed
// exactly once.
func TestPanickingCallbacks(t *testing.T) {
	boom := func() { panic("boom") }
	for name, opt := range map[string]bw.Option{
		"key func":   bw.WithKeyFunc(func(*http.Request) string { boom(); return "" }),
		"classifier": bw.WithClassifier(func(*http.Response, error) bw.Outcome { boom(); return bw.Outcome{} }),
		"retry if":   bw.WithRetryIf(func(context.Context, *http.Response, error) (bool, error) { boom(); return false, nil }),
		"observer":   bw.WithObserver(bw.ObserverFunc(func(context.Context, bw.Event) { boom() })),
		"backoff":    bw.WithBackoff(requestTimeBackoff(boom)),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := rawTransport(func(c net.Conn, br *bufio.Reader) {
					for {
						if _, ok := readRequest(br); !ok {
							return
						}
						io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
					}
				})
				defer base.CloseIdleConnections()
				var tr *bw.Transport
				mustNotPanic(t, "NewTransport", func() {
					var err error
					opts := []bw.Option{bw.WithBase(base), opt}
					if name != "backoff" {
						opts = append(opts, bw.WithBackoff(bw.Constant(time.Millisecond)))
					}
					if tr, err = bw.NewTransport(opts...); err != nil {
						t.Fatalf("NewTransport: %v", err)
					}
				})
				if tr == nil {
					return
				}
				body := &closeCounter{Reader: strings.NewReader("payload")}
				req, _ := http.NewRequest(http.MethodPut, "http://upstream.test/", body)
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
				mustNotPanic(t, "RoundTrip", func() {
					if resp, err := tr.RoundTrip(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
				if n := body.closes.Load(); n != 1 {
					t.Errorf("the request body was closed %d times, want 1", n)
				}
			})
		})
	}
}

// requestTimeBackoff is a Backoff whose Delay calls fn: at request time
// only, since NewTransport plans with MaxDelay.
type requestTimeBackoff func()

func (fn requestTimeBackoff) Delay(int, time.Duration) time.Duration    { fn(); return 0 }
func (fn requestTimeBackoff) MaxDelay(int, time.Duration) time.Duration { return 0 }
