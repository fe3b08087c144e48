package breakwater

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

func (c *call) closeBody() {
	if hasBody(c.req) {
		_ = c.req.Body.Close()
	}
	c.sent = true
}

// deadlineAt returns the deadline of an attempt starting at now (Transport
// nanoseconds), the attempt timeout's or the call's, whichever comes first,
// and whether it is the attempt timeout's; 0 when there is none.
func (c *call) deadlineAt(now int64) (dl int64, attempt bool) {
	dl = c.dl
	if d := c.pol.AttemptTimeout; d > 0 {
		if a := now + int64(d); dl == 0 || a < dl {
			dl, attempt = a, true
		}
	}
	return dl, attempt
}

// attemptResult is one attempt, its result, and everything it holds until
// its outcome is settled: the breaker's permit (a half-open probe lease),
// its concurrency slot, its endpoint's in-flight count and probe
// (failover), and its own context (in hold, its one allocation, which also
// holds the request copy that carries the context and wraps the response
// body). What it holds is given back on one path per outcome: release when
// it is refused, fails, loses a race or is retried (after drain), handOver
// when its response goes to the caller, whose response body gives it back
// when it ends.
type attemptResult struct {
	req    *http.Request // as sent; nil when the attempt was not made
	resp   *http.Response
	err    error
	o      Outcome
	permit Permit
	slot   Slot
	ctx    context.Context // the attempt's context
	hold   *hold           // its own context and body wrapper; nil without a context of its own
	start  int64           // when it was sent, t.now(); 0 when none was
	end    int64           // when it ended
	waited bool            // admission may have waited: the clock moved
	n      int             // the attempt's number in the call
	up     *upstream       // the state of the key it went to
	// hedge marks a hedge; primary the attempt a round of the loop
	// started with, whose latency an adaptive hedge delay learns from.
	hedge, primary bool
	// ep is the endpoint the attempt went to (failover), key what its
	// state is kept under, probe whether it holds the endpoint's probe.
	ep    *endpoint
	key   string
	probe bool
	name  string      // the call's key, for outlier reports
	hs    *hedgeState // where a primary's latency goes; nil unless hedged
	// lost marks an attempt of a race that another answered before; it is
	// set before its context is cancelled.
	lost *atomic.Bool
	// retried is when a hedge took a retry from the retry budget.
	retried int64
}

// stop ends the attempt's own context, if it has one.
func (r *attemptResult) stop() {
	if r.hold != nil {
		r.hold.ctx.cancel()
	}
}

// abort returns what ends the attempt's own context, for discard; nil
// without one, or when its deadline is shared (its cancel closes no
// channel a read waits on: see deadlineCtx), and discard closes the body.
func (r *attemptResult) abort() func() {
	if r.hold == nil || r.hold.ctx.share != nil {
		return nil
	}
	return r.hold.ctx.cancel
}

// release gives back what the attempt holds: its context, its probe
// lease, its concurrency slot (with the verdict its outcome set) and its
// endpoint's in-flight count.
func (r *attemptResult) release() {
	r.stop()
	r.permit.release()
	r.slot.release()
	r.endpointDone()
}

// drain discards the response a retry, a lost race or a RetryIf error
// leaves behind, for at most d (see discard); release follows.
func (r *attemptResult) drain(d time.Duration) {
	if r.resp != nil {
		discard(r.resp, d, r.abort())
	}
}

// handOver returns the attempt's response to the caller: its body gives
// back what the attempt holds, and reports the end of an observed call,
// when it ends. The body wrapper is the hold's, or allocated only when the
// attempt holds something and the response has a body to track.
func (t *Transport) handOver(c *call, a *attemptResult) *http.Response {
	var tb *trackedBody
	switch {
	case a.hold == nil && a.permit.lease == 0 && !a.slot.held() && a.ep == nil && t.obs == nil:
		return a.resp // it holds nothing
	case untracked(a.resp):
		a.release()
		if t.obs != nil {
			var end callEnd
			t.observeEnd(c, a, &end)
			end.report(a.end, a.ep)
		}
		return a.resp
	case a.hold != nil:
		tb = a.hold.use()
	case t.obs != nil:
		h := &struct {
			trackedBody
			end callEnd
		}{trackedBody: trackedBody{ctx: a.ctx}}
		tb = &h.trackedBody
		tb.release.end = &h.end
	default:
		tb = &trackedBody{ctx: a.ctx}
	}
	r := &tb.release
	r.permit, r.slot, r.ep = a.permit, a.slot, a.ep
	if t.obs != nil {
		t.observeEnd(c, a, r.end)
	}
	tb.track(a.resp, a.end)
	return a.resp
}

// attempt makes one attempt: admission by the breaker, the pause gate, the
// rate limit and the bulkhead, then the base transport under the attempt's
// context, into r, which is zero.
func (t *Transport) attempt(c *call, r *attemptResult) {
	if t.admit(c, r, false, false) {
		r.primary = c.hedge != nil
		t.send(r)
	}
}

// admit prepares attempt c.attempts of c: its endpoint (failover),
// admission by the breaker, then the pause gate (the breaker asked again
// after a pause), the token bucket and the bulkhead waiting within the
// call's deadline (a hedge never waits), the request with a replayed body,
// and the attempt's context (always cancellable when racing), into r. It
// reports false with the refusal in r when the attempt is not to be made;
// r then holds at most its permit, which release gives back. r is zero
// when admit is called.
func (t *Transport) admit(c *call, r *attemptResult, hedge, racing bool) bool {
	r.ctx, r.n, r.key, r.name, r.hs = c.ctx, c.attempts, c.key, c.name, c.hedge
	permit, err := t.allow(c, r, hedge)
	if err != nil {
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, Outcome{Category: Rejected}
		return false
	}
	// The congestion limit, then the pause gate, rate limit and bulkhead:
	// waits and refusals per attempt.
	if c.up != nil && !t.cfg.noCongestion && !c.up.cong.admits() {
		err = rejected(ErrConcurrencyLimit, c.key, time.Time{})
	} else {
		permit, err = t.limits.admit(c, r, permit, hedge)
	}
	if err != nil {
		permit.release()
		t.unprobe(r)
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, classifyError(err)
		return false
	}
	r.permit = permit
	var body io.ReadCloser // a replay of the caller's body
	if (c.attempts > 1 || racing && c.sent) && hasBody(c.req) {
		if body, err = c.req.GetBody(); err != nil {
			r.permit.release()
			t.unprobe(r)
			r.slot.Ignore() // no attempt was made: nothing for an adaptive limit to learn
			r.err, r.o = err, Outcome{Category: Rejected}
			return false
		}
	}
	// The clock is read once per stage boundary: the call's start serves
	// its first attempt unless admission may have waited.
	r.start = c.start
	if c.attempts > 1 || r.waited {
		r.start = t.now()
	}
	own, byAttempt := c.deadlineAt(r.start)
	err = c.ctx.Err()
	if err == nil && own != 0 && r.start >= own {
		err = timedOut(deadlineCause(byAttempt), context.DeadlineExceeded)
	}
	if err != nil {
		// The deadline passed, or the caller gave up, while the attempt
		// was being admitted: it is not made, and not counted.
		switch {
		case body != nil:
			_ = body.Close()
		case !c.sent:
			c.closeBody()
		}
		c.sent = true
		r.slot.Ignore()
		t.unprobe(r)
		r.err, r.o, r.start = err, Outcome{Category: Rejected}, 0
		return false
	}
	r.ctx = withAttempt(c.ctx, c.attempts)
	areq := c.req
	if own != 0 || racing {
		h := newHold(t.obs != nil)
		h.ctx.init(r.ctx, &t.start, own, byAttempt)
		if at := shared(r.start, own); at != 0 && !racing && r.ctx.Done() == nil {
			h.ctx.dl, h.ctx.share = at, t.share
		}
		r.hold, r.ctx = h, &h.ctx
		h.req = *c.req.WithContext(r.ctx) // inlined: the copy is made in h
		areq = &h.req
	} else if r.ctx != c.ctx || body != nil {
		areq = c.req.WithContext(r.ctx) // a request copy only when something changed
	}
	if t.cfg.propagate {
		areq = propagate(areq, c.req, r.ctx, c.attempts, c.pol.MaxAttempts)
	}
	if body != nil {
		areq.Body = body
	}
	if r.ep != nil {
		areq = r.ep.rewrite(areq)
	}
	r.req, r.up = areq, c.up
	c.sent = true
	c.made++
	return true
}

// send hands an admitted attempt to the base transport and classifies its
// result. It needs nothing of the call, so that racing attempts run it on
// their own goroutines.
func (t *Transport) send(r *attemptResult) {
	if r.ep != nil {
		r.ep.begin()
	}
	cong := r.up != nil && !t.cfg.noCongestion
	if cong {
		r.up.cong.send()
	}
	r.resp, r.err = t.base.RoundTrip(r.req)
	r.end = t.now()
	took := time.Duration(r.end - r.start)
	if cong {
		r.up.cong.answered(took, r.resp != nil || r.ctx.Err() == context.DeadlineExceeded)
	}
	if r.err == nil {
		if err := refuseBadAnswer(r.req, r.resp); err != nil {
			r.resp, r.err = nil, err
		}
	}
	if r.err != nil {
		r.resp = nil
		r.err = markTimeout(r.ctx, r.err)
	}
	r.o = t.classify(r.resp, r.err)
	lost := r.lost != nil && r.lost.Load()
	switch {
	case r.resp != nil:
		r.up.answers.observe(r.end, took)
		if t.cfg.slowCall > 0 && r.o.Category == Success && took > t.cfg.slowCall {
			r.o.Category = Slow
		}
	case lost:
		r.o = Outcome{Category: Canceled} // another attempt answered: ours was cut short
	case r.o.Category == Canceled && r.up.hung(r.ctx, r.end, took):
		r.o.Category = Timeout // the caller gave up on a hang: see upstream.hung
	}
	judged := t.breakers.cfg.judge(r.o.Category)
	if r.ep != nil {
		v := epNeutral
		switch judged {
		case success:
			v = epSuccess
		case failure:
			v = epFailure
		}
		t.eps.record(r.name, r.ep, r.end, r.probe, v, r.o.Category == Throttled, r.o.RetryAfter)
	}
	if r.primary && (lost || judged == success) {
		r.hs.observe(r.end, took)
	}
}

// endpointName names the attempt's endpoint ("" without failover).
func (r *attemptResult) endpointName() string {
	if r.ep == nil {
		return ""
	}
	return r.ep.name
}

// endpointDone ends the attempt's time in flight at its endpoint; call it
// once, on every path where the releaser of a tracked body does not.
func (r *attemptResult) endpointDone() {
	if r.ep != nil && r.req != nil {
		r.ep.end()
	}
}
