package breakwater

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// round runs one round of the retry loop: one attempt, or, for a call that
// may be hedged, a race of the attempt and its hedges when a hedge could
// be sent (a delay is known, the budget has room, attempts are left). a is
// zero when round is called.
func (t *Transport) round(c *call, a *attemptResult) {
	if hs := c.hedge; hs != nil && c.attempts < c.pol.MaxAttempts {
		now := t.now()
		if d, ok := hs.delayFor(now, t.cfg.hedging); ok && hs.room(now, t.cfg.hedging.budget) {
			*a = t.race(c, d)
			return
		}
	}
	t.attempt(c, a)
}

// race holds the attempts of one hedged round that are still running.
// Each runs on its own goroutine and hands its result over ch, unless the
// race was decided meanwhile: then it cleans up after itself.
type race struct {
	ch      chan *attemptResult
	mu      sync.Mutex
	decided bool
	lost    atomic.Bool // set, before they are cancelled, for the losers
	first   attemptResult
	buf     [4]*attemptResult // backs running for up to 3 hedges
	// What reporting a loser needs of its call, which the racing
	// goroutines must not touch.
	ctx          context.Context
	name, method string
	deadline     time.Time // the call's, bounding drains
}

// drainTime is how long a discarded response of the race may be read, as
// [call.drainTime].
func (rc *race) drainTime() time.Duration {
	if left, bounded := timeLeft(rc.ctx, rc.deadline, time.Now()); bounded && left < drainTime {
		return max(left, 0)
	}
	return drainTime
}

// race runs a round of the retry loop with hedges: the round's attempt,
// then after delay a hedge, up to the configured number, each admitted
// like any attempt but never waiting. The first answer the loop would not
// retry wins; an answer it would retry waits for the attempts still
// running, and when none is left it is the round's result. The losers are
// cancelled and clean up on their own goroutines; the winner is returned
// to the loop as if it had been the only attempt.
func (t *Transport) race(c *call, delay time.Duration) attemptResult {
	var first attemptResult
	if !t.admit(c, &first, false, true) {
		return first
	}
	rc := &race{ch: make(chan *attemptResult, t.cfg.hedging.maxHedges+1), ctx: c.ctx, name: c.name, method: c.req.Method, deadline: c.deadline()}
	rc.first = first
	f := &rc.first
	f.primary, f.lost = true, &rc.lost
	running := append(rc.buf[:0], f)
	t.launch(rc, f)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	hedges := 0
	for {
		select {
		case r := <-rc.ch:
			for i, x := range running {
				if x == r {
					running = append(running[:i], running[i+1:]...)
					break
				}
			}
			if len(running) > 0 && t.wouldRetry(c, r) {
				t.dropFailed(c, rc, r)
				continue
			}
			return t.settle(c, rc, r, running)
		case <-timer.C:
			if hedges >= t.cfg.hedging.maxHedges {
				continue
			}
			h, ok := t.hedge(c)
			if !ok {
				continue
			}
			h.lost = &rc.lost
			hedges++
			if t.obs != nil {
				t.emit(c, &Event{Kind: EventHedge, Attempt: h.n, Delay: time.Duration(hedges) * delay, Hedge: true, Endpoint: h.endpointName()})
			}
			running = append(running, h)
			t.launch(rc, h)
			if hedges < t.cfg.hedging.maxHedges {
				timer.Reset(delay)
			}
		}
	}
}

// wouldRetry reports whether the loop would retry after r, on its
// category or the user's RetryIf (a RetryIf error counts as an answer).
func (t *Transport) wouldRetry(c *call, r *attemptResult) bool {
	ok, stop := t.retryable(c, r.resp, r.err, r.o)
	return ok && stop == nil
}

// launch runs an admitted attempt of a race on its own goroutine.
func (t *Transport) launch(rc *race, r *attemptResult) {
	go func() {
		t.send(r)
		rc.mu.Lock()
		if rc.decided {
			rc.mu.Unlock()
			t.dropLoser(rc, r)
			return
		}
		rc.ch <- r // buffered for every attempt of the race: never blocks
		rc.mu.Unlock()
	}()
}

// hedge admits a hedge of c, if attempts and both budgets allow one and
// the admission stages let it through without waiting.
func (t *Transport) hedge(c *call) (*attemptResult, bool) {
	if c.attempts >= c.pol.MaxAttempts || c.ctx.Err() != nil {
		return nil, false
	}
	now := t.now()
	if !c.hedge.withdraw(now, t.cfg.hedging.budget) {
		return nil, false
	}
	budget := c.budget
	if budget != nil && !budget.withdraw(now, c.ep != nil) {
		c.hedge.refund(now)
		return nil, false
	}
	c.attempts++
	probe := c.gateProbe // the round's own attempt may be the probe after a pause
	r := &attemptResult{}
	ok := t.admit(c, r, true, true)
	c.gateProbe = c.gateProbe || probe
	if !ok {
		c.attempts--
		c.hedge.refund(now)
		if budget != nil {
			budget.refund(now, now)
		}
		return nil, false // not sent: no attempt, and no refusal of the call's work either
	}
	r.hedge = true
	if budget != nil {
		r.retried = now
	}
	return r, true
}

// settle ends a race with w as its result: the attempts still running are
// cancelled, the ones that finished unread are cleaned up, and c is set
// back to w's endpoint for the loop.
func (t *Transport) settle(c *call, rc *race, w *attemptResult, running []*attemptResult) attemptResult {
	rc.mu.Lock()
	rc.decided = true
	var unread []*attemptResult
	for len(rc.ch) > 0 {
		unread = append(unread, <-rc.ch)
	}
	rc.mu.Unlock()
	w.lost = nil // the flag is shared: the winner reads it no more
	rc.lost.Store(true)
	for _, r := range running {
		r.stop()
	}
	for _, r := range unread {
		go t.dropLoser(rc, r)
	}
	if w.ep != nil {
		c.key, c.ep, c.breaker, c.up = w.key, w.ep, w.ep.breaker, w.up
		if c.budget != nil {
			c.budget = w.up.budget
		}
	}
	if w.hedge && w.retried != 0 {
		c.retried = w.retried // a hedge that answered earns its retry back as a retry would
	}
	return *w
}

// dropFailed reports and releases an attempt of a race that failed while
// another was still running: the call goes on with the others. Its failure
// is charged as one a retry follows: it stays pending, dropped if another
// attempt answers, charged if the call ends without an answer (a half-open
// probe's, and every one with WithChargePerAttempt, is recorded at once). The
// pause gate, the concurrency limit and outlier detection learn from it as
// from any attempt.
func (t *Transport) dropFailed(c *call, rc *race, r *attemptResult) {
	t.limits.observeKey(r.key, &r.slot, r.resp, r.o)
	r.drain(rc.drainTime())
	switch t.breakers.cfg.judge(r.o.Category) {
	case success: // a RetryIf that retries an answer
		c.hasPending = false
		r.permit.record(r.o)
	case failure:
		if t.cfg.chargePerAttempt || r.permit.probe() {
			r.permit.record(r.o)
		} else {
			c.pending, c.pendingO, c.hasPending = r.permit, r.o, true
		}
	}
	t.finish(rc, r)
}

// dropLoser cleans up after an attempt that lost its race: its response,
// if one came, is drained and closed; its permit, slot and endpoint are
// given back without a verdict.
func (t *Transport) dropLoser(rc *race, r *attemptResult) {
	if r.resp != nil && t.limits.gates != nil {
		t.limits.gates.Observe(r.key, r.o, nil) // an answer all the same
	}
	r.drain(rc.drainTime())
	r.slot.Ignore()
	t.finish(rc, r)
}

// finish ends an attempt of a race that is not the round's result, and
// reports it.
func (t *Transport) finish(rc *race, r *attemptResult) {
	r.release()
	if t.obs != nil {
		end := t.now()
		notify(t.obs, rc.ctx, &Event{Kind: EventAttempt, Key: rc.name, Method: rc.method, Attempt: r.n, Category: r.o.Category, Status: r.o.Status,
			Duration: time.Duration(end - r.start), Err: r.err, Hedge: r.hedge, Endpoint: r.endpointName()})
	}
}
