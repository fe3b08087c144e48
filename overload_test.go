package breakwater_test

// Metastable overload: an upstream of 4 workers behind a FIFO queue of up
// to 800 requests, which works every request it took, whether its caller
// waits or not. Its figures are logged (go test -v -run TestOverload).

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// queuedUpstream is the overloaded upstream, as a RoundTripper: work(at)
// is how long a request taken at at keeps a worker.
type queuedUpstream struct {
	jobs chan chan struct{}
	work func(time.Time) time.Duration
}

func newQueuedUpstream(t *testing.T, workers int, work func(time.Time) time.Duration) *queuedUpstream {
	u := &queuedUpstream{jobs: make(chan chan struct{}, 800), work: work}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := range u.jobs {
				time.Sleep(u.work(time.Now()))
				close(done)
			}
		})
	}
	t.Cleanup(func() { close(u.jobs); wg.Wait() })
	return u
}

func (u *queuedUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	done := make(chan struct{})
	select {
	case u.jobs <- done:
	default:
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Request: req}, nil
	}
	select {
	case <-done:
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err() // the upstream works on it still
	}
}

// overloadRun is what a run delivered: per 100 ms, the calls sent then
// that succeeded.
type overloadRun struct {
	ok, sent [60]int
}

// measureOverloadRecovery offers 280 calls/s for 6 s, each with a 500 ms
// deadline, to 4 workers of 10 ms (400/s) whose work takes 30 ms from 1 s
// to 3 s.
func measureOverloadRecovery(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) overloadRun {
	start := time.Now()
	u := newQueuedUpstream(t, 4, func(at time.Time) time.Duration {
		if d := at.Sub(start); d >= time.Second && d < 3*time.Second {
			return 30 * time.Millisecond
		}
		return 10 * time.Millisecond
	})
	rt := wrap(u)
	var mu sync.Mutex
	var r overloadRun
	var wg sync.WaitGroup
	for range 6 * 280 {
		slot := int(time.Since(start) / (100 * time.Millisecond))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
			res := do(rt, req)
			mu.Lock()
			r.sent[slot]++
			if res.err == nil && res.status == http.StatusOK {
				r.ok[slot]++
			}
			mu.Unlock()
		})
		time.Sleep(time.Second / 280)
	}
	wg.Wait()
	return r
}

// goodput is the calls sent in [from, to) that succeeded, per second.
func (r overloadRun) goodput(from, to time.Duration) float64 {
	ok := 0
	for s := int(from / (100 * time.Millisecond)); s < int(to/(100*time.Millisecond)); s++ {
		ok += r.ok[s]
	}
	return float64(ok) / (to - from).Seconds()
}

// recovered is how long after the trigger's end (3 s) the calls sent
// succeed again within 10 % of those offered, for the rest of the run.
func (r overloadRun) recovered() time.Duration {
	last := 30
	for s := 59; s >= 30; s-- {
		if float64(r.ok[s]) < 0.9*float64(r.sent[s]) {
			last = s + 1
			break
		}
	}
	return time.Duration(last-30) * 100 * time.Millisecond
}

// A metastable overload: the defaults deliver at least what a bare client
// does while capacity is a third, and come back as fast; an adaptive
// concurrency limit that does not queue (WithConcurrencyLimit with
// WithAdaptiveLimit(Gradient{}) and WithMaxWait(0)) keeps the goodput near
// the reduced capacity and is back at once.
func TestOverloadRecovery(t *testing.T) {
	var bare, def, adaptive overloadRun
	synctest.Test(t, func(t *testing.T) {
		bare = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper { return rt })
	})
	synctest.Test(t, func(t *testing.T) {
		def = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
	})
	synctest.Test(t, func(t *testing.T) {
		adaptive = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper {
			return newTransport(t, rt, bw.WithConcurrencyLimit(8, bw.WithAdaptiveLimit(bw.Gradient{}), bw.WithMaxWait(0)))
		})
	})
	during := func(r overloadRun) float64 { return r.goodput(time.Second, 3*time.Second) }
	t.Logf("overload, a third of the capacity (133/s) for 2 s: ok calls/s during it, and how soon after it calls succeed within 10 %% of offered: bare %.0f, %s; defaults %.0f, %s; adaptive limit %.0f, %s",
		during(bare), bare.recovered(), during(def), def.recovered(), during(adaptive), adaptive.recovered())
	if during(def) < during(bare)*0.95 || def.recovered() > bare.recovered()+200*time.Millisecond {
		t.Errorf("defaults: %.0f ok calls/s during, back %s after; want at least the bare client's %.0f and %s", during(def), def.recovered(), during(bare), bare.recovered())
	}
	if during(adaptive) < 100 || adaptive.recovered() > time.Second {
		t.Errorf("adaptive limit: %.0f ok calls/s during, back %s after; want at least 100 and within 1s", during(adaptive), adaptive.recovered())
	}
}
