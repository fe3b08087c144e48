package breakwater_test

// Strict limiters: an upstream that admits one request per interval and
// answers 429 to every other, with no burst, as nginx's limit_req without
// a burst does. The defaults must find its rate from its answers alone.
// Each test logs its figures (go test -v -run TestStrictLimiter).

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

// strictFigures are what a strict limiter answered.
type strictFigures struct {
	ok, throttled int
	took          time.Duration
	inHint        int // requests that arrived before a 429's hint had ended
}

// runStrict sends 100 calls from 4 goroutines to an upstream admitting
// one request per every (no burst), whose 429s carry header.
func runStrict(t *testing.T, every time.Duration, header func(wait time.Duration) http.Header, wrap func(http.RoundTripper) http.RoundTripper) strictFigures {
	start := time.Now()
	var (
		mu       sync.Mutex
		last     time.Time // the last request admitted
		hintFrom time.Time // when the latest hint was sent
		hintEnds time.Time // and when it ends
		f        strictFigures
	)
	u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if now.After(hintFrom) && now.Before(hintEnds) {
			f.inHint++
		}
		if last.IsZero() || now.Sub(last) >= every {
			last = now
			return breakwatertest.Step{}
		}
		f.throttled++
		h := header(last.Add(every).Sub(now))
		hintFrom, hintEnds = now, now.Add(time.Second) // what the hints below ask for
		return breakwatertest.Step{Status: http.StatusTooManyRequests, Header: h}
	})
	rt := wrap(u.Transport())
	var n atomic.Int32
	calls := make(chan struct{}, 100)
	for range 100 {
		calls <- struct{}{}
	}
	close(calls)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range calls {
				if r := get(rt); r.status == 200 {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	f.ok, f.took = int(n.Load()), time.Since(start)
	return f
}

// The hint forms a strict limiter sends: nginx's Retry-After, and the
// structured RateLimit field with nothing left until the next second.
var strictHints = []struct {
	name   string
	header func(time.Duration) http.Header
}{
	{"Retry-After", func(time.Duration) http.Header { return http.Header{"Retry-After": {"1"}} }},
	{"RateLimit", func(time.Duration) http.Header {
		return http.Header{"Ratelimit": {`"default";r=0;t=1`}}
	}},
}

// A strict limiter of 10/s without a burst: the default Transport learns
// its rate from the 429s, gets at least 95 of 100 calls through within
// 15 s at most 0.1 429s per success, and never sends a request inside a
// hint. (A client told the rate takes 10 s; one that learns it from
// answers alone pays a 1 s pause for each 429 it needs to find it: the
// first burst's, the slow start's overshoot and the climb's.)
func TestStrictLimiter(t *testing.T) {
	for _, h := range strictHints {
		t.Run(h.name, func(t *testing.T) {
			var b strictFigures
			synctest.Test(t, func(t *testing.T) { b = runStrict(t, 100*time.Millisecond, h.header, bare) })
			synctest.Test(t, func(t *testing.T) {
				f := runStrict(t, 100*time.Millisecond, h.header, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
				perOK := float64(f.throttled) / float64(max(f.ok, 1))
				t.Logf("strict 10/s, %s: %d/100 ok in %s, %d 429s (%.2f per ok call), %d requests inside a hint; bare client %d/100 ok",
					h.name, f.ok, f.took.Round(time.Millisecond), f.throttled, perOK, f.inHint, b.ok)
				if f.ok < 95 || f.took > 15*time.Second {
					t.Errorf("%d/100 ok in %s, want at least 95 within 15s", f.ok, f.took)
				}
				if perOK > 0.1 {
					t.Errorf("%.2f 429s per ok call, want at most 0.1", perOK)
				}
				if f.inHint != 0 {
					t.Errorf("%d requests inside a hint", f.inHint)
				}
			})
		})
	}
}
