package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// quotaRun is what one run of runQuota measured.
type quotaRun struct {
	ok, throttled, circuitOpen int
	paused, deadline, otherErr int // calls refused by a pause, out of time, or failed otherwise
	capacity                   int // what the quota admitted from the start to the last admission
}

func (r quotaRun) used() float64  { return float64(r.ok) / float64(r.capacity) }
func (r quotaRun) perOK() float64 { return float64(r.throttled) / max(1, float64(r.ok)) }
func (r quotaRun) String() string {
	return fmt.Sprintf("%d calls ok of a quota of %d (%.1f %% used), %d 429s (%.3f per ok call), %d refused breaker open, %d refused paused, %d out of time, %d other errors",
		r.ok, r.capacity, 100*r.used(), r.throttled, r.perOK(), r.circuitOpen, r.paused, r.deadline, r.otherErr)
}

// runQuota runs three replicas, each a default Transport on a Store of its
// own (with one bus for its breakers and pause gate when shared), calling
// 20 times a second for d an upstream that admits 30 requests a second
// across all of them (ClientRateLimit, burst 30) and answers 429 with
// Retry-After: 1 beyond that, with RateLimit-Policy and RateLimit fields
// on every answer. Every call ends by the end of the run.
//
// The quota used is measured against what the upstream's bucket admits
// from the start to the last request it admitted: the replicas pause for
// whole seconds (the upstream's Retry-After and RateLimit reset), so a
// run's end falls in a pause as often as not, and the quota that accrues
// after the last admission, which calls out of time cannot use, says
// nothing of the replicas.
func runQuota(t *testing.T, shared bool, d time.Duration) quotaRun {
	const limit, burst = 30, 30
	srv := redistest.New(t)
	var start time.Time
	rl, err := bw.NewRateLimiters(limit, burst)
	if err != nil {
		t.Fatal(err)
	}
	quota, err := bw.ClientRateLimit(rl, func(*http.Request) string { return "everyone" })
	if err != nil {
		t.Fatal(err)
	}
	var throttled atomic.Int32
	var last atomic.Int64 // when the upstream last admitted a request, in ns since start
	upstream := httptest.NewServer(quota(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		last.Store(int64(time.Since(start)))
	})))
	defer upstream.Close()
	counted := &countingTransport{next: upstream.Client().Transport, throttled: &throttled}

	clients := make([]*http.Client, 3)
	for i := range clients {
		opts := []bw.Option{bw.WithBase(counted)}
		if shared {
			store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
			bus, err := store.Bus("transport")
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, bw.WithClusterBus(bus))
		}
		tr, err := bw.NewTransport(opts...)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	if shared {
		waitSubscribers(t, srv.Addr, "breakwater:bus:transport", 6) // breakers and gates of 3
	}

	var (
		mu  sync.Mutex
		run quotaRun
		wg  sync.WaitGroup
	)
	start = time.Now()
	end := start.Add(d)
	for _, c := range clients {
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for now := time.Now(); now.Before(end); now = <-tick.C {
				wg.Go(func() {
					deadline := now.Add(2 * time.Second)
					if deadline.After(end) {
						deadline = end
					}
					ctx, cancel := context.WithDeadline(context.Background(), deadline)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
					resp, err := c.Do(req)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, bw.ErrCircuitOpen):
						run.circuitOpen++
					case errors.Is(err, bw.ErrPaused):
						run.paused++
					case errors.Is(err, context.DeadlineExceeded):
						run.deadline++
					case err != nil:
						run.otherErr++
					case resp.StatusCode == http.StatusOK:
						run.ok++
					}
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		})
	}
	wg.Wait()
	run.throttled = int(throttled.Load())
	run.capacity = burst + int(limit*time.Duration(last.Load()).Seconds())
	return run
}

// countingTransport counts the 429s the upstream sent.
type countingTransport struct {
	next      http.RoundTripper
	throttled *atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.throttled.Add(1)
	}
	return resp, err
}

// TestClaimBusQuota: three replicas sharing one bus for their breakers and
// pause gates, against a quota smaller than what they ask for: the 429s
// and spent quotas one replica sees pause the others, and never open a
// breaker, so no call is refused "breaker open" and the quota is used as
// well as by replicas that share nothing.
func TestClaimBusQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 12 s")
	}
	const d = 6 * time.Second
	local := runQuota(t, false, d)
	t.Logf("without the bus: %v", local)
	shared := runQuota(t, true, d)
	t.Logf("with the bus:    %v", shared)
	if local.used() < 0.95 || local.perOK() > 0.1 {
		t.Errorf("without the bus, %.1f %% of the quota used with %.3f 429s per ok call, want at least 95 %% and at most 0.1", 100*local.used(), local.perOK())
	}
	if shared.circuitOpen != 0 {
		t.Errorf("with the bus, %d calls refused breaker open, want 0", shared.circuitOpen)
	}
	if shared.used() < 0.95 || shared.perOK() > 0.05 {
		t.Errorf("with the bus, %.1f %% of the quota used with %.3f 429s per ok call, want at least 95 %% and at most 0.05", 100*shared.used(), shared.perOK())
	}
}
