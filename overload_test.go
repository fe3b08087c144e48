package breakwater_test

// Metastable overload: an upstream of 4 workers behind a FIFO queue of up
// to 800 requests, which works every request it took, whether its caller
// waits or not. Its figures are logged (go test -v -run TestOverload).

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// queuedUpstream is the overloaded upstream, as a RoundTripper: work(at)
// is how long a request taken at at keeps a worker.
type queuedUpstream struct {
	jobs  chan chan struct{}
	work  func(time.Time) time.Duration
	start time.Time
	reqs  [60]atomic.Int64 // requests received, per 100 ms from start
}

func newQueuedUpstream(t *testing.T, workers int, work func(time.Time) time.Duration) *queuedUpstream {
	u := &queuedUpstream{jobs: make(chan chan struct{}, 800), work: work, start: time.Now()}
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
	if s := int(time.Since(u.start) / (100 * time.Millisecond)); s < len(u.reqs) {
		u.reqs[s].Add(1)
	}
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
	ok, sent, reqs [60]int
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
	for i := range r.reqs {
		r.reqs[i] = int(u.reqs[i].Load())
	}
	return r
}

// perCall is the upstream's requests per call sent in [from, to).
func (r overloadRun) perCall(from, to time.Duration) float64 {
	reqs, sent := 0, 0
	for s := int(from / (100 * time.Millisecond)); s < int(to/(100*time.Millisecond)); s++ {
		reqs, sent = reqs+r.reqs[s], sent+r.sent[s]
	}
	return float64(reqs) / float64(sent)
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

// A metastable overload: the defaults' congestion limit keeps the goodput
// near the reduced capacity, at about one request per call, and is back
// at once; without it, a Transport delivers what a bare client does and
// comes back as slowly. An adaptive bulkhead that does not queue
// (WithConcurrencyLimit with WithAdaptiveLimit(Gradient{}) and
// WithMaxWait(0)) does about as well as the default.
func TestOverloadRecovery(t *testing.T) {
	var bare, def, off, adaptive overloadRun
	synctest.Test(t, func(t *testing.T) {
		bare = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper { return rt })
	})
	synctest.Test(t, func(t *testing.T) {
		def = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
	})
	synctest.Test(t, func(t *testing.T) {
		off = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper {
			return newTransport(t, rt, bw.WithoutCongestionLimit())
		})
	})
	synctest.Test(t, func(t *testing.T) {
		adaptive = measureOverloadRecovery(t, func(rt http.RoundTripper) http.RoundTripper {
			return newTransport(t, rt, bw.WithoutCongestionLimit(), bw.WithConcurrencyLimit(8, bw.WithAdaptiveLimit(bw.Gradient{}), bw.WithMaxWait(0)))
		})
	})
	during := func(r overloadRun) float64 { return r.goodput(time.Second, 3*time.Second) }
	perCall := func(r overloadRun) float64 { return r.perCall(time.Second, 3*time.Second) }
	t.Logf("overload, a third of the capacity (133/s) for 2 s: ok calls/s during it, upstream requests per call sent during it, and how soon after it calls succeed within 10 %% of offered: "+
		"bare %.0f, %.2f, %s; defaults %.0f, %.2f, %s; WithoutCongestionLimit %.0f, %.2f, %s; adaptive bulkhead %.0f, %.2f, %s",
		during(bare), perCall(bare), bare.recovered(), during(def), perCall(def), def.recovered(),
		during(off), perCall(off), off.recovered(), during(adaptive), perCall(adaptive), adaptive.recovered())
	if during(def) < 100 || def.recovered() > time.Second || perCall(def) > 1.1 {
		t.Errorf("defaults: %.0f ok calls/s during, %.2f requests per call, back %s after; want at least 100, at most 1.1 and within 1s", during(def), perCall(def), def.recovered())
	}
	if during(off) < during(bare)*0.95 || off.recovered() > bare.recovered()+200*time.Millisecond {
		t.Errorf("WithoutCongestionLimit: %.0f ok calls/s during, back %s after; want at least the bare client's %.0f and %s", during(off), off.recovered(), during(bare), bare.recovered())
	}
	if during(adaptive) < 100 || adaptive.recovered() > time.Second {
		t.Errorf("adaptive bulkhead: %.0f ok calls/s during, back %s after; want at least 100 and within 1s", during(adaptive), adaptive.recovered())
	}
}

// lognormalUpstream answers the request numbered by its X-Call header
// after a latency drawn for that number, the same in every run: p50 20
// ms, p99 400 ms, and at most 9 s (under the default attempt timeout; one
// draw in about a million is longer).
type lognormalUpstream struct{ lat []time.Duration }

func newLognormalUpstream(n int, seed uint64) *lognormalUpstream {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	sigma := math.Log(400.0/20) / 2.3263 // p99 / p50 = exp(2.3263 σ)
	u := &lognormalUpstream{lat: make([]time.Duration, n)}
	for i := range u.lat {
		u.lat[i] = min(9*time.Second, time.Duration(20e6*math.Exp(sigma*rng.NormFloat64())))
	}
	return u
}

func (u *lognormalUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	i, _ := strconv.Atoi(req.Header.Get("X-Call"))
	select {
	case <-time.After(u.lat[i]):
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// measureLognormal offers rate calls/s for 60 s to a lognormalUpstream
// (drawn from seed) and returns each call's latency, or -1 for a call
// that failed.
func measureLognormal(rate int, seed uint64, wrap func(http.RoundTripper) http.RoundTripper) []time.Duration {
	n := 60 * rate
	rt := wrap(newLognormalUpstream(n, seed))
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
			req.Header.Set("X-Call", strconv.Itoa(i))
			start := time.Now()
			if res := do(rt, req); res.err != nil || res.status != http.StatusOK {
				took[i] = -1
				return
			}
			took[i] = time.Since(start)
		})
		time.Sleep(time.Second / time.Duration(rate))
	}
	wg.Wait()
	return took
}

// The congestion limit never engages on a healthy upstream whose latency
// varies widely (lognormal, p50 20 ms, p99 400 ms): at 100 and 400 calls/s
// for a minute, over several draws, no call is refused and the p99 is the
// bare client's.
func TestCongestionLimitSparesAVariableUpstream(t *testing.T) {
	p99 := func(took []time.Duration) time.Duration {
		s := slices.Clone(took)
		slices.Sort(s)
		return s[len(s)*99/100]
	}
	for _, run := range []struct {
		rate int
		seed uint64
	}{{100, 11}, {400, 11}, {100, 6}, {400, 6}, {400, 7}} {
		rate := run.rate
		var bare, def []time.Duration
		synctest.Test(t, func(t *testing.T) {
			bare = measureLognormal(rate, run.seed, func(rt http.RoundTripper) http.RoundTripper { return rt })
		})
		synctest.Test(t, func(t *testing.T) {
			def = measureLognormal(rate, run.seed, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
		})
		failed := 0
		for _, d := range def {
			if d < 0 {
				failed++
			}
		}
		t.Logf("%d calls/s to a lognormal upstream (draw %d) for 60 s: %d of %d calls failed, p99 %s (bare %s)", rate, run.seed, failed, len(def), p99(def), p99(bare))
		if failed > 0 || p99(def) > p99(bare)+p99(bare)/100 {
			t.Errorf("%d calls/s: %d calls failed, p99 %s; want none and within 1%% of the bare client's %s", rate, failed, p99(def), p99(bare))
		}
	}
}
