package breakwater

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestSet(t *testing.T, f Failover) *endpointSet {
	t.Helper()
	cfg, err := f.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return newEndpointSet(cfg, time.Second)
}

func three(t *testing.T, f Failover) *endpointSet {
	f.Endpoints = []string{"http://a:1", "http://b:2", "http://c:3"}
	return newTestSet(t, f)
}

func noExt(*endpoint) extState { return extNone }

const ms = int64(time.Millisecond)

func TestFailoverResolve(t *testing.T) {
	cfg, err := Failover{Endpoints: []string{"https://a.example/v1/", "http://10.0.0.1:8080"}}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.consecutive != 5 || cfg.ejection != 500*time.Millisecond || cfg.maxEjection != time.Minute || cfg.maxEjected != 0.5 || cfg.leastInFlight {
		t.Fatalf("defaults: %+v", cfg)
	}
	if got := cfg.eps[0].String(); got != "https://a.example/v1" {
		t.Fatalf("endpoint 0 = %q, want the trailing slash trimmed", got)
	}

	_, err = Failover{
		Endpoints:   []string{"ftp://x", "http://", "http://a/?q=1", "http://b", "http://b", "::"},
		Consecutive: -1, Ejection: time.Minute, MaxEjection: time.Second, MaxEjected: 2,
	}.resolve()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"scheme", "no host", "only scheme, host and path", "listed twice", "missing protocol scheme", "consecutive", "Ejection <= MaxEjection", "MaxEjected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := (Failover{}).resolve(); err == nil || !strings.Contains(err.Error(), "at least one") {
		t.Fatalf("no endpoints: %v", err)
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("http://h%d", i)
	}
	if _, err := (Failover{Endpoints: many}).resolve(); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("65 endpoints: %v", err)
	}
}

func TestEndpointRewrite(t *testing.T) {
	s := newTestSet(t, Failover{Endpoints: []string{"https://eu.example:8443/api", "http://10.0.0.2"}})
	req, _ := http.NewRequest(http.MethodGet, "http://logical/v1/items%2F42?x=1", nil)
	orig := req.URL.String()
	r := s.eps[0].rewrite(req)
	if got := r.URL.String(); got != "https://eu.example:8443/api/v1/items%2F42?x=1" {
		t.Fatalf("rewritten URL = %s", got)
	}
	if r.Host != "" {
		t.Fatalf("Host = %q: should follow the endpoint", r.Host)
	}
	if req.URL.String() != orig || req.Host != "logical" {
		t.Fatal("the caller's request was modified")
	}
	req.Host = "virtual.example"
	if r := s.eps[1].rewrite(req); r.Host != "virtual.example" || r.URL.String() != "http://10.0.0.2/v1/items%2F42?x=1" {
		t.Fatalf("explicit Host %q, URL %s", r.Host, r.URL)
	}
}

func TestPickRoundRobin(t *testing.T) {
	s := three(t, Failover{})
	counts := map[string]int{}
	for range 300 {
		ep, probe := s.pick(0, 0, true, noExt)
		if probe {
			t.Fatal("a probe among healthy endpoints")
		}
		counts[ep.name]++
	}
	for _, n := range counts {
		if n != 100 {
			t.Fatalf("round robin uneven: %v", counts)
		}
	}
	// One ejected: turns between the two others, evenly.
	s.eject("k", s.eps[1], 0, ReasonFailures)
	clear(counts)
	for range 300 {
		ep, _ := s.pick(ms, 0, true, noExt)
		counts[ep.name]++
	}
	if counts["http://b:2"] != 0 || counts["http://a:1"] != 150 || counts["http://c:3"] != 150 {
		t.Fatalf("with b ejected: %v", counts)
	}
}

func TestPickPrefersUntried(t *testing.T) {
	s := three(t, Failover{})
	for range 30 {
		ep, _ := s.pick(0, 1<<0|1<<2, true, noExt)
		if ep.i != 1 {
			t.Fatalf("picked %s, the only untried endpoint is b", ep.name)
		}
	}
	// Everything tried: any healthy one again rather than none.
	if ep, _ := s.pick(0, 7, true, noExt); ep == nil {
		t.Fatal("nothing picked")
	}
	// An untried ejected endpoint ranks below a tried healthy one.
	s.eject("k", s.eps[2], 0, ReasonFailures)
	for range 30 {
		if ep, _ := s.pick(ms, 1<<0|1<<1, true, noExt); ep.i == 2 {
			t.Fatal("picked the ejected endpoint over tried healthy ones")
		}
	}
}

func TestPickLeastInFlight(t *testing.T) {
	s := three(t, Failover{LeastInFlight: true})
	s.eps[0].inflight.Store(3)
	s.eps[1].inflight.Store(1)
	s.eps[2].inflight.Store(2)
	for range 10 {
		if ep, _ := s.pick(0, 0, true, noExt); ep.i != 1 {
			t.Fatalf("picked %s with %d in flight", ep.name, ep.inflight.Load())
		}
	}
	// Ties take turns.
	s.eps[2].inflight.Store(1)
	seen := map[int]int{}
	for range 10 {
		ep, _ := s.pick(0, 0, true, noExt)
		seen[ep.i]++
	}
	if seen[1] != 5 || seen[2] != 5 {
		t.Fatalf("ties: %v", seen)
	}
}

func TestPickTiers(t *testing.T) {
	s := three(t, Failover{})
	ext := func(x0, x1, x2 extState) func(*endpoint) extState {
		return func(e *endpoint) extState { return [3]extState{x0, x1, x2}[e.i] }
	}
	// a's breaker open, b paused: c is the only healthy one.
	for range 10 {
		if ep, _ := s.pick(0, 0, false, ext(extOpen, extDegraded, extNone)); ep.i != 2 {
			t.Fatalf("picked %s", ep.name)
		}
	}
	// Throttled: degraded for the hint.
	s.record("k", s.eps[2], 0, false, epNeutral, true, 100*time.Millisecond)
	if ep, _ := s.pick(50*ms, 0, false, ext(extOpen, extNone, extNone)); ep.i != 1 {
		t.Fatalf("picked %s while c is throttled", ep.name)
	}
	if h := s.tier(s.eps[2], 150*ms, extNone); h != tierHealthy {
		t.Fatalf("c after its hint: tier %d", h)
	}
	// Every breaker open: the pick still names one (its breaker refuses).
	if ep, _ := s.pick(0, 0, true, ext(extOpen, extOpen, extOpen)); ep == nil {
		t.Fatal("nothing picked")
	}
	// A half-open breaker gets a probe from a repeatable attempt, one at
	// a time; other attempts go to the healthy endpoints.
	x := ext(extNone, extHalfOpen, extNone)
	if ep, probe := s.pick(0, 0, true, x); ep.i != 1 || !probe {
		t.Fatalf("picked %s, probe %v: want b's probe", ep.name, probe)
	}
	for range 10 {
		if ep, probe := s.pick(0, 0, true, x); ep.i == 1 || probe {
			t.Fatal("a second probe while the first is in flight")
		}
	}
	if ep, probe := s.pick(0, 0, false, ext(extNone, extHalfOpen, extNone)); probe || ep.i == 1 {
		t.Fatal("an attempt that cannot be repeated probed a half-open breaker")
	}
}

// An endpoint its pause gate holds is chosen last in its tier, after
// endpoints that are merely throttled, tried or not; freeLeft sees only
// untried endpoints that could take an attempt at once.
func TestPickPassesOverHeld(t *testing.T) {
	s := three(t, Failover{})
	held := func(e *endpoint) extState { return [3]extState{extDegraded, extNone, extNone}[e.i] }
	s.record("k", s.eps[1], 0, false, epNeutral, true, time.Second)
	s.record("k", s.eps[2], 0, false, epNeutral, true, time.Second)
	for _, tried := range []uint64{0, 1<<1 | 1<<2} {
		for range 10 {
			if ep, _ := s.pick(0, tried, false, held); ep.i == 0 {
				t.Fatalf("tried %b: picked the held endpoint over throttled ones", tried)
			}
		}
	}
	for _, tc := range []struct {
		tried uint64
		want  bool
	}{{1 << 0, true}, {1<<0 | 1<<1, true}, {1<<1 | 1<<2, false}, {7, false}} {
		if got := s.freeLeft(0, tc.tried, held); got != tc.want {
			t.Errorf("freeLeft(tried %03b) = %v, want %v", tc.tried, got, tc.want)
		}
	}
}

func TestConsecutiveFailuresEject(t *testing.T) {
	s := three(t, Failover{Consecutive: 3, Ejection: time.Second, MaxEjection: 8 * time.Second})
	var events []string
	s.report = func(_ string, e *endpoint, h Health, why Reason) {
		events = append(events, fmt.Sprintf("%s %s %s", e.name, h, why))
	}
	a := s.eps[0]
	s.record("k", a, 0, false, epFailure, false, 0)
	s.record("k", a, 0, false, epFailure, false, 0)
	s.record("k", a, 0, false, epSuccess, false, 0) // resets the run
	s.record("k", a, 0, false, epFailure, false, 0)
	s.record("k", a, 0, false, epFailure, false, 0)
	if a.ejected.Load() {
		t.Fatal("ejected after a success broke the run")
	}
	s.record("k", a, 0, false, epFailure, false, 0)
	if !a.ejected.Load() {
		t.Fatal("not ejected after 3 failures in a row")
	}
	if d := time.Duration(a.until.Load()); d < time.Second || d > 1100*time.Millisecond {
		t.Fatalf("first ejection %s, want 1s + up to 10%%", d)
	}
	if s.tier(a, 500*ms, extNone) != tierEjected || s.tier(a, 1200*ms, extNone) != tierDegraded {
		t.Fatal("health while ejected, then awaiting the probe")
	}

	// The cap: with three endpoints one may be out; b is not ejected.
	b := s.eps[1]
	for range 10 {
		s.record("k", b, 0, false, epFailure, false, 0)
	}
	if b.ejected.Load() {
		t.Fatal("a second endpoint of three was ejected: the cap is half")
	}

	// The ejection ends: a repeatable attempt probes a, once at a time.
	now := 1200 * ms
	ep, probe := s.pick(now, 0, true, noExt)
	if ep != a || !probe {
		t.Fatalf("picked %s probe %v, want a's probe", ep.name, probe)
	}
	if ep, probe := s.pick(now, 0, true, noExt); ep == a || probe {
		t.Fatal("a second probe in flight")
	}
	// The probe fails: out again, for the base while the outage is young.
	s.record("k", a, now, true, epFailure, false, 0)
	if d := time.Duration(a.until.Load() - now); d < time.Second || d > 1100*time.Millisecond {
		t.Fatalf("second ejection %s, want 1s + up to 10%%", d)
	}
	// A probe that fails at the outage's age of 64 s: out for 2 s.
	now = int64(64 * time.Second)
	if ep, probe := s.pick(now, 0, true, noExt); ep != a || !probe {
		t.Fatal("no probe after the second ejection")
	}
	s.record("k", a, now, true, epFailure, false, 0)
	if d := time.Duration(a.until.Load() - now); d < 2*time.Second || d > 2200*time.Millisecond {
		t.Fatalf("ejection at 64s of outage %s, want 2s (1/32 of its age) + up to 10%%", d)
	}
	now += int64(2300 * time.Millisecond)
	if _, probe := s.pick(now, 0, false, noExt); probe {
		t.Fatal("an attempt that cannot be repeated probed as soon as the ejection ended")
	}
	ep, probe = s.pick(now, 0, true, noExt)
	if ep != a || !probe {
		t.Fatal("no probe after the second ejection")
	}
	s.record("k", a, now, true, epSuccess, false, 0)
	if a.ejected.Load() || s.tier(a, now, extNone) != tierHealthy {
		t.Fatal("a successful probe did not bring a back")
	}
	// Back, and failing again within MaxEjection: the same outage, 67.3 s
	// old, whose age sets the ejection.
	now += int64(time.Second)
	for range 3 {
		s.record("k", a, now, false, epFailure, false, 0)
	}
	if d, age := time.Duration(a.until.Load()-now), time.Duration(now); d < age/32 || d > age/32*11/10 {
		t.Fatalf("ejection at %s of outage %s, want 1/32 of it", age, d)
	}
	want := []string{
		"http://a:1 ejected failures",
		"http://a:1 ejected probe_failed",
		"http://a:1 ejected probe_failed",
		"http://a:1 healthy probes_succeeded",
		"http://a:1 ejected failures",
	}
	if strings.Join(events, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
}

// TestEjectionResetsAfterAQuietPeriod: an endpoint that stayed in for
// MaxEjection starts a new outage, at the base ejection time.
func TestEjectionResetsAfterAQuietPeriod(t *testing.T) {
	s := three(t, Failover{Consecutive: 1, Ejection: time.Second, MaxEjection: 4 * time.Second})
	a := s.eps[0]
	s.record("k", a, 0, false, epFailure, false, 0)
	now := int64(140 * time.Second)
	s.record("k", a, now, true, epFailure, false, 0) // a failed probe 140 s in
	now = a.until.Load()
	s.record("k", a, now, true, epSuccess, false, 0)
	if a.ejections != 2 {
		t.Fatalf("ejections = %d", a.ejections)
	}
	if d := time.Duration(a.period.Load()); d < 4*time.Second {
		t.Fatalf("the ejection of a 140s-old outage lasted %s, want 4s (the cap)", d)
	}
	now += int64(5 * time.Second)
	s.record("k", a, now, false, epFailure, false, 0)
	if d := time.Duration(a.until.Load() - now); d > 1100*time.Millisecond {
		t.Fatalf("ejection after a quiet period = %s, want the base 1s", d)
	}
}

func TestNonRepeatableProbeAfterASecondPeriod(t *testing.T) {
	s := three(t, Failover{Consecutive: 1, Ejection: time.Second})
	a := s.eps[0]
	s.record("k", a, 0, false, epFailure, false, 0)
	end := a.until.Load()
	for range 6 {
		if ep, _ := s.pick(end, 0, false, noExt); ep == a {
			t.Fatal("an attempt that cannot be repeated went to a when its ejection ended")
		}
	}
	ep, probe := s.pick(end+a.period.Load(), 0, false, noExt)
	if ep != a || !probe {
		t.Fatal("no probe a period later")
	}
}

// TestFailureRateOutlier: one endpoint failing 30 % of its attempts, never
// 5 in a row, is ejected; the two others, failing 2 %, stay in; and when
// every endpoint fails alike, none is.
func TestFailureRateOutlier(t *testing.T) {
	s := three(t, Failover{})
	bad := func(n int) bool { return n%10 == 1 || n%10 == 4 || n%10 == 7 }
	meh := func(n int) bool { return n%50 == 3 }
	now := int64(0)
	for n := range 200 {
		now += ms
		for _, e := range s.eps {
			fail := meh(n)
			if e.i == 0 {
				fail = bad(n)
			}
			v := epSuccess
			if fail {
				v = epFailure
			}
			if !e.ejected.Load() {
				s.record("k", e, now, false, v, false, 0)
			}
		}
	}
	if !s.eps[0].ejected.Load() {
		t.Fatal("the endpoint failing 30% was not ejected")
	}
	if s.eps[1].ejected.Load() || s.eps[2].ejected.Load() {
		t.Fatal("a good endpoint was ejected")
	}

	s = three(t, Failover{})
	for n := range 400 {
		now += ms
		for _, e := range s.eps {
			v := epSuccess
			if bad(n) {
				v = epFailure
			}
			s.record("k", e, now, false, v, false, 0)
		}
	}
	for _, e := range s.eps {
		if e.ejected.Load() {
			t.Fatalf("%s ejected while all endpoints fail alike", e.name)
		}
	}
}

func TestSingleEndpointNeverEjected(t *testing.T) {
	s := newTestSet(t, Failover{Endpoints: []string{"http://only"}})
	for range 100 {
		s.record("k", s.eps[0], 0, false, epFailure, false, 0)
	}
	if s.eps[0].ejected.Load() {
		t.Fatal("the only endpoint was ejected")
	}
	if ep, probe := s.pick(0, 1, true, noExt); ep != s.eps[0] || probe {
		t.Fatal("a single endpoint is always the pick")
	}
}

func TestAllOutPicksTheLeastBad(t *testing.T) {
	s := three(t, Failover{Consecutive: 1, MaxEjected: 1, Ejection: time.Second, MaxEjection: time.Minute})
	s.record("k", s.eps[0], 0, false, epFailure, false, 0)                // until ~1s
	s.record("k", s.eps[1], 0, false, epFailure, false, 0)                //
	s.eps[1].until.Store(int64(8 * time.Second))                          // an older outage's
	s.record("k", s.eps[2], 0, false, epFailure, false, 0)                // until ~1s
	s.eps[2].until.Store(s.eps[0].until.Load() + int64(time.Millisecond)) // just after a
	for range 5 {
		if ep, probe := s.pick(0, 0, true, noExt); ep != s.eps[0] || probe {
			t.Fatalf("picked %s, want a: its ejection ends first", ep.name)
		}
	}
}

func TestProbeLeaseExpires(t *testing.T) {
	s := three(t, Failover{Consecutive: 1, Ejection: time.Second})
	a := s.eps[0]
	s.record("k", a, 0, false, epFailure, false, 0)
	now := a.until.Load()
	if ep, probe := s.pick(now, 0, true, noExt); ep != a || !probe {
		t.Fatal("no probe")
	}
	// The probe's outcome never arrives; after the probe TTL (1 s here)
	// another attempt may probe.
	if _, probe := s.pick(now+int64(500*time.Millisecond), 0, true, noExt); probe {
		t.Fatal("second probe before the lease expired")
	}
	if ep, probe := s.pick(now+int64(1100*time.Millisecond), 0, true, noExt); ep != a || !probe {
		t.Fatal("no probe after the lease expired")
	}
	// A neutral outcome (a cancelled hedge) gives the lease back.
	s.record("k", a, now, true, epNeutral, false, 0)
	if ep, probe := s.pick(now+int64(1100*time.Millisecond), 0, true, noExt); ep != a || !probe {
		t.Fatal("no probe after a neutral outcome gave the lease back")
	}
}

func TestEndpointSnapshots(t *testing.T) {
	s := three(t, Failover{Consecutive: 2})
	s.eps[1].begin()
	s.record("k", s.eps[0], s.now(), false, epFailure, false, 0)
	s.record("k", s.eps[0], s.now(), false, epFailure, false, 0)
	s.record("k", s.eps[2], s.now(), false, epSuccess, false, 0)
	snaps := s.snapshots(func(e *endpoint) extState {
		if e.i == 2 {
			return extHalfOpen
		}
		return extNone
	})
	if len(snaps) != 3 {
		t.Fatalf("%d snapshots", len(snaps))
	}
	a, b, c := snaps[0], snaps[1], snaps[2]
	if a.Health != "ejected" || a.Ejections != 1 || a.RemainingSeconds <= 0 || a.EjectedUntil.IsZero() || a.Attempts != 0 {
		t.Fatalf("a: %+v", a)
	}
	if b.Health != "healthy" || b.InFlight != 1 || b.Endpoint != "http://b:2" {
		t.Fatalf("b: %+v", b)
	}
	if c.Health != "degraded" || c.Attempts != 1 || c.Failures != 0 {
		t.Fatalf("c: %+v", c)
	}
}

func TestEndpointSetConcurrentUse(t *testing.T) {
	s := three(t, Failover{Consecutive: 2, Ejection: time.Millisecond, MaxEjection: 4 * time.Millisecond})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := range 2000 {
				now := s.now()
				ep, probe := s.pick(now, uint64(n%8), n%2 == 0, noExt)
				ep.begin()
				v := epSuccess
				if ep.i == 0 || (g+n)%7 == 0 {
					v = epFailure
				}
				s.record("k", ep, s.now(), probe, v, n%13 == 0, time.Millisecond)
				ep.end()
			}
		})
	}
	wg.Wait()
	out := 0
	for _, e := range s.eps {
		if e.inflight.Load() != 0 {
			t.Fatalf("%s: %d in flight after all ended", e.name, e.inflight.Load())
		}
		if e.ejected.Load() {
			out++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != out || out > s.maxOut {
		t.Fatalf("out = %d, counted %d, cap %d", s.out, out, s.maxOut)
	}
}
