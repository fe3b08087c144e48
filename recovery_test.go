package breakwater_test

// Recovery: upstreams that come back must get their traffic back as fast
// as a bare http.Client gives it, without paying for it during the outage.
// Each test logs its figures (go test -v -run TestRecovery).

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// arrival is one call of an open-loop load: when it was sent and what it
// got.
type arrival struct {
	at time.Time
	r  result
}

// openLoop sends one call every interval for d, each with its own
// deadline, whatever the earlier ones are doing, and returns them in the
// order they were sent.
func openLoop(rt http.RoundTripper, interval, d, deadline time.Duration) []arrival {
	n := int(d / interval)
	out := make([]arrival, n)
	var wg sync.WaitGroup
	for i := range n {
		out[i].at = time.Now()
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			out[i].r, _ = send(ctx, rt, "upstream.test")
		})
		time.Sleep(interval)
	}
	wg.Wait()
	return out
}

// recoveryFigures are what an outage and its recovery cost and gave.
type recoveryFigures struct {
	after, afterOK   int           // calls sent after the recovery, and those that succeeded
	during           int           // requests the upstream saw during the outage
	firstOK          time.Duration // from the recovery to the first request answered 200; -1 none
	refusedOpen, all int
}

// measureRecovery runs item 1 of a recovery: the upstream answers 500 for
// outage, then 200 after 50 ms; a call every 20 ms for total, each with a
// 2 s deadline.
func measureRecovery(t *testing.T, outage, total time.Duration, wrap func(http.RoundTripper) http.RoundTripper) recoveryFigures {
	start := time.Now()
	recovery := start.Add(outage)
	u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
		if time.Now().Before(recovery) {
			return breakwatertest.Step{Status: 500}
		}
		return breakwatertest.Step{Delay: 50 * time.Millisecond}
	})
	calls := openLoop(wrap(u.Transport()), 20*time.Millisecond, total, 2*time.Second)
	f := recoveryFigures{firstOK: -1, all: len(calls)}
	for _, c := range calls {
		if errors.Is(c.r.err, bw.ErrCircuitOpen) {
			f.refusedOpen++
		}
		if c.at.Before(recovery) {
			continue
		}
		f.after++
		if c.r.status == 200 {
			f.afterOK++
		}
	}
	for _, r := range u.Requests() {
		switch {
		case r.At.Before(recovery):
			f.during++
		case f.firstOK < 0:
			f.firstOK = r.At.Sub(recovery)
		}
	}
	return f
}

func bare(rt http.RoundTripper) http.RoundTripper { return rt }

// An upstream down for 3 s comes back: the calls after it succeed as with
// a bare client, the first within 300 ms, and the outage costs at most a
// third of the requests a bare client sends.
func TestRecoveryAfterOutage(t *testing.T) {
	var b recoveryFigures
	synctest.Test(t, func(t *testing.T) { b = measureRecovery(t, 3*time.Second, 8*time.Second, bare) })
	synctest.Test(t, func(t *testing.T) {
		f := measureRecovery(t, 3*time.Second, 8*time.Second, func(rt http.RoundTripper) http.RoundTripper { return newTransport(t, rt) })
		t.Logf("recovery after a 3 s outage: %d/%d calls after it ok (bare %d/%d), first success %s after it (bare %s), %d requests during it (bare %d), %d calls refused open",
			f.afterOK, f.after, b.afterOK, b.after, f.firstOK, b.firstOK, f.during, b.during, f.refusedOpen)
		if f.afterOK < 245 || f.after != 250 {
			t.Errorf("%d/%d calls after the recovery succeeded, want at least 245/250", f.afterOK, f.after)
		}
		if f.firstOK < 0 || f.firstOK > 300*time.Millisecond {
			t.Errorf("the first success came %s after the recovery, want within 300ms", f.firstOK)
		}
		if f.during > 50 {
			t.Errorf("%d requests during the outage, want at most 50", f.during)
		}
	})
}
