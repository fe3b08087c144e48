package redisstore_test

// The shared-limits claim: replicas sharing one inbound per-client limit
// and one outbound quota admit, across all of them together, at most
// limit + burst requests in any 1 s window, and each gets a fair share.
//
// # What is measured where
//
// The bound belongs to GCRA on the store's clock. The script admits a
// request at Redis time t only if TAT + T - τ <= t, where T = 1/limit,
// τ = burst·T, and each admission moves TAT to max(TAT, t) + T. So n
// admissions at t1 <= ... <= tn need t1 + n·T - τ <= tn: at most
// floor(limit·W) + burst admissions in any closed window of length W, 50
// for 1 s of 40/s with a burst of 10 (49 when the window excludes its
// end). Times taken anywhere else include a reply's trip back and the
// scheduling of whoever reads it; on a loaded machine a late reply pushes
// one admission towards the next ones, and a client-side count can exceed
// the bound while Redis admitted exactly what it should.
//
// So the admissions are timed on Redis's clock: a MONITOR connection
// records every command with Redis's timestamp, and an admission is a run
// of the GCRA script that wrote its key (refusals write nothing), timed
// at the TIME that run read. The check allows limit + burst in windows
// that exclude their end, one more than GCRA admits there: that margin
// covers the microseconds between the TIME a script read and the
// timestamp MONITOR gives it, so a store that admits one request too many
// per window passes, and one that admits two fails. What the test client and the upstream see is
// then tied to those admissions: every admitted answer the client got,
// and every call that reached the upstream, must pair with a distinct
// admission on Redis no later than it (on one machine Redis's clock is the
// wall clock of every process), so that nothing was admitted outside the
// store. At the upstream, a call arrives at most L after its admission,
// where L is the longest any call took from its replica starting it to its
// arrival; so arrivals in any 1 s are at most floor(limit·(1 s + L)) +
// burst, which is limit + burst while L stays under one interval.

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// TestClaimSharedLimits: three replica processes, each with its own
// go-redis client, share one inbound per-client limit (40/s, burst 10)
// and one outbound quota (20/s, burst 5) on one redis-server.
func TestClaimSharedLimits(t *testing.T) {
	srv := redistest.New(t)
	mon := srv.Monitor(t)
	up := newLimitsUpstream(t)
	procs := make([]*replicaProcess, 3)
	for i := range procs {
		procs[i] = startReplicaProcess(t, replicaConfig{Index: i, Redis: srv.Addr, Upstream: up.srv.URL, Policy: claimPolicy})
	}
	urls := make([]string, len(procs))
	for i, p := range procs {
		u, err := p.waitURL(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = u
	}
	rep := runLimits(t, mon, up, urls, claimPolicy, 2500*time.Millisecond)
	for _, p := range procs {
		p.stop()
	}
	for i, p := range procs {
		st, err := p.wait(10 * time.Second)
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
		rep.stats = append(rep.stats, st)
	}
	rep.log(t)
	for _, err := range rep.check() {
		t.Error(err)
	}
}

// TestClaimSharedLimitsCatchesOverAdmission: the claim's measurement
// fails replicas that admit more than the limit, whether the store admits
// too much or a replica admits without the store. The limits are lower
// than the claim's, so that the load saturates them even on a busy
// machine that runs the whole stack in this one process.
func TestClaimSharedLimitsCatchesOverAdmission(t *testing.T) {
	policy := limitsPolicy{InLimit: 10, InBurst: 5, OutLimit: 5, OutBurst: 2}
	for _, tc := range []struct {
		fault string
		want  []string
	}{
		{faultStoreOverAdmits, []string{"inbound: the store admitted", "outbound: the store admitted"}},
		{faultAdmitsOutside, []string{"inbound: the client was answered", "outbound: the upstream was reached"}},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := redistest.New(t)
			mon := srv.Monitor(t)
			up := newLimitsUpstream(t)
			var reps []*replica
			var urls []string
			for i := range 3 {
				r, err := startReplica(replicaConfig{Index: i, Redis: srv.Addr, Upstream: up.srv.URL, Policy: policy, Fault: tc.fault})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(r.close)
				reps = append(reps, r)
				urls = append(urls, r.URL())
			}
			rep := runLimits(t, mon, up, urls, policy, 1500*time.Millisecond)
			for _, r := range reps {
				rep.stats = append(rep.stats, r.store.Stats())
			}
			rep.log(t)
			errs := rep.check()
			for _, want := range tc.want {
				if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), want) }) {
					t.Errorf("over-admitting replicas passed the check %q; errors: %v", want, errs)
				}
			}
		})
	}
}

// limitsUpstream records when each call arrives, from which replica, and
// how long after its replica started it.
type limitsUpstream struct {
	srv       *httptest.Server
	mu        sync.Mutex
	arrivals  []time.Time
	reachedBy map[string]int
	maxLag    time.Duration
}

func newLimitsUpstream(t *testing.T) *limitsUpstream {
	u := &limitsUpstream{reachedBy: map[string]int{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		started, _ := strconv.ParseInt(r.Header.Get("X-Started"), 10, 64)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.arrivals = append(u.arrivals, now)
		u.reachedBy[r.Header.Get("X-Replica")]++
		u.maxLag = max(u.maxLag, now.Sub(time.Unix(0, started)))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// limitsReport is what one run measured.
type limitsReport struct {
	policy            limitsPolicy
	d                 time.Duration
	inAdmit, outAdmit []time.Time // admissions on Redis's clock
	answered          []time.Time // admitted answers, when the client got them
	arrivals          []time.Time // calls, when they reached the upstream
	maxLag            time.Duration
	admittedBy        []int
	reachedBy         []int
	stats             []redisstore.Stats
}

// runLimits offers about 300 requests/s, spread evenly over the replicas
// at urls, for d, and collects what Redis, the client and the upstream saw.
func runLimits(t *testing.T, mon *redistest.Monitor, up *limitsUpstream, urls []string, p limitsPolicy, d time.Duration) *limitsReport {
	rep := &limitsReport{policy: p, d: d, admittedBy: make([]int, len(urls)), reachedBy: make([]int, len(urls))}
	var (
		mu       sync.Mutex
		answered []time.Time
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for i, u := range urls {
		for range 2 {
			wg.Go(func() {
				c := &http.Client{}
				defer c.CloseIdleConnections()
				for time.Now().Before(deadline) {
					if resp, err := c.Get(u); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							now := time.Now()
							mu.Lock()
							answered = append(answered, now)
							rep.admittedBy[i]++
							mu.Unlock()
						}
					}
					time.Sleep(6 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	if err := mon.Sync(); err != nil {
		t.Fatal(err)
	}
	cmds := mon.Commands(func(c redistest.Command) bool { return c.Script })
	rep.inAdmit = admissions(cmds, "breakwater:rl:inbound:")
	rep.outAdmit = admissions(cmds, "breakwater:rl:upstream:")
	rep.answered = sorted(answered)
	up.mu.Lock()
	rep.arrivals = sorted(up.arrivals)
	rep.maxLag = up.maxLag
	for i := range urls {
		rep.reachedBy[i] = up.reachedBy[strconv.Itoa(i)]
	}
	up.mu.Unlock()
	return rep
}

// admissions returns the admissions of keys under prefix in cmds (the
// commands of scripts, in the order Redis ran them): the runs of the GCRA
// script that wrote such a key, each timed at the TIME it read.
func admissions(cmds []redistest.Command, prefix string) []time.Time {
	var out []time.Time
	var now time.Time
	for _, c := range cmds {
		switch {
		case strings.EqualFold(c.Args[0], "TIME"):
			now = c.At
		case strings.EqualFold(c.Args[0], "SET") && len(c.Args) > 1 && strings.HasPrefix(c.Args[1], prefix):
			out = append(out, now)
		}
	}
	return sorted(out)
}

func sorted(ts []time.Time) []time.Time {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// maxInWindow is the largest number of the sorted times ts within any
// window of d (a window that excludes its end).
func maxInWindow(ts []time.Time, d time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// unpaired returns the index of the first of the sorted times later that
// cannot be paired with a distinct one of the sorted times earlier that
// is not after it, or -1 when all can.
func unpaired(earlier, later []time.Time) int {
	for k, t := range later {
		if k >= len(earlier) || earlier[k].After(t) {
			return k
		}
	}
	return -1
}

func (r *limitsReport) log(t *testing.T) {
	t.Logf("inbound: %d admitted on Redis in %v, at most %d in any 1 s (limit %d + burst %d); the client got %d admitted answers, at most %d in any 1 s by its own clock",
		len(r.inAdmit), r.d, maxInWindow(r.inAdmit, time.Second), r.policy.InLimit, r.policy.InBurst, len(r.answered), maxInWindow(r.answered, time.Second))
	t.Logf("outbound: %d admitted on Redis, at most %d in any 1 s (quota %d + burst %d); the upstream was reached %d times, at most %d in any 1 s of arrivals, each at most %v after its replica started it",
		len(r.outAdmit), maxInWindow(r.outAdmit, time.Second), r.policy.OutLimit, r.policy.OutBurst, len(r.arrivals), maxInWindow(r.arrivals, time.Second), r.maxLag.Round(time.Microsecond))
	for i := range r.admittedBy {
		var st redisstore.Stats
		if i < len(r.stats) {
			st = r.stats[i]
		}
		t.Logf("replica %d: %d admitted, %d upstream calls; store %+v", i, r.admittedBy[i], r.reachedBy[i], st)
	}
}

// check returns every way the run breaks the claim.
func (r *limitsReport) check() []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, l := range []struct {
		name         string
		limit, burst int
		admit, seen  []time.Time
		seenBy       string
	}{
		{"inbound", r.policy.InLimit, r.policy.InBurst, r.inAdmit, r.answered, "the client was answered"},
		{"outbound", r.policy.OutLimit, r.policy.OutBurst, r.outAdmit, r.arrivals, "the upstream was reached"},
	} {
		if n := maxInWindow(l.admit, time.Second); n > l.limit+l.burst {
			fail("%s: the store admitted %d requests in one 1 s window, more than limit %d + burst %d", l.name, n, l.limit, l.burst)
		} else if n < l.limit {
			fail("%s: at most %d admitted in any 1 s, under the limit of %d: the run never reached the limit and shows nothing", l.name, n, l.limit)
		}
		if k := unpaired(l.admit, l.seen); k >= 0 {
			fail("%s: %s %d times but Redis admitted %d: the %dth (at %s) has no admission on Redis before it",
				l.name, l.seenBy, len(l.seen), len(l.admit), k+1, l.seen[k].Format("15:04:05.000000"))
		}
	}
	// What the upstream sees: arrivals trail their admissions by at most
	// maxLag.
	p := r.policy
	if n, bound := maxInWindow(r.arrivals, time.Second), int(math.Floor(float64(p.OutLimit)*(time.Second+r.maxLag).Seconds()))+p.OutBurst; n > bound {
		fail("outbound: the upstream saw %d calls in one 1 s window, more than floor(%d/s × (1 s + %v)) + %d = %d", n, p.OutLimit, r.maxLag, p.OutBurst, bound)
	}
	for i, st := range r.stats {
		if st.Fails != 0 || st.Skipped != 0 {
			fail("replica %d: the store failed (%+v): the run shows the fallback, not shared mode", i, st)
		}
	}
	in, out := len(r.answered), len(r.arrivals)
	for i := range r.admittedBy {
		if a, u := r.admittedBy[i], r.reachedBy[i]; a < in/6 || u < out/6 {
			fail("replica %d got %d of %d admissions and %d of %d upstream calls: not a fair share", i, a, in, u, out)
		}
	}
	return errs
}
