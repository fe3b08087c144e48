package breakwatertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultChunkSize is the number of body bytes a [Step] with SlowBody writes
// between pauses when its ChunkSize is zero.
const DefaultChunkSize = 1024

// Step is what an [Upstream] does with one request. The zero Step answers
// 200 OK with the body "OK\n".
//
// The upstream first reads the whole request body, then plays the fields in
// this order: Delay, Hang, ResetBeforeHeaders, the status line and headers,
// ResetMidBody, and finally the body (paced by SlowBody).
type Step struct {
	// Status is the response status code: 0 (meaning 200) or 200 to 599.
	// [Sequence] panics on any other value; a script function that returns
	// one gets a 500 whose body names the problem.
	Status int

	// Header holds extra response headers. They are applied after the
	// defaults (Content-Type: text/plain; charset=utf-8 and an exact
	// Content-Length), so they can replace them.
	Header http.Header

	// Body is the response body. A nil Body means the status text and a
	// newline ("Service Unavailable\n"; "status code 599\n" for a code
	// without text); a non-nil empty Body means an empty body. Ignored when
	// BodySize is positive. No body is written for HEAD requests and for
	// 204 and 304 responses.
	Body []byte

	// BodySize, if positive, replaces Body with Pattern(BodySize).
	BodySize int

	// Delay is how long to wait before writing the status line. A client that
	// goes away during the delay ends it early (nothing is written); closing
	// the upstream ends it too and drops the connection.
	Delay time.Duration

	// Hang, if true, never answers: the handler waits until the client goes
	// away or the upstream is closed, and then drops the connection without
	// writing anything.
	Hang bool

	// ResetBeforeHeaders drops the connection before writing anything. Over
	// TCP ([NewUpstream]) the socket is closed with SO_LINGER 0, so the peer
	// sees a reset (ECONNRESET); over a pipe ([NewPipeUpstream]) the pipe is
	// closed and the client sees an EOF.
	//
	// net/http's Transport retries an idempotent request (GET, HEAD, OPTIONS,
	// TRACE, or one with an Idempotency-Key header) once on a new connection,
	// without telling its caller, when a reused keep-alive connection breaks
	// before the first response byte. That retry is a new request to the
	// upstream and plays the next step. To see the error itself, send the
	// request on a fresh connection (Transport.DisableKeepAlives, or a first
	// request) or use a method that is not replayable, such as POST.
	ResetBeforeHeaders bool

	// ResetMidBody writes the status line and headers with a Content-Length
	// of the whole body (at least 1), sends the first half of the body
	// (rounded down), then drops the connection like ResetBeforeHeaders.
	// The client gets the response, and reading its body fails: with
	// io.ErrUnexpectedEOF over a pipe, with ECONNRESET over TCP. Over TCP
	// the reset discards what the kernel has not delivered yet, so with a
	// body larger than the socket buffers (about 100 KiB on loopback) the
	// client may read less than half before the error.
	ResetMidBody bool

	// SlowBody, if positive, flushes the status line and headers at once and
	// then writes the body in chunks of ChunkSize bytes, waiting SlowBody
	// before each chunk and flushing after it: a body of c chunks takes
	// c×SlowBody to arrive. A client that goes away ends the body early;
	// closing the upstream drops the connection.
	SlowBody time.Duration

	// ChunkSize is the chunk size for SlowBody; 0 means DefaultChunkSize.
	ChunkSize int
}

// status returns the effective status code.
func (s Step) status() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}

// body returns the effective response body.
func (s Step) body() []byte {
	switch {
	case s.BodySize > 0:
		return Pattern(s.BodySize)
	case s.Body != nil:
		return s.Body
	default:
		return []byte(statusText(s.status()) + "\n")
	}
}

// Pattern returns n bytes of deterministic, printable content: the letters
// a to z, repeated. A [Step] with BodySize n sends exactly Pattern(n), so a
// test can compare what it read byte for byte.
func Pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// Sequence returns a script that answers its k-th call with steps[k-1] and
// every call after the last step with the last step. With no steps it
// always answers the zero Step (200 OK). The script counts its own calls,
// not the upstream's request numbers, so a script passed to
// [Upstream.SetFunc] starts again from its first step. It is safe for
// concurrent use; concurrent requests take steps in the order they reach the
// script.
func Sequence(steps ...Step) func(n int, r *http.Request) Step {
	for i, s := range steps {
		if !validStatus(s.Status) {
			panic(fmt.Sprintf("breakwatertest: step %d: status %d outside 200-599", i, s.Status))
		}
	}
	steps = slices.Clone(steps)
	var calls atomic.Int64
	return func(int, *http.Request) Step {
		if len(steps) == 0 {
			return Step{}
		}
		k := calls.Add(1) - 1
		return steps[min(k, int64(len(steps)-1))]
	}
}

// Request is one request as an [Upstream] received it.
type Request struct {
	// N is the request number, from 1, in the order the requests were
	// completely received (headers and body).
	N int
	// Method, Host and Path come from the request line and Host header
	// (Path is URL.Path, without the query).
	Method, Host, Path string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the whole request body, byte for byte (empty, never nil).
	Body []byte
	// ConnID numbers the connection the request arrived on, from 1 in the
	// order the upstream accepted connections. Requests with the same ConnID
	// shared a keep-alive connection.
	ConnID int
	// At is time.Now() when the handler started, before the body was read.
	// Inside a testing/synctest bubble it is on the bubble's fake clock.
	At time.Time
}

// Upstream is a scripted HTTP/1.1 server for tests: each request is answered
// by a [Step] chosen by a script, and every request is recorded. Create one
// with [NewUpstream] (a real loopback server from net/http/httptest) or
// [NewPipeUpstream] (the same server on an in-memory network, for tests that
// run in a testing/synctest bubble). The zero Upstream is not usable.
//
// All methods are safe for concurrent use.
type Upstream struct {
	// URL is the base URL, without a trailing slash: "http://127.0.0.1:port"
	// for NewUpstream, "http://upstream.test" for NewPipeUpstream.
	URL string

	client    *http.Client
	transport *http.Transport
	shutdown  func() // stops the server; called once by Close
	closing   chan struct{}
	closeOnce sync.Once
	conns     atomic.Int64 // last ConnID handed out

	mu       sync.Mutex
	script   func(n int, r *http.Request) Step
	reqs     []Request
	closed   bool
	handlers sync.WaitGroup // running handlers; Add only while !closed
}

// NewUpstream starts a loopback HTTP/1.1 server (httptest.NewServer) that
// plays steps in order, one per request, and repeats the last step after
// that; with no steps every request gets 200 OK. It is
// NewUpstreamFunc(t, Sequence(steps...)).
//
// If t is not nil, Close is registered with t.Cleanup; otherwise the caller
// must call Close.
//
// Do not use it inside a testing/synctest bubble: a goroutine blocked on a
// real socket is not durably blocked, so the bubble's clock stops while any
// connection is open (even an idle keep-alive connection) and client
// timeouts never fire. Use [NewPipeUpstream] there.
func NewUpstream(t testing.TB, steps ...Step) *Upstream {
	if t != nil {
		t.Helper()
	}
	return NewUpstreamFunc(t, Sequence(steps...))
}

// NewUpstreamFunc is like [NewUpstream] but asks fn for the step of each
// request. fn gets the request number n (from 1) and the request, whose body
// it may read again. fn may be called concurrently and must not block.
func NewUpstreamFunc(t testing.TB, fn func(n int, r *http.Request) Step) *Upstream {
	if t != nil {
		t.Helper()
	}
	u := newUpstream(fn)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	srv.Config.ConnContext = u.connContext
	srv.Start()
	u.URL = srv.URL
	u.client = srv.Client()
	u.transport = u.client.Transport.(*http.Transport)
	u.shutdown = func() {
		// Connections still reading a request body would make srv.Close
		// wait for them; the upstream is going away, so drop them.
		srv.CloseClientConnections()
		srv.Close() // also closes the client's idle connections
	}
	if t != nil {
		t.Cleanup(u.Close)
	}
	return u
}

func newUpstream(fn func(n int, r *http.Request) Step) *Upstream {
	if fn == nil {
		panic("breakwatertest: nil script")
	}
	return &Upstream{script: fn, closing: make(chan struct{})}
}

// Client returns an *http.Client whose Transport is [Upstream.Transport].
// It has no timeout and follows redirects as http.Client does by default.
func (u *Upstream) Client() *http.Client { return u.client }

// Transport returns the transport that reaches this upstream. For
// [NewUpstream] it is the httptest server's client transport (a zero
// http.Transport: no proxy, no idle timeout, two idle connections per
// host); for [NewPipeUpstream] it is configured the same way but dials the
// in-memory network. It is not shared with http.DefaultTransport, and
// [Upstream.Close] closes its idle connections.
func (u *Upstream) Transport() *http.Transport { return u.transport }

// SetFunc replaces the script; requests that arrive later are answered by fn
// with their upstream request numbers. Requests already being answered keep
// their step. Use [Sequence] to script a new phase as a list of steps.
func (u *Upstream) SetFunc(fn func(n int, r *http.Request) Step) {
	if fn == nil {
		panic("breakwatertest: nil script")
	}
	u.mu.Lock()
	u.script = fn
	u.mu.Unlock()
}

// Requests returns a copy of the requests received so far, ordered by
// [Request.N]. Requests whose body has not been read completely are not
// included.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Request, len(u.reqs))
	for i, r := range u.reqs {
		r.Header = r.Header.Clone()
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Count returns the number of requests received so far.
func (u *Upstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// Close shuts the upstream down: hanging and delayed handlers drop their
// connections, every connection is closed, the server stops, the client's
// idle connections are closed, and Close waits for the handlers to return.
// Requests sent afterwards fail. Close is idempotent.
func (u *Upstream) Close() {
	u.closeOnce.Do(func() {
		u.mu.Lock()
		u.closed = true
		u.mu.Unlock()
		close(u.closing)
		u.shutdown()
		u.transport.CloseIdleConnections()
		u.handlers.Wait()
	})
}

type connIDKey struct{}

// connContext numbers connections for Request.ConnID.
func (u *Upstream) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connIDKey{}, int(u.conns.Add(1)))
}

// enter registers a running handler; it reports false once Close started.
func (u *Upstream) enter() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.handlers.Add(1)
	return true
}

// serve is the upstream's http.Handler.
func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	if !u.enter() {
		dropConn(w, false)
		return
	}
	defer u.handlers.Done()

	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-body: nothing to answer
	}
	connID, _ := r.Context().Value(connIDKey{}).(int)
	u.mu.Lock()
	n := len(u.reqs) + 1
	u.reqs = append(u.reqs, Request{
		N:      n,
		Method: r.Method,
		Host:   r.Host,
		Path:   r.URL.Path,
		Header: r.Header.Clone(),
		Body:   body,
		ConnID: connID,
		At:     at,
	})
	script := u.script
	u.mu.Unlock()

	r.Body = io.NopCloser(bytes.NewReader(body))
	u.play(w, r, script(n, r))
}

// waitResult says how a wait inside a step ended.
type waitResult int

const (
	waited     waitResult = iota // the duration passed
	clientGone                   // the request's context ended
	upClosed                     // the upstream is closing
)

// wait sleeps for d unless the client goes away or the upstream closes.
func (u *Upstream) wait(ctx context.Context, d time.Duration) waitResult {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return waited
	case <-ctx.Done():
		return clientGone
	case <-u.closing:
		return upClosed
	}
}

// play writes the response described by s.
func (u *Upstream) play(w http.ResponseWriter, r *http.Request, s Step) {
	ctx := r.Context()
	if !validStatus(s.Status) {
		s = Step{Status: http.StatusInternalServerError, Body: fmt.Appendf(nil,
			"breakwatertest: the script returned a step with status %d, outside 200-599\n", s.Status)}
	}
	if s.Delay > 0 {
		switch u.wait(ctx, s.Delay) {
		case clientGone:
			return
		case upClosed:
			dropConn(w, false)
			return
		}
	}
	if s.Hang {
		select {
		case <-ctx.Done():
		case <-u.closing:
			dropConn(w, false)
		}
		return
	}
	if s.ResetBeforeHeaders {
		dropConn(w, true)
		return
	}

	status := s.status()
	body := s.body()
	length := len(body)
	if s.ResetMidBody {
		length = max(length, 1)
		body = body[:len(body)/2]
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if bodyAllowed(status) {
		h.Set("Content-Length", strconv.Itoa(length))
	}
	for k, vs := range s.Header {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	w.WriteHeader(status)
	if !bodyAllowed(status) || r.Method == http.MethodHead {
		body = nil
	}

	rc := http.NewResponseController(w)
	switch {
	case s.ResetMidBody:
		_, _ = w.Write(body)
		_ = rc.Flush()
		dropConn(w, true)
	case s.SlowBody > 0:
		if rc.Flush() != nil {
			return
		}
		chunk := s.ChunkSize
		if chunk <= 0 {
			chunk = DefaultChunkSize
		}
		for len(body) > 0 {
			switch u.wait(ctx, s.SlowBody) {
			case clientGone:
				return
			case upClosed:
				dropConn(w, false)
				return
			}
			c := body[:min(chunk, len(body))]
			body = body[len(c):]
			if _, err := w.Write(c); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	default:
		_, _ = w.Write(body)
	}
}

// dropConn takes the connection over and closes it. With reset set, a TCP
// connection is closed with SO_LINGER 0 so that the peer gets an RST.
func dropConn(w http.ResponseWriter, reset bool) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable: let net/http abort the connection.
		panic(http.ErrAbortHandler)
	}
	if buf != nil {
		_ = buf.Flush()
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// validStatus reports whether a Step may have this Status.
func validStatus(code int) bool { return code == 0 || code >= 200 && code <= 599 }

// bodyAllowed reports whether a response with this status may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// statusText is http.StatusText, with a fallback for unknown codes.
func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return text
	}
	return "status code " + strconv.Itoa(code)
}
