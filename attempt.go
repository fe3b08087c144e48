package breakwater

import (
	"context"
	"net/http"
	"time"
)

func release(cancel context.CancelFunc, p Permit) {
	if cancel != nil {
		cancel()
	}
	p.Release()
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
	resp   *http.Response
	err    error
	o      Outcome
	permit Permit
	ctx    context.Context    // the attempt's context
	cancel context.CancelFunc // ends it; nil when it has no deadline of its own
	start  int64              // when it was sent, t.now(); 0 when none was
	end    int64              // when it ended
}

// attempt makes one attempt: admission by the breaker, the pause gate, the
// rate limit and the bulkhead, then the base transport under the attempt's
// context.
func (t *Transport) attempt(c *call) attemptResult {
	r := attemptResult{ctx: c.ctx}
	permit, err := c.breaker.Allow()
	if err != nil {
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, Outcome{Category: Rejected}
		return r
	}
	// Pause gate, rate limit and bulkhead: waits and refusals per attempt.
	if err = t.limits.admit(c); err != nil {
		permit.Release()
		if !c.sent {
			c.closeBody()
		}
		r.err, r.o = err, classifyError(err)
		return r
	}
	areq := c.req
	if c.attempts > 1 && hasBody(c.req) {
		body, err := c.req.GetBody()
		if err != nil {
			permit.Release()
			c.slot.Ignore() // no attempt was made: nothing for an adaptive limit to learn
			r.err, r.o = err, Outcome{Category: Rejected}
			return r
		}
		areq = c.req.WithContext(c.ctx)
		areq.Body = body
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
	if err := r.ctx.Err(); err != nil {
		// The deadline passed while the attempt was being admitted: it is
		// not made, and not counted.
		if hasBody(areq) && (areq != c.req || !c.sent) {
			_ = areq.Body.Close()
		}
		c.sent = true
		c.slot.Ignore()
		r.err, r.o = markTimeout(r.ctx, err), Outcome{Category: Rejected}
		return r
	}
	if r.ctx != areq.Context() {
		areq = areq.WithContext(r.ctx)
	}
	c.sent = true
	c.made++
	r.resp, r.err = t.base.RoundTrip(areq)
	r.end = t.now()
	took := time.Duration(r.end - r.start)
	if r.err != nil {
		r.resp = nil
		r.err = markTimeout(r.ctx, r.err)
	}
	r.o = classifySafely(t.cfg.classifier, r.resp, r.err)
	switch {
	case r.resp != nil:
		c.up.answers.observe(r.end, took)
		if t.cfg.slowCall > 0 && r.o.Category == Success && took > t.cfg.slowCall {
			r.o.Category = Slow
		}
	case r.o.Category == Canceled && c.up.hung(c.ctx, r.end, took):
		r.o.Category = Timeout // the caller gave up on a hang: see upstream.hung
	}
	return r
}
