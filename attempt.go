package breakwater

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

func release(cancel context.CancelFunc, p Permit) {
	if cancel != nil {
		cancel()
	}
	p.release()
}

func (c *call) closeBody() {
	if hasBody(c.req) {
		_ = c.req.Body.Close()
	}
	c.sent = true
}

// attemptContext returns the context of an attempt starting at now (read
// only with an attempt timeout): the caller's, carrying the attempt's
// number from the second on (see [AttemptFromContext]), bounded by the
// attempt timeout and the call's deadline, whichever comes first, with the
// matching cause.
func (c *call) attemptContext(now time.Time) (context.Context, context.CancelFunc) {
	ctx := withAttempt(c.ctx, c.attempts)
	dl, cause := c.deadline, ErrCallTimeout
	if d := c.pol.AttemptTimeout; d > 0 {
		if a := now.Add(d); dl.IsZero() || a.Before(dl) {
			dl, cause = a, ErrAttemptTimeout
		}
	}
	if dl.IsZero() {
		return ctx, nil
	}
	return context.WithDeadlineCause(ctx, dl, cause)
}

// attemptResult is one attempt's result and what it holds.
type attemptResult struct {
	req    *http.Request // as sent; nil when the attempt was not made
	resp   *http.Response
	err    error
	o      Outcome
	permit Permit
	ctx    context.Context    // the attempt's context
	cancel context.CancelFunc // ends it; nil when it has no deadline of its own
	start  int64              // when it was sent, t.now(); 0 when none was
	end    int64              // when it ended
	n      int                // the attempt's number in the call
	up     *upstream          // the state of the key it went to
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
	// set before cancel is called.
	lost *atomic.Bool
	slot Slot // its concurrency slot, while racing
	// retried is when a hedge took a retry from the retry budget.
	retried int64
}

// attempt makes one attempt: admission by the breaker, the pause gate, the
// rate limit and the bulkhead, then the base transport under the attempt's
// context.
func (t *Transport) attempt(c *call) attemptResult {
	r, ok := t.admit(c, c.deadline, false)
	if ok {
		r.primary = c.hedge != nil
		t.send(&r)
	}
	return r
}

// admit prepares attempt c.attempts of c: its endpoint (failover),
// admission by the breaker, then the pause gate (the breaker asked again
// after a pause), the token bucket and the bulkhead waiting until dl at the
// latest, the request with a replayed
// body, and the attempt's context (always cancellable when racing). It
// reports false with the refusal in r when the attempt is not to be made;
// on success c.slot holds the attempt's concurrency slot, if any.
func (t *Transport) admit(c *call, dl time.Time, racing bool) (r attemptResult, ok bool) {
	r = attemptResult{ctx: c.ctx, n: c.attempts, key: c.key, name: c.name, hs: c.hedge}
	permit, err := t.allow(c, &r)
	if err != nil {
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, Outcome{Category: Rejected}
		return r, false
	}
	// Pause gate, rate limit and bulkhead: waits and refusals per attempt.
	if permit, err = t.limits.admit(c, permit, dl); err != nil {
		permit.release()
		t.unprobe(&r)
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, classifyError(err)
		return r, false
	}
	areq := c.req
	if (c.attempts > 1 || racing && c.sent) && hasBody(c.req) {
		body, err := c.req.GetBody()
		if err != nil {
			permit.release()
			t.unprobe(&r)
			c.slot.Ignore() // no attempt was made: nothing for an adaptive limit to learn
			r.err, r.o = err, Outcome{Category: Rejected}
			return r, false
		}
		areq = c.req.WithContext(c.ctx)
		areq.Body = body
	}
	if r.ep != nil {
		areq = r.ep.rewrite(areq)
	}
	r.permit = permit
	var begin time.Time // read only when an attempt timeout needs the wall clock
	if c.pol.AttemptTimeout > 0 {
		begin = time.Now()
		r.start = int64(begin.Sub(t.start))
	} else {
		r.start = t.now()
	}
	r.ctx, r.cancel = c.attemptContext(begin)
	if racing && r.cancel == nil {
		r.ctx, r.cancel = context.WithCancel(r.ctx)
	}
	if err := r.ctx.Err(); err != nil {
		// The deadline passed while the attempt was being admitted: it is
		// not made, and not counted.
		if hasBody(areq) && (areq != c.req || !c.sent) {
			_ = areq.Body.Close()
		}
		c.sent = true
		c.slot.Ignore()
		t.unprobe(&r)
		r.err, r.o = markTimeout(r.ctx, err), Outcome{Category: Rejected}
		return r, false
	}
	if r.ctx != areq.Context() {
		areq = areq.WithContext(r.ctx)
	}
	r.req, r.up = areq, c.up
	c.sent = true
	c.made++
	return r, true
}

// send hands an admitted attempt to the base transport and classifies its
// result. It needs nothing of the call, so that racing attempts run it on
// their own goroutines.
func (t *Transport) send(r *attemptResult) {
	if r.ep != nil {
		r.ep.begin()
	}
	r.resp, r.err = t.base.RoundTrip(r.req)
	r.end = t.now()
	took := time.Duration(r.end - r.start)
	if r.err == nil {
		if err := refuseUnsolicitedUpgrade(r.req, r.resp); err != nil {
			r.resp, r.err = nil, err
		}
	}
	if r.err != nil {
		r.resp = nil
		r.err = markTimeout(r.ctx, r.err)
	}
	r.o = classifySafely(t.cfg.classifier, r.resp, r.err)
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
