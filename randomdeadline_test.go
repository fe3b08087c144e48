package breakwater_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// deadlineSlack is how late a call may end after its deadline.
const deadlineSlack = 50 * time.Millisecond

// deadlineSeeds overrides how many random upstreams and configurations
// TestNoCallOutlivesItsDeadline tries (scripts/fuzz.sh raises it).
var deadlineSeeds = flag.Int("deadline.seeds", 0, "seeds TestNoCallOutlivesItsDeadline tries (0: a few)")

// hostileBehaviours are what a hostile upstream does with one request.
var hostileBehaviours = []string{
	"ok", "ok slow body", "500", "503", "503 retry-after", "429 retry-after", "503 stalled body",
	"hang", "stall in status line", "stall in headers", "stall in body", "reset before headers",
	"reset in body", "1xx flood", "1xx then ok", "101 upgrade", "101 bare",
}

// retryAfterValues are Retry-After values of every size and form.
var retryAfterValues = []string{
	"0", "1", "2", "25", "120", "3600", "86400", "999999999999", "-1", "1.5", "soon",
	"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 2000 00:00:00 GMT",
}

// hostileUpstream serves each request as a behaviour drawn from rng.
type hostileUpstream struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (h *hostileUpstream) pick() (string, string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hostileBehaviours[h.rng.IntN(len(hostileBehaviours))], retryAfterValues[h.rng.IntN(len(retryAfterValues))], h.rng.IntN(200)
}

// serve plays behaviours on one connection until it ends.
func (h *hostileUpstream) serve(c net.Conn, br *bufio.Reader) {
	hold := func() { io.Copy(io.Discard, c) } // until the client lets go
	for {
		if _, ok := readRequest(br); !ok {
			return
		}
		b, ra, n := h.pick()
		d := time.Duration(n) * time.Millisecond
		w := func(s string) bool { _, err := io.WriteString(c, s); return err == nil }
		switch b {
		case "ok":
			if !w("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n") {
				return
			}
		case "ok slow body":
			if !w("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n") {
				return
			}
			for range 10 {
				time.Sleep(d)
				if !w("x") {
					return
				}
			}
		case "500", "503":
			if !w("HTTP/1.1 " + b + " Failing\r\nContent-Length: 0\r\n\r\n") {
				return
			}
		case "503 retry-after", "429 retry-after":
			if !w("HTTP/1.1 " + b[:3] + " Busy\r\nRetry-After: " + ra + "\r\nContent-Length: 0\r\n\r\n") {
				return
			}
		case "503 stalled body":
			w("HTTP/1.1 503 Failing\r\nContent-Length: 100\r\n\r\nfirst bytes")
			hold()
			return
		case "hang":
			hold()
			return
		case "stall in status line":
			w("HTTP/1.1 20")
			hold()
			return
		case "stall in headers":
			w("HTTP/1.1 200 OK\r\nContent-Le")
			hold()
			return
		case "stall in body":
			w("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			hold()
			return
		case "reset before headers":
			return
		case "reset in body":
			w("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			return
		case "1xx flood", "1xx then ok":
			for i := 0; b == "1xx flood" || i < 5; i++ {
				if !w("HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n") {
					return
				}
				time.Sleep(d/10 + time.Millisecond)
			}
			if !w("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n") {
				return
			}
		case "101 upgrade":
			w("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
			hold()
			return
		case "101 bare":
			w("HTTP/1.1 101 Switching Protocols\r\n\r\n")
			hold()
			return
		}
	}
}

// No call ends later than its deadline (the call timeout, or the caller's
// own deadline when earlier) + 50 ms, response body included, whatever the
// upstream does: stalled bodies anywhere, Retry-After of any size, 1xx
// floods, unsolicited 101s, resets. Timeouts, attempts and the caller's
// deadline are drawn at random for each call.
func TestNoCallOutlivesItsDeadline(t *testing.T) {
	seeds := 20
	if raceEnabled || testing.Short() {
		seeds = 5
	}
	if *deadlineSeeds > 0 {
		seeds = *deadlineSeeds
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { deadlineRun(t, seed) })
		})
	}
}

func deadlineRun(t *testing.T, seed uint64) {
	up := &hostileUpstream{rng: rand.New(rand.NewPCG(seed, 1))}
	base := rawTransport(up.serve)
	defer base.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(seed, 2))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	callTimeout := ms(50, 3000)
	tr := newTransport(t, base,
		bw.WithCallTimeout(callTimeout),
		bw.WithAttemptTimeout(ms(10, int(callTimeout/time.Millisecond))),
		bw.WithMaxAttempts(1+rng.IntN(5)),
		bw.WithPolicy(bw.Window(1000, time.Minute)),
	)
	type plan struct {
		callerDeadline time.Duration // 0: none
		cancelAfter    time.Duration // 0: never
	}
	plans := make([]plan, 64)
	for i := range plans {
		if rng.IntN(3) == 0 {
			plans[i].callerDeadline = ms(1, 4000)
		}
		if rng.IntN(8) == 0 {
			plans[i].cancelAfter = ms(1, 2000)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < len(plans); i += 8 {
				p := plans[i]
				ctx, cancel := context.WithCancel(context.Background())
				deadline := callTimeout
				if p.callerDeadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), p.callerDeadline)
					deadline = min(deadline, p.callerDeadline)
				}
				if p.cancelAfter > 0 {
					time.AfterFunc(p.cancelAfter, cancel)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				returned := time.Since(start)
				outcome := "response"
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					outcome = fmt.Sprint(resp.StatusCode)
				}
				if err != nil {
					outcome = errorKind(err)
				}
				total := time.Since(start)
				cancel()
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
				if total > deadline+deadlineSlack {
					t.Errorf("call %d (call timeout %s, caller deadline %s) ended after %s (RoundTrip returned after %s): %s",
						i, callTimeout, p.callerDeadline, total, returned, outcome)
				}
			}
		})
	}
	wg.Wait()
	// Every connection is closed or idle now: close the idle ones and let
	// the upstream see it. A connection the transport leaked keeps its
	// server goroutine blocked, and synctest reports it as a deadlock.
	base.CloseIdleConnections()
	time.Sleep(time.Second)
	t.Logf("outcomes: %v", outcomes)
}

// errorKind names an error for a summary.
func errorKind(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 60 {
		s = s[i+2:]
	}
	return s
}
