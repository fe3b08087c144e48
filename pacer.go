package breakwater

import "time"

// The send rate a key's 429s teach. A 429 pauses its key for the hint
// (pausegate.go), and it also says that the key was sent more than its
// upstream admits: from then on the gate paces the key's requests at a
// learned rate, found the way TCP finds a window, from the answers alone.
// After the first 429 the rate starts at one request per hint and doubles
// with each success (slow start) until a 429 comes again; then it falls to
// the last rate that was answered, and from there it climbs back towards a
// little under the rate the latest 429 came at, quickly while far below
// it and slowly past it (multiplicative decrease, a gentle increase, as
// the AWS SDK's adaptive retry mode and TCP CUBIC do), so that a strict
// limiter is met at about its rate with a 429 every so often instead of
// one per request. A key that sends no 429 for paceForget is no longer
// paced.
const (
	minPaceRate = 0.1  // requests per second: never slower
	maxPaceRate = 1e6  // a rate that paces nothing
	paceBackoff = 0.9  // the rate after a 429, of the rate it came at
	paceTarget  = 0.97 // how near the latest 429's rate the climb goes quickly
	paceForget  = 30 * time.Second
)

// pacer is one key's learned send rate; guarded by its gate's mutex.
type pacer struct {
	rate    float64 // requests per second
	ceiling float64 // the highest rate thought safe; 0 while slow-starting
	okRate  float64 // the rate of the latest success
	round   int64   // the slot of the first request sent at the current rate; 0: none yet
	sent    int64   // when the latest paced request went; 0: none yet
	last    int64   // when the latest 429 came
}

// newPacer starts pacing at now after a 429 with hint: one request per
// hint, doubling with each success.
func newPacer(now int64, hint time.Duration) *pacer {
	return &pacer{rate: clampRate(1 / max(hint, time.Millisecond).Seconds()), last: now}
}

func clampRate(r float64) float64 { return min(max(r, minPaceRate), maxPaceRate) }

// interval is the time between two paced requests.
func (p *pacer) interval() int64 { return int64(float64(time.Second) / p.rate) }

// next is the earliest time a request may go at now.
func (p *pacer) next(now int64) int64 {
	if p.sent == 0 {
		return now
	}
	return max(now, p.sent+p.interval())
}

// throttled cuts the rate for a 429 at now, once per rate: a 429 that
// comes before any request was sent at the current rate answers one sent
// at an earlier rate, which was cut already.
func (p *pacer) throttled(now int64) {
	p.last = now
	if p.round == 0 {
		return
	}
	if p.ceiling == 0 { // the slow start overshot: the upstream's rate is between the last two
		p.ceiling = clampRate((p.okRate + p.rate) / 2)
		p.setRate(max(p.okRate, minPaceRate))
		return
	}
	// Past the upstream's rate: the latest success's rate is the safe one.
	p.ceiling = clampRate(max(min(p.okRate, p.rate), minPaceRate))
	p.setRate(p.ceiling * paceBackoff)
}

// take records a request sent at now, when its slot was due.
func (p *pacer) take(now int64) {
	p.sent = now
	if p.round == 0 {
		p.round = now
	}
}

// setRate changes the rate; the round of requests sent at it starts with
// the next one.
func (p *pacer) setRate(r float64) {
	p.rate, p.round = clampRate(r), 0
}

// succeeded raises the rate for a success at now, once per round (only
// the answer to a request sent at the current rate says the rate was
// fine), and reports whether it did.
func (p *pacer) succeeded(now int64) bool {
	if p.round == 0 || now < p.round {
		return false
	}
	p.okRate = p.rate
	switch target := p.ceiling * paceTarget; {
	case p.ceiling == 0:
		p.setRate(p.rate * 2)
	case p.rate < target*0.99:
		p.setRate(min(p.rate+(target-p.rate)/2, target))
	default: // at the target: a twentieth of a request per second more each second
		p.setRate(p.rate + 0.05/p.rate)
	}
	return true
}

// stale reports that the key sent no 429 for paceForget: it is no longer
// paced.
func (p *pacer) stale(now int64) bool { return now-p.last >= int64(paceForget) }
