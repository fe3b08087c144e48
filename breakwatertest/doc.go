// Package breakwatertest provides test doubles for code that calls HTTP
// services: a scripted, flaky upstream server and a fault-injecting
// http.RoundTripper. It imports only the standard library, so any package's
// tests can use it, breakwater's own included.
//
// # Scripted upstreams
//
// An [Upstream] answers each request with a [Step]: a status, headers and a
// body, optionally delayed, paced, hung, or cut off by a dropped connection.
// [NewUpstream] plays a fixed list of steps; [NewUpstreamFunc] asks a
// function, and [Upstream.SetFunc] switches scripts while the upstream runs.
// Every request is recorded ([Upstream.Requests]) with its body and the
// connection it came on, so a test can check what was retried, what was
// replayed and which connections were reused. Mind that net/http's
// Transport itself replays an idempotent request once when a reused
// connection breaks before the response starts (see
// [Step.ResetBeforeHeaders]).
//
//	u := breakwatertest.NewUpstream(t,
//		breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"1"}}},
//		breakwatertest.Step{Status: 200, Body: []byte("ok")},
//	)
//	resp, err := u.Client().Get(u.URL + "/thing")
//
// # Virtual time
//
// testing/synctest runs a test in a bubble with a fake clock that advances
// only when every goroutine of the bubble is durably blocked: on a channel
// of the bubble, a sync.Cond, a WaitGroup or time.Sleep. A goroutine blocked
// reading a real socket is not durably blocked, because the network could
// wake it. This has two consequences for HTTP tests:
//
//   - A loopback server started inside a bubble ([NewUpstream],
//     httptest.NewServer) stops the bubble's clock for good: its accept loop
//     waits on a socket, so the first time.Sleep or timer of the test never
//     fires and the test hangs.
//   - A client inside a bubble talking to a loopback server outside it stops
//     the clock for as long as any of its connections is open, idle
//     keep-alive connections included: a client timeout does not fire, and
//     a request answered after a real delay succeeds with no virtual time
//     elapsed. The test passes or hangs for the wrong reasons.
//
// [NewPipeUpstream] avoids both: it runs the same handler with net/http's
// own client and server over net.Pipe connections, which are built from
// channels, so every goroutine involved is durably blocked while it waits.
// Create it inside the bubble and send requests through
// [Upstream.Transport] or [Upstream.Client] (directly, or as the base of
// the transport under test):
//
//	synctest.Test(t, func(t *testing.T) {
//		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 5 * time.Second})
//		start := time.Now()
//		resp, err := u.Client().Get(u.URL)
//		// ...
//		// time.Since(start) == 5*time.Second exactly; the test takes
//		// microseconds of real time.
//	})
//
// Close (registered with t.Cleanup) ends every goroutine the pipe upstream
// and its transport started, so the bubble exits cleanly; a response body
// left open by the code under test makes synctest.Test report a deadlock.
// Use [NewUpstream] for end-to-end tests on the real clock, where real
// sockets, TCP resets and the kernel's behaviour are part of what is
// tested.
//
// # Fault injection
//
// [FaultTransport] wraps any RoundTripper and, at random but reproducibly
// from a seed, answers with a synthetic status, fails with an error, or
// adds latency (which honours the request's context and runs on the
// bubble's clock under synctest).
package breakwatertest
