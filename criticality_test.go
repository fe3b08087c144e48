package breakwater_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// fleetRequest is a request from a trusted caller with the given headers.
func fleetRequest(header ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "127.0.0.1:4000"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// A Shedder's queue grants its slot to the most critical first, first
// attempts before retries, and a full queue turns the least critical
// away to make room for a more critical request.
func TestShedderServesTheMostCriticalFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, _ := newShedder(t, 1, bw.WithMaxQueue(4))
		trust, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		h := trust(sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			order = append(order, r.Header.Get("X-Name"))
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		})))
		codes := map[string]int{}
		var wg sync.WaitGroup
		send := func(name string, header ...string) {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, fleetRequest(append([]string{"X-Name", name}, header...)...))
				mu.Lock()
				codes[name] = rec.Code
				mu.Unlock()
			})
			synctest.Wait()
		}
		send("first")
		send("default")
		send("sheddable", "Breakwater-Criticality", "sheddable")
		send("default retry", "Breakwater-Attempt", "2;max=3")
		send("sheddable 2", "Breakwater-Criticality", "sheddable")
		send("critical", "Breakwater-Criticality", "critical") // the queue is full: turns "sheddable 2" away
		send("sheddable 3", "Breakwater-Criticality", "sheddable")
		wg.Wait()
		want := []string{"first", "critical", "default", "default retry", "sheddable"}
		if !slices.Equal(order, want) {
			t.Errorf("served in the order %q, want %q", order, want)
		}
		if codes["sheddable 2"] != http.StatusServiceUnavailable || codes["sheddable 3"] != http.StatusServiceUnavailable {
			t.Errorf("the least critical: %d and %d, want both turned away (503)", codes["sheddable 2"], codes["sheddable 3"])
		}
	})
}

// With a queue target, a queue that has not emptied for an interval lets
// new requests wait at most the target.
func TestQueueTargetBoundsAStandingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, _ := newShedder(t, 1, bw.WithQueueTarget(5*time.Millisecond, 100*time.Millisecond))
		h := sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(10 * time.Millisecond) }))
		serveOne := func() (int, time.Duration) {
			start := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			return rec.Code, time.Since(start)
		}
		// Two requests every 10 ms for 300 ms: a queue that never empties.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var late []time.Duration // waits of the shed, after the first 100 ms
		start := time.Now()
		for range 30 {
			for range 2 {
				wg.Go(func() {
					at := time.Since(start)
					code, took := serveOne()
					if code == http.StatusServiceUnavailable && at > 150*time.Millisecond {
						mu.Lock()
						late = append(late, took)
						mu.Unlock()
					}
				})
			}
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		if len(late) == 0 {
			t.Fatal("nothing shed in a standing queue")
		}
		for _, d := range late {
			if d > 5*time.Millisecond {
				t.Fatalf("a request in a standing queue waited %s before being shed, want at most 5ms", d)
			}
		}
		if _, err := bw.NewBulkheads(1, bw.WithQueueTarget(10*time.Millisecond, time.Millisecond)); err == nil {
			t.Error("an interval shorter than the target: no error")
		}
	})
}

// In an overload of four times the workers' capacity, a fifth of it
// critical (0.8 of the capacity), the critical requests are served as if
// there were no overload, and the workers stay busy. (At 5x, the critical
// fifth alone is the whole capacity: a queue that keeps its workers busy
// serves a lesser request whenever a slot frees with no critical one
// waiting, and that slot is lost to the critical stream for good; the
// figures at 5x are logged, not asserted.)
func TestShedderCriticalThroughOverload(t *testing.T) {
	type served struct {
		critical bool
		code     int
		took     time.Duration
	}
	const workers, work, length = 4, 10 * time.Millisecond, 2 * time.Second // work: the mean
	run := func(perSecond int) (out []served, goodput float64) {
		sh, _ := newShedder(t, workers, bw.WithQueueTarget(5*time.Millisecond, 100*time.Millisecond))
		trust, err := bw.CallerHeaders("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var busy time.Duration
		start := time.Now()
		rnd := rand.New(rand.NewPCG(1, 2))
		h := trust(sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			d := work/2 + time.Duration(rnd.Int64N(int64(work))) // 5 to 15 ms: workers that do not move in step
			mu.Unlock()
			time.Sleep(d)
			mu.Lock()
			if time.Since(start) <= length {
				busy += d
			}
			mu.Unlock()
		})))
		var wg sync.WaitGroup
		for i := range int(length.Seconds() * float64(perSecond)) {
			critical := i%5 == 0
			wg.Go(func() {
				req := fleetRequest("Breakwater-Timeout-Ms", "1000")
				if critical {
					req.Header.Set("Breakwater-Criticality", "critical")
				}
				start := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				mu.Lock()
				out = append(out, served{critical, rec.Code, time.Since(start)})
				mu.Unlock()
			})
			time.Sleep(time.Second / time.Duration(perSecond))
		}
		wg.Wait()
		return out, busy.Seconds() / (workers * length.Seconds())
	}
	critical := func(ss []served) (p99 time.Duration, success float64) {
		var took []time.Duration
		ok := 0
		for _, s := range ss {
			if s.critical {
				took = append(took, s.took)
				if s.code == http.StatusOK {
					ok++
				}
			}
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		return took[len(took)*99/100], 100 * float64(ok) / float64(len(took))
	}
	capacity := int(workers * time.Second / work)
	synctest.Test(t, func(t *testing.T) {
		calm, _ := run(capacity / 2)
		calmP99, _ := critical(calm)
		five, fiveGood := run(5 * capacity)
		fiveP99, fiveOK := critical(five)
		four, goodput := run(4 * capacity)
		p99, success := critical(four)
		t.Logf("4x overload, a fifth critical: %.1f %% of critical calls ok, p99 %s (unloaded %s), workers busy %.0f %% of the time; at 5x: %.1f %%, p99 %s, busy %.0f %%",
			success, p99, calmP99, 100*goodput, fiveOK, fiveP99, 100*fiveGood)
		if success < 99.5 {
			t.Errorf("%.1f %% of critical calls succeeded, want at least 99.5 %%", success)
		}
		if p99 > calmP99*3/2 {
			t.Errorf("critical p99 %s, want at most 1.5 x the unloaded %s", p99, calmP99)
		}
		if goodput < 0.95 {
			t.Errorf("the workers were busy %.0f %% of the time, want at least 95 %%", 100*goodput)
		}
	})
}
