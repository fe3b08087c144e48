package breakwatertest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
)

// PipeURL is the URL of every upstream made by [NewPipeUpstream].
const PipeURL = "http://upstream.test"

// ErrUpstreamClosed is the dial error of a pipe upstream's transport after
// [Upstream.Close].
var ErrUpstreamClosed = errors.New("breakwatertest: upstream closed")

// NewPipeUpstream is like [NewUpstream] but serves on an in-memory network
// made of net.Pipe connections, so that it works inside a testing/synctest
// bubble: net/http's own client and server code runs unchanged (keep-alive
// and connection reuse included), and every goroutine it starts blocks on
// channels of the bubble, so the bubble's fake clock advances while a client
// waits for a Delay, a Hang or a SlowBody.
//
// The upstream is reachable only through [Upstream.Transport] and
// [Upstream.Client]. Its URL is [PipeURL], but the transport dials the
// upstream for any host and port, so a test can use several host names (to
// get several breaker or limiter keys) against one upstream.
//
// Create it inside the bubble that uses it (in synctest.Test's function,
// with that function's t) and use it only there: its goroutines, channels
// and timers then belong to the bubble, and the Close registered with
// t.Cleanup runs before the bubble ends. Do not share one upstream between
// a bubble and the outside: a connection dialed inside the bubble belongs
// to it, and the server goroutine outside that reads it stops the test
// binary with "fatal error: receive on synctest channel from outside
// bubble".
//
// Close ends every goroutine of the server and of the transport's idle
// connections. A response body that the code under test never closes keeps
// its connection's client goroutines blocked, so synctest.Test fails with
// "deadlock: main bubble goroutine has exited but blocked goroutines
// remain": a leaked body shows up as that deadlock.
//
// Outside a bubble it is simply a fast in-memory upstream on the real clock.
//
// If t is not nil, Close is registered with t.Cleanup; otherwise the caller
// must call Close.
func NewPipeUpstream(t testing.TB, steps ...Step) *Upstream {
	if t != nil {
		t.Helper()
	}
	return NewPipeUpstreamFunc(t, Sequence(steps...))
}

// NewPipeUpstreamFunc is like [NewPipeUpstream] but asks fn for the step of
// each request, as [NewUpstreamFunc] does.
func NewPipeUpstreamFunc(t testing.TB, fn func(n int, r *http.Request) Step) *Upstream {
	if t != nil {
		t.Helper()
	}
	u := newUpstream(fn)
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	var conns sync.WaitGroup // server connections not yet closed or hijacked
	srv := &http.Server{
		Handler:     http.HandlerFunc(u.serve),
		ConnContext: u.connContext,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateHijacked, http.StateClosed:
				conns.Done()
			}
		},
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()

	u.URL = PipeURL
	u.transport = &http.Transport{DialContext: ln.dial}
	u.client = &http.Client{Transport: u.transport}
	u.shutdown = func() {
		// Close closes the listener, waits for Serve to return and closes
		// every connection; the conn goroutines then end without waiting
		// on anything, and no new connection can start.
		_ = srv.Close()
		<-served
		conns.Wait()
	}
	if t != nil {
		t.Cleanup(u.Close)
	}
	return u
}

// pipeListener is a net.Listener that accepts the server ends of the pipes
// its dial method creates.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is the client transport's DialContext: it hands the server end of a
// new pipe to Accept and returns the client end.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err := ErrUpstreamClosed
		client.Close()
		server.Close()
		return nil, err
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "upstream.test:80" }
