package breakwater

import (
	"time"

	"github.com/breakwater-go/breakwater/internal/window"
)

// A 503 with Retry-After asks the client to wait "before retrying the
// request" (RFC 9110 §10.2.3): it delays that call's retry, and it says
// something about the host only in proportion. Behind a load balancer one
// overloaded backend of four answers a quarter of the requests that way
// while the host serves the rest; a maintenance window answers all of them.
// The gate's overload admission tells the two apart the way client-side
// throttling does in Google's SRE book (chapter 21): requests <= K × accepts
// with K = 2, that is, the key keeps its traffic while at most half of the
// attempts it sent in the last second were answered 503 with a hint (an
// attempt still waiting, or one that failed otherwise, is not such an
// answer, so a host whose good backends are merely slower than its
// overloaded one is not held), and is held once they are the majority and
// at least overloadMinimum of them came within the window: a single 503
// with a hint, after a quiet second, is that one request's business.
// Two refinements suit a client that must see a recovery at once: the "+1"
// of the book's formula is a probe let through every overloadProbeEvery
// (175 ms: a recovery is seen within that, and a 3 s maintenance window
// costs about 20 requests, whatever the offered load), then at the
// breaker's cadence for an old outage, a 32nd of the hold's age (cadence.go),
// instead of a coin flip, and a probe that is answered otherwise ends the
// hold at once instead of after the window slides. Attempts are counted
// from the first 503 with a hint on, so a key that never sees one pays
// nothing for it.
const (
	overloadWindow        = time.Second            // attempts counted
	overloadProbeEvery    = 175 * time.Millisecond // one probe per this while the hold is young (cadence.go)
	overloadMaxProbeEvery = time.Minute            // the longest wait for a probe, however old the hold
	overloadMinimum       = 2                      // overload answers within the window before a hold
)

// overload is one key's overload admission; guarded by its gate's mutex.
// It exists while the key answered 503 with a hint within the window.
type overload struct {
	w         window.Rate // attempts sent, and overload answers among them
	last      int64       // when the latest overload answer came
	until     int64       // when the latest overload answer's hint ends
	held      bool        // overload answers are the majority of recent attempts
	heldAt    int64       // while held: when the hold began
	nextProbe int64       // while held: when the next probe may go
	lastProbe int64       // when the latest probe went
	probeOut  bool        // the latest probe is not answered yet
}

// newOverload starts counting at now, when an attempt sent before was
// answered 503 with a hint.
func newOverload(now int64) *overload {
	o := &overload{w: window.NewRate(overloadWindow)}
	o.w.Add(now, 1, 0)
	return o
}

// sent counts an attempt let through at now.
func (o *overload) sent(now int64) { o.w.Add(now, 1, 0) }

// answer records an answer at now, an overload one (503 with a hint that
// ends at until) or not, and reports whether the key's hold began or ended.
func (o *overload) answer(now int64, over bool, until int64) (began, ended bool) {
	o.probeOut = false
	if over {
		o.w.Add(now, 0, 1)
		o.last, o.until = now, max(o.until, until)
	}
	switch sent, overs := o.w.Sum(now); {
	case !o.held && overs >= overloadMinimum && 2*overs > sent:
		o.held, o.heldAt, o.nextProbe = true, now, now+int64(overloadProbeEvery)
		return true, false
	case o.held && !over:
		// A probe got through: the host answers again.
		o.held = false
		o.w.Clear()
		return false, true
	}
	return false, false
}

// stale reports that the key has given no overload answer for a window and
// holds nothing: the state can go.
func (o *overload) stale(now int64) bool {
	return !o.held && now-o.last >= int64(overloadWindow)
}

// askUntil is how long every call must ask the gate of a held key: past
// the next probe by a young hold's probe spacing, so that the probe finds
// the calls waiting and those after it find the hold, whenever its answer
// comes.
func (o *overload) askUntil() int64 {
	return max(o.until, o.nextProbe+int64(overloadProbeEvery))
}

// probe reports whether an attempt at now may go while held, and takes the
// turn when it may.
func (o *overload) probe(now int64) bool {
	if now < o.nextProbe {
		return false
	}
	every := probeEvery(time.Duration(now-o.heldAt), overloadProbeEvery, overloadMaxProbeEvery)
	o.lastProbe, o.nextProbe, o.probeOut = now, now+int64(every), true
	return true
}
