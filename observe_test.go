package breakwater_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []bw.Event
}

func (r *recorder) Observe(_ context.Context, e bw.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) kinds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		s := e.Kind.String()
		switch e.Kind {
		case bw.EventAttempt:
			s += fmt.Sprintf("(%d,%s)", e.Attempt, e.Category)
		case bw.EventTransition:
			s += fmt.Sprintf("(%s>%s)", e.Transition.From, e.Transition.To)
		case bw.EventReject:
			s += "(" + string(e.Mechanism) + ")"
		case bw.EventCallEnd:
			s += fmt.Sprintf("(%d,%s)", e.Attempts, e.Category)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestEventOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		rec := &recorder{}
		tr := newTransport(t, u.Transport(), bw.WithObserver(rec), bw.WithoutRetryBudget(),
			bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(1, 1))
		get(tr) // fails three times, then opens the breaker
		get(tr) // rejected
		time.Sleep(time.Minute)
		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{}))
		get(tr) // probe succeeds
		want := "call_start attempt(1,server_error) retry attempt(2,server_error) retry attempt(3,server_error) transition(closed>open) call_end(3,server_error) " +
			"call_start reject(breaker) call_end(0,rejected) " +
			"call_start transition(open>half_open) attempt(1,success) transition(half_open>closed) call_end(1,success)"
		if got := rec.kinds(); got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
		var retries []int
		for _, e := range rec.events {
			if e.Kind == bw.EventCallEnd {
				retries = append(retries, e.Retries)
			}
		}
		if fmt.Sprint(retries) != "[2 0 0]" {
			t.Fatalf("retries of the three calls: %v, want [2 0 0]", retries)
		}
	})
}

func TestPanickingObserverDoesNotBreakCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithObserver(bw.ObserverFunc(func(context.Context, bw.Event) { panic("observer bug") })))
		if r := get(tr); r.err != nil || r.status != 200 {
			t.Fatalf("%+v", r)
		}
	})
}

func TestObserversCompose(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	tr, err := bw.NewTransport(bw.WithBase(okBase), bw.WithObserver(a), bw.WithObserver(nil), bw.WithObserver(b))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://a.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(a.events) == 0 || len(a.events) != len(b.events) {
		t.Fatalf("observers got %d and %d events: every one must get every event", len(a.events), len(b.events))
	}
}

func TestWaitEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"3"}}}, breakwatertest.Step{})
		rec := &recorder{}
		tr := newTransport(t, u.Transport(), bw.WithObserver(rec), bw.WithMaxAttempts(1))
		get(tr) // pauses the key for 3 s
		if r := get(tr); r.status != 200 {
			t.Fatalf("%+v", r)
		}
		var waits []bw.Event
		for _, e := range rec.events {
			if e.Kind == bw.EventWait {
				waits = append(waits, e)
			}
		}
		if len(waits) != 1 || waits[0].Mechanism != bw.MechPause || waits[0].Duration != 3*time.Second || waits[0].Key != upstreamKey {
			t.Fatalf("wait events %+v, want one 3s pause", waits)
		}
	})
}

// A registry shared by two transports reports each transition once, to
// the observer given to the registry.
func TestSharedBreakersReportTransitionsOnce(t *testing.T) {
	rec := &recorder{}
	bs := newBreakers(t, bw.WithObserver(rec))
	a := newTransport(t, nil, bw.WithBreakers(bs), bw.WithObserver(rec))
	newTransport(t, nil, bw.WithBreakers(bs), bw.WithObserver(rec))
	a.Breakers().Get("k").Trip(time.Minute)
	if got := rec.kinds(); got != "transition(closed>open)" {
		t.Fatalf("events %q, want one transition", got)
	}
}

// TestLogObserverLogsEjections: an ejection is logged at Warn, a return at
// Info, each with the endpoint and the reason.
func TestLogObserverLogsEjections(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	l := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	o := bw.LogObserver(l, 0)
	o.Observe(context.Background(), bw.Event{Kind: bw.EventHealth, Key: "svc", Endpoint: "http://a", Health: bw.HealthEjected, Reason: bw.ReasonOutlier})
	o.Observe(context.Background(), bw.Event{Kind: bw.EventHealth, Key: "svc", Endpoint: "http://a", Health: bw.HealthHealthy, Reason: bw.ReasonProbesSucceeded})
	want := `level=WARN msg="breakwater: endpoint ejected" key=svc endpoint=http://a reason=outlier
level=INFO msg="breakwater: endpoint back" key=svc endpoint=http://a reason=probes_succeeded
`
	if buf.String() != want {
		t.Fatalf("logged:\n%s\nwant:\n%s", buf.String(), want)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCallEndsWithItsBody: a call that returns a response ends, for its
// observers, when the response body is closed or read to EOF, not when
// RoundTrip returns: in-flight counts and call durations cover the body.
func TestCallEndsWithItsBody(t *testing.T) {
	for _, how := range []string{"close", "eof"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: 4 << 10, SlowBody: 100 * time.Millisecond, ChunkSize: 1 << 10})
				rec := &recorder{}
				tr := newTransport(t, u.Transport(), bw.WithObserver(rec))
				req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if got := rec.kinds(); got != "call_start attempt(1,success)" {
					t.Fatalf("events when RoundTrip returned: %s, want the call still going", got)
				}
				if how == "close" {
					time.Sleep(250 * time.Millisecond)
					resp.Body.Close()
				} else {
					if _, err := io.Copy(io.Discard, resp.Body); err != nil {
						t.Fatal(err)
					}
				}
				if got := rec.kinds(); got != "call_start attempt(1,success) call_end(1,success)" {
					t.Fatalf("events after the body ended: %s", got)
				}
				resp.Body.Close() // no second end
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if n := len(rec.events); n != 3 {
					t.Fatalf("%d events, want 3", n)
				}
				if d := rec.events[2].Duration; d < 250*time.Millisecond {
					t.Errorf("call duration %s, want it to cover the body (≥ 250ms)", d)
				}
			})
		})
	}
}

// Events measure durations on the Transport's clock, whatever time it had
// run before the call: an attempt from its start to its answer; a call
// that fails from its start to its last attempt's end, or to the caller's
// cancel when it gave up waiting; a call refused at once lasts 0; a call
// that returns a response lasts until its body is closed.
func TestEventDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		durations := func(kind bw.EventKind) []time.Duration {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var out []time.Duration
			for _, e := range rec.events {
				if e.Kind == kind {
					out = append(out, e.Duration)
				}
			}
			return out
		}
		reset := func() { rec.mu.Lock(); rec.events = nil; rec.mu.Unlock() }
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 100 * time.Millisecond, ResetBeforeHeaders: true})
		tr := newTransport(t, u.Transport(), bw.WithObserver(rec), bw.WithoutRetryBudget(), bw.WithMaxAttempts(2),
			bw.WithBackoff(bw.Constant(50*time.Millisecond)), bw.WithPolicy(bw.Consecutive(1)))
		time.Sleep(time.Second) // the Transport's clock is at 1 s when the calls start

		get(tr) // two resets: 0-100 ms, a wait of 50 ms, 150-250 ms
		if a, c := durations(bw.EventAttempt), durations(bw.EventCallEnd); fmt.Sprint(a, c) != "[100ms 100ms] [250ms]" {
			t.Fatalf("a failing call: attempts %v, call %v; want [100ms 100ms] [250ms]", a, c)
		}
		reset()
		get(tr) // refused at once: the breaker opened
		if c := durations(bw.EventCallEnd); fmt.Sprint(c) != "[0s]" {
			t.Fatalf("a refused call: %v, want [0s]", c)
		}
		reset()

		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{Delay: 100 * time.Millisecond, Status: 503}))
		tr = newTransport(t, u.Transport(), bw.WithObserver(rec), bw.WithoutRetryBudget(), bw.WithMaxAttempts(2),
			bw.WithBackoff(bw.Constant(time.Second)))
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(600*time.Millisecond, cancel) // during the wait after the first 503
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
		if r := do(tr, req); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("%+v, want Canceled", r)
		}
		if c := durations(bw.EventCallEnd); fmt.Sprint(c) != "[600ms]" {
			t.Fatalf("a call cancelled while waiting: %v, want [600ms]", c)
		}
		reset()

		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{Delay: 100 * time.Millisecond}))
		req, _ = http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		resp.Body.Close()
		if c := durations(bw.EventCallEnd); fmt.Sprint(c) != "[300ms]" {
			t.Fatalf("a call whose body closed 200 ms after its answer: %v, want [300ms]", c)
		}
	})
}

// A wait is reported when the admission waited at all, 50 µs or more: a
// call that queued for a slot which freed the same instant, or a ns under
// 50 µs later, reports none; one that waited 50 µs or 1 ms reports it.
func TestWaitEventsOnlyForWaits(t *testing.T) {
	for _, held := range []time.Duration{0, 50*time.Microsecond - 1, 50 * time.Microsecond, time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
			rec := &recorder{}
			tr := newTransport(t, u.Transport(), bw.WithObserver(rec),
				bw.WithConcurrencyLimit(1, bw.WithMaxQueue(1), bw.WithMaxWait(time.Second)))
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
			first, err := tr.RoundTrip(req) // holds the slot until its body is closed
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan result)
			go func() { done <- get(tr) }()
			synctest.Wait() // the second call queues for the slot
			time.Sleep(held)
			first.Body.Close()
			if r := <-done; r.status != 200 {
				t.Fatalf("%+v", r)
			}
			var waits []time.Duration
			for _, e := range rec.events {
				if e.Kind == bw.EventWait {
					waits = append(waits, e.Duration)
				}
			}
			want := "[]"
			if held >= 50*time.Microsecond {
				want = fmt.Sprint([]time.Duration{held})
			}
			if fmt.Sprint(waits) != want {
				t.Fatalf("slot held %s more: wait events %v, want %s", held, waits, want)
			}
		})
	}
}

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
