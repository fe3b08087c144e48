package breakwater

import (
	"math/rand/v2"
	"time"
)

// simOutcome is one call's charge in a simulation.
type simOutcome struct {
	at     time.Duration
	failed bool
}

// Scenario is an upstream behaviour for [Transport.Simulate].
type Scenario struct {
	// AttemptTime is how long each attempt takes. Default 0.
	AttemptTime time.Duration
	// FailFor is how long the upstream fails from the start; 0 means it
	// never recovers.
	FailFor time.Duration
	// FailureRate, when in (0, 1), makes each attempt fail with that
	// probability instead (seeded by Seed) while the upstream is failing.
	FailureRate float64
	Seed        uint64
	// MaxCalls bounds the simulation. Default 100.
	MaxCalls int
}

// SimResult is what [Transport.Simulate] found.
type SimResult struct {
	// OpensAfter is the number of the call that opened the breaker, or 0
	// when it never opened.
	OpensAfter int
	// Calls and Attempts made, Elapsed virtual time, and the longest call.
	Calls, Attempts int
	Elapsed         time.Duration
	WorstCall       time.Duration
}

// Simulate runs sequential calls against an imagined upstream in virtual
// time with the transport's own retry plan (waits at their longest) and
// breaker policy, and reports when the breaker would open. Like
// ExternalService's simulate it models one caller, the counting policy and
// the retry loop; it does not model the retry budget, concurrency or rate
// limits, or open/half-open recovery. A failure-rate policy is modelled as
// a window over the same outcomes.
func (t *Transport) Simulate(s Scenario) SimResult {
	if s.MaxCalls <= 0 {
		s.MaxCalls = 100
	}
	c := &t.cfg
	bc := &t.breakers.cfg
	plan := c.plan()
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	var (
		res          SimResult
		now          time.Duration
		melts        []time.Duration // window policy
		outcomes     []simOutcome    // window policy with a ratio
		consec       int
		calls, fails []time.Duration // failure-rate policy
	)
	failing := func() bool {
		if s.FailFor > 0 && now >= s.FailFor {
			return false
		}
		if s.FailureRate > 0 && s.FailureRate < 1 {
			return rng.Float64() < s.FailureRate
		}
		return true
	}
	// charge records an outcome and reports whether the breaker opens.
	charge := func(failed bool) bool {
		if bc.mode == ModeDisabled {
			return false
		}
		p := bc.policy
		switch p.kind {
		case policyConsecutive:
			if !failed {
				consec = 0
				return false
			}
			consec++
			return consec >= p.threshold
		case policyFailureRate:
			calls = append(calls, now)
			if failed {
				fails = append(fails, now)
			}
			calls, fails = keepWithin(calls, now, p.within), keepWithin(fails, now, p.within)
			return p.rateTrips(int64(len(calls)), int64(len(fails)))
		}
		if p.ratio > 0 {
			outcomes = append(outcomes, simOutcome{now, failed})
		}
		if !failed {
			return false
		}
		melts = keepWithin(append(melts, now), now, p.within)
		if len(melts) <= p.tolerate {
			return false
		}
		since := 0 // the calls since the oldest failure in the window
		for _, o := range outcomes {
			if o.at >= melts[0] {
				since++
			}
		}
		return shareLowerBound(int64(len(melts)), int64(since)) >= p.ratio
	}
	for res.Calls < s.MaxCalls && res.OpensAfter == 0 {
		res.Calls++
		start := now
		for n := 1; ; n++ {
			res.Attempts++
			now += s.AttemptTime
			failed := failing()
			last := !failed || n >= c.maxAttempts || (c.callTimeout > 0 && now-start+plan[n-1] >= c.callTimeout)
			if (c.meltPerAttempt || last || !failed) && charge(failed) {
				res.OpensAfter = res.Calls
				break
			}
			if last {
				break
			}
			now += plan[n-1]
		}
		res.WorstCall = max(res.WorstCall, now-start)
	}
	res.Elapsed = now
	return res
}

// keepWithin drops the times not inside (now-within, now].
func keepWithin(ts []time.Duration, now, within time.Duration) []time.Duration {
	i := 0
	for i < len(ts) && ts[i] <= now-within {
		i++
	}
	return ts[i:]
}
