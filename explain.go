package breakwater

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater/internal/sat"
)

// Explain describes in plain words what the transport will do, with its
// defaults resolved: the retry plan and how many of its attempts fit in
// the call timeout, which requests are sent once or never hedged and why
// (the safety rules), when the breaker opens, how often it probes an
// outage as it ages and how its half-open probes ramp up, how the pause
// gate learns a strict limiter's rate (and, simulated, the rate it meets
// one of 10/s at), which state is shared with other replicas, whether its
// base is another Transport, and what a fully failing call costs. It is
// meant for a reviewer of a configuration, a startup log line or a test
// golden file.
//
// It is deterministic: a transport explains itself in the same words on
// every call, and two transports of the same configuration alike (its
// simulations run with a fixed seed; only the waits of a [Backoff]
// without MaxDelay, drawn once when the transport is built, may differ
// between two transports).
func (t *Transport) Explain() string {
	c := &t.cfg
	var b strings.Builder
	line := func(indent int, label, format string, args ...any) {
		fmt.Fprintf(&b, "%s%-17s%s\n", strings.Repeat("  ", indent), label, fmt.Sprintf(format, args...))
	}
	plan := c.plan()
	b.WriteString("breakwater.Transport\n  retry\n")
	switch fit, waits := c.attemptsFit(); {
	case fit >= c.maxAttempts:
		line(2, "attempts", "up to %d", c.maxAttempts)
	case c.backoffExact:
		line(2, "attempts", "up to %d, but only %d fit in the call timeout (%s): the waits before attempt %d add up to %s",
			c.maxAttempts, fit, formatDuration(c.callTimeout), fit+1, formatDuration(waits))
	default:
		line(2, "attempts", "up to %d, but only %d fit in the call timeout (%s) when the waits are their longest (up to %s before attempt %d); more when they are drawn shorter",
			c.maxAttempts, fit, formatDuration(c.callTimeout), formatDuration(waits), fit+1)
	}
	if len(plan) == 0 {
		line(2, "delays", "none: a single attempt, never retried")
	} else {
		switch {
		case c.backoffExact:
			line(2, "delays", "%s, never shorter than a Retry-After; a 502's first retry at once", joinDurations(plan))
		case c.backoffMax == nil:
			line(2, "delays", "up to %s (the longest of 64 draws), never shorter than a Retry-After; a 502's first retry at once", joinDurations(plan))
		default:
			line(2, "delays", "up to %s (jittered below that), never shorter than a Retry-After; a 502's first retry at once", joinDurations(plan))
		}
	}
	line(2, "idempotency", "%s", map[bool]string{
		false: "GET, HEAD, OPTIONS, TRACE, PUT, DELETE and requests with an Idempotency-Key; others only when provably unsent",
		true:  "every method (WithRetryNonIdempotent)",
	}[c.retryNonIdempotent])
	if c.maxAttempts > 1 {
		if !c.retryNonIdempotent {
			line(2, "sent once", "a POST, PATCH or other method without an Idempotency-Key, unless provably unsent: not idempotent (WithRetryNonIdempotent is off)")
		}
		if c.bufferBodies > 0 {
			line(2, "sent once", "a body without GetBody longer than %d bytes: not replayable (the WithBodyBuffering limit)", c.bufferBodies)
		} else {
			line(2, "sent once", "a body without GetBody: not replayable (WithBodyBuffering is off)")
		}
	}
	if c.budget {
		line(2, "retry budget", "%.0f%% of calls + %s/s per key over %s; a retry that succeeds is given back", c.budgetRatio*100, strconv.FormatFloat(c.budgetFloor, 'f', -1, 64), formatDuration(c.budgetWindow))
	} else {
		line(2, "retry budget", "none")
	}
	line(2, "call timeout", "%s", durationOrNone(c.callTimeout))
	line(2, "attempt timeout", "%s", durationOrNone(c.attemptTimeout))

	b.WriteString("  circuit breaker\n")
	bc := &t.breakers.cfg
	if bc.mode == modeDisabled {
		line(2, "", "none: calls are never rejected by a breaker")
	} else {
		p := bc.policy
		charge := "once per call that gives up, as its attempts showed"
		if c.chargePerAttempt {
			charge = "once per failing attempt"
		}
		switch p.kind {
		case policyWindow:
			share := ""
			if p.ratio > 0 {
				share = fmt.Sprintf(", if at least %.0f%% of the calls since the first of them failed", p.ratio*100)
			}
			line(2, "opens after", "%d failures within %s%s%s", p.tolerate+1, formatDuration(p.within), categoryThresholds(p), share)
		case policyConsecutive:
			line(2, "opens after", "%d consecutive failures%s", p.threshold, categoryThresholds(p))
		case policyFailureRate:
			line(2, "opens after", "%.0f%% failures over %s, at least %d calls", p.ratio*100, formatDuration(p.within), p.minCalls)
		}
		if r := t.Simulate(Scenario{}); r.OpensAfter > 0 {
			line(2, "full outage", "opens on call %d of a single caller, %s in (simulated)", r.OpensAfter, formatDuration(r.OpenedAt))
		} else {
			line(2, "full outage", "stays closed through %d calls of a single caller (simulated)", r.Calls)
		}
		line(2, "charged", "%s", charge)
		line(2, "probes", "%s", explainCadence(bc))
		line(2, "half-open", "%s", explainRamp(bc))
		if bc.mode == modeShadow {
			line(2, "mode", "shadow: counts what it would reject, rejects nothing")
		}
		if bc.faultRate > 0 {
			line(2, "fault injection", "rejects %.0f%% of admissions", bc.faultRate*100)
		}
	}

	b.WriteString("  pause gate\n")
	if g := t.limits.gates; g == nil {
		line(2, "", "none: a throttled call waits its own Retry-After; other calls are not held")
	} else {
		line(2, "429", "pauses the host for its hint (at most %s); the calls held leave one probe first, then spread out", formatDuration(g.cfg.maxPause))
		line(2, "learned rate", "a strict limiter's rate is learned: a 429 less than a hint after a pause ended, with a success since, paces the host at 1 request per hint (1/s for a 1s hint), doubling per round of successes (slow start) until a 429; then a ceiling halfway between the last two rates, the rate climbing to %.0f%% of it; each later 429 sets the ceiling to the last rate answered and cuts the rate to %.0f%% of it; forgotten %s after the last 429",
			paceTarget*100, paceBackoff*100, formatDuration(paceForget))
		line(2, "strict limiter", "%s", t.explainStrict())
		line(2, "503 + hint", "delays that call's retry; holds the host only while such answers are the majority (at least %d in %s), with a probe every %s while the hold is young (its first %s), then 1/%d of its age, at most %s; the held calls then leave in one line, earliest deadline first, a little over twice as fast as they came",
			overloadMinimum, formatDuration(overloadWindow), formatDuration(overloadProbeEvery), formatAge(overloadProbeEvery*probeAgeDivisor), probeAgeDivisor, formatDuration(overloadMaxProbeEvery))
		line(2, "quota fields", "%s", map[bool]string{true: "paced on (RateLimit, RateLimit-Policy, X-RateLimit-*)", false: "ignored"}[t.limits.pacing])
	}
	t.explainLimits(&b, line)
	t.explainShared(&b, line)
	t.explainHedging(&b, line)
	t.explainFailover(&b, line)

	if in := innerTransport(t.base); in != nil {
		b.WriteString("  base\n")
		line(2, "stacked", "on another breakwater.Transport (up to %d attempts a call): each attempt here is a whole call there, up to %d attempts per call, and both count the upstream's failures",
			in.cfg.maxAttempts, c.maxAttempts*in.cfg.maxAttempts)
	}
	b.WriteString("  a fully failing call\n")
	wait := t.cfg.worstPlan()
	line(2, "waits", "up to %s between attempts", durationOrNone(wait))
	switch {
	case c.callTimeout > 0:
		line(2, "takes", "at most %s (the call timeout)", formatDuration(c.callTimeout))
	case c.attemptTimeout > 0:
		line(2, "takes", "at most %s (%d attempts of up to %s, plus the waits)", formatDuration(time.Duration(sat.Add(int64(wait), int64(sat.Mul(c.attemptTimeout, int64(c.maxAttempts)))))), c.maxAttempts, formatDuration(c.attemptTimeout))
	default:
		line(2, "takes", "unbounded: nothing limits a single attempt")
	}
	return b.String()
}

// Outage ages at which Explain states the probe cadence.
var cadenceAges = [...]time.Duration{time.Minute, 10 * time.Minute}

// explainCadence states how often a breaker of c probes an outage: the
// open timeout while the outage is young, then a 32nd of its age up to
// the maximum, at two ages.
func explainCadence(c *breakerConfig) string {
	base, most := c.openTimeout, c.maxOpenTimeout
	var b strings.Builder
	if base >= most {
		fmt.Fprintf(&b, "an opening lasts %s, whatever the outage's age", formatDuration(base))
	} else {
		fmt.Fprintf(&b, "an opening lasts %s while the outage is young (its first %s), then 1/%d of its age, at most %s (from %s on):",
			formatDuration(base), formatAge(base*probeAgeDivisor), probeAgeDivisor, formatDuration(most), formatAge(most*probeAgeDivisor))
		for i, age := range cadenceAges {
			every := formatDuration(probeEvery(age, base, most))
			if i == 0 {
				fmt.Fprintf(&b, " a %s outage is probed every %s", formatAge(age), every)
			} else {
				fmt.Fprintf(&b, ", a %s one every %s", formatAge(age), every)
			}
		}
	}
	if c.jitter > 0 {
		fmt.Fprintf(&b, "; jitter shortens each opening by up to %.0f%%", c.jitter*100)
	}
	return b.String()
}

// explainRamp states a half-open breaker's ramp of c: its probes at once,
// success by success until it closes, and how long a call finding them
// taken waits.
func explainRamp(c *breakerConfig) string {
	var steps []string
	for ok := range min(c.successes, 7) {
		n := min(c.maxProbes<<min(ok, 10), max(c.maxProbes, maxRampProbes))
		if ok == 6 {
			steps = append(steps, "…")
			break
		}
		steps = append(steps, strconv.Itoa(n))
	}
	return fmt.Sprintf("%s, doubling per success up to %d, closes after %s (probes at once: %s); a call finding the probes taken waits for an answer up to 1/4 of its time left, at most %s",
		count(c.maxProbes, "probe"), max(c.maxProbes, maxRampProbes), count(c.successes, "success"), strings.Join(steps, ", "), formatDuration(maxHalfOpenHold))
}

// Explain's strict limiter: what its simulation sends to, and for how
// long it measures the rate learned.
const (
	strictRate    = 10.0
	strictCallers = 4
	strictLearn   = 30 * time.Second
)

// explainStrict simulates the transport's callers against a strict
// limiter and states the rate it is met at once learned.
func (t *Transport) explainStrict() string {
	var served, throttled int
	t.Simulate(Scenario{Failure: Throttled, Limit: strictRate, Callers: strictCallers, Duration: 2 * strictLearn, Observe: func(at time.Duration, e Event) {
		if e.Kind != EventAttempt || at < strictLearn {
			return
		}
		switch e.Category {
		case Success:
			served++
		case Throttled:
			throttled++
		}
	}})
	return fmt.Sprintf("one of %s/s answering 429 + a 1s hint beyond it serves %s/s from %s on, with %s in the next %s (simulated, %d callers)",
		strconv.FormatFloat(strictRate, 'f', -1, 64), strconv.FormatFloat(float64(served)/strictLearn.Seconds(), 'f', 1, 64), formatDuration(strictLearn),
		count(throttled, "429"), formatDuration(strictLearn), strictCallers)
}

// count is n and word, with an s (or es) when n is not 1.
func count(n int, word string) string {
	if strings.HasSuffix(word, "s") {
		return strconv.Itoa(n) + " " + plural(uint32(n), word, word+"es")
	}
	return strconv.Itoa(n) + " " + plural(uint32(n), word, word+"s")
}

// formatAge is formatDuration for an outage's age: minutes past one.
func formatAge(d time.Duration) string {
	if d <= time.Minute {
		return formatDuration(d)
	}
	s := d.Round(time.Second).String()
	if r, ok := strings.CutSuffix(s, "m0s"); ok {
		s = r + "m"
	}
	if r, ok := strings.CutSuffix(s, "h0m"); ok {
		s = r + "h"
	}
	return s
}

// explainLimits describes the rate and concurrency limits of a
// Transport, if any.
func (t *Transport) explainLimits(b *strings.Builder, line func(indent int, label, format string, args ...any)) {
	r, k, cong := t.limits.rate, t.limits.bulk, !t.cfg.noCongestion
	if r == nil && k == nil && !cong {
		return
	}
	waits := func(d time.Duration) string {
		if d <= 0 {
			return "refused at once when there is none"
		}
		return "waits up to " + formatDuration(d) + " for one, within the call's deadline"
	}
	b.WriteString("  limits\n")
	if cong {
		line(2, "congestion", "engages when the median and the low quantile of a key's last %d answers are both over %d times their usual, twice in a row, with at least %d in flight: "+
			"the attempts in flight are then held to what they were, cut as the median rises (at most halved per %d answers, never below %d) and grown by its square root when it falls; "+
			"an attempt over it is refused at once; ends when under half of it is used",
			congestionWindow, congestionTolerance, congestionMinLimit, congestionWindow, congestionMinLimit)
	}
	if r != nil {
		line(2, "rate limit", "%s/s with a burst of %d per key, a token per attempt; %s", strconv.FormatFloat(float64(r.cfg.limit), 'f', -1, 64), r.cfg.burst, waits(r.cfg.maxWait))
	}
	if k != nil {
		queue := ""
		if k.cfg.maxQueue > 0 {
			queue = fmt.Sprintf(" (at most %d waiting)", k.cfg.maxQueue)
		}
		adaptive := ""
		if k.cfg.adaptive != nil {
			adaptive = ", adaptive"
		}
		line(2, "concurrency", "%d in flight per key%s, a slot per attempt; %s%s", k.cfg.limit, adaptive, waits(k.cfg.maxWait), queue)
	}
}

// categoryThresholds describes a policy's per-category thresholds, for
// example " (5 for a timeout)": the count that opens the breaker when the
// failure that reaches it is of that category.
func categoryThresholds(p Policy) string {
	var parts []string
	for c, n := range p.byCategory {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d for a %s", n, Category(c)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func joinDurations(ds []time.Duration) string {
	const shown = 6
	parts := make([]string, 0, shown+1)
	for i, d := range ds {
		if i == shown {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, formatDuration(d))
	}
	return strings.Join(parts, ", ")
}

func durationOrNone(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return formatDuration(d)
}

// explainFailover describes the failover of a Transport, if any.
func (t *Transport) explainFailover(b *strings.Builder, line func(indent int, label, format string, args ...any)) {
	c := &t.cfg
	if f := c.failover; f != nil {
		b.WriteString("  failover\n")
		names := make([]string, len(f.eps))
		for i, u := range f.eps {
			names[i] = u.String()
		}
		line(2, "endpoints", "%d: %s", len(names), strings.Join(names, ", "))
		choice := "in turns"
		if f.leastInFlight {
			choice = "fewest in flight"
		}
		line(2, "choice", "%s within the best health tier; a retry or a hedge to an endpoint not tried yet", choice)
		if len(names) > 1 {
			line(2, "ejects after", "%d failing attempts in a row, or a failure rate >= 2x the others' + 10 points over %s (>= %d attempts)", f.consecutive, formatDuration(outlierWindow), outlierMinVolume)
			maxOut := max(1, int(f.maxEjected*float64(len(names))))
			line(2, "ejected for", "%s while the outage is young, then 1/32 of its age up to %s, +10%% jitter; at most %d of %d at once", formatDuration(f.ejection), formatDuration(f.maxEjection), maxOut, len(names))
		} else {
			line(2, "ejects", "never: a single endpoint is left to its breaker")
		}
		line(2, "all out", "the endpoint whose ejection ends first; ErrCircuitOpen when every breaker is open")
	}
}

// explainHedging describes the hedging of a Transport, if any.
func (t *Transport) explainHedging(b *strings.Builder, line func(indent int, label, format string, args ...any)) {
	c := &t.cfg
	if h := c.hedging; h != nil {
		b.WriteString("  hedging\n")
		if h.q > 0 {
			line(2, "after", "the key's p%s of recent first attempts, at least %s (once %d were seen)", strconv.FormatFloat(math.Round(h.q*1e4)/1e2, 'f', -1, 64), formatDuration(h.delay), hedgeMinSamples)
		} else {
			line(2, "after", "%s", formatDuration(h.delay))
		}
		line(2, "hedges", "up to %d per call, counted as attempts, admitted without waiting", h.maxHedges)
		line(2, "budget", "%.0f%% extra requests per key over %s, and the retry budget", h.budget*100, formatDuration(hedgeWindow))
		line(2, "applies to", "requests that may be repeated, with bodies GetBody replays")
		body := "a body without GetBody"
		if c.bufferBodies > 0 {
			body += fmt.Sprintf(" longer than %d bytes", c.bufferBodies)
		}
		line(2, "not hedged", "a POST, PATCH or other method without an Idempotency-Key or RequestPolicy.Idempotent (WithRetryNonIdempotent does not count); %s", body)
	}
}

// explainShared adds the "across replicas" part of [Transport.Explain]:
// which of the transport's state is shared, and what that costs.
func (t *Transport) explainShared(b *strings.Builder, line func(indent int, label, format string, args ...any)) {
	b.WriteString("  across replicas\n")
	switch rs := t.limits.rate; {
	case rs == nil:
		line(2, "rate limit", "none")
	case rs.cfg.shared != nil:
		line(2, "rate limit", "shared: one quota for all replicas, one store round trip per attempt; while the store fails, this replica's share (1/%d)", rs.cfg.shared.Replicas())
	default:
		line(2, "rate limit", "this replica's own")
	}
	switch g := t.limits.gates; {
	case g == nil:
		line(2, "pauses", "none")
	case g.cfg.bus != nil:
		line(2, "pauses", "shared: a pause set here holds every replica, sent after the fact (checks stay local)")
	default:
		line(2, "pauses", "this replica's own")
	}
	switch bc := &t.breakers.cfg; {
	case bc.mode == modeDisabled:
		line(2, "breaker trips", "none")
	case bc.bus != nil:
		line(2, "breaker trips", "shared: openings and resets reach every replica after the fact (admission stays local)")
	default:
		line(2, "breaker trips", "this replica's own")
	}
}
