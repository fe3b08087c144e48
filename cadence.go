package breakwater

import "time"

// The probe cadence of an outage, one rule for every mechanism that waits
// for a key to come back: the breaker's openings, failover's ejections and
// the overload hold's probes. While the outage is young a probe goes every
// base (the open timeout, the ejection, overloadProbeEvery); from an age of
// probeAgeDivisor bases on, every probeAgeDivisor-th of its age, at most
// limit. A recovery is then noticed within about 3 % of the outage's age
// and never more than a tenth of it, while a dead key costs ever fewer
// probes: 22 per doubling of its age, one every 1.9 s after a minute.
const probeAgeDivisor = 32

// probeEvery is the time to the next probe of an outage age old.
func probeEvery(age, base, limit time.Duration) time.Duration {
	return min(max(age/probeAgeDivisor, base), limit)
}
