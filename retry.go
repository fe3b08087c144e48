package breakwater

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/window"
)

// retryAfterJitter is the positive jitter added to a server's hint.
const retryAfterJitter = 0.1

// notRepeatable returns the safety rule that keeps req, whose call may
// repeat it when byPolicy, from being sent twice, or "".
func (t *Transport) notRepeatable(req *http.Request, byPolicy bool) Reason {
	switch {
	case !(byPolicy || idempotent(req)):
		return ReasonNotIdempotent
	case hasBody(req) && req.GetBody == nil:
		return t.bodyRule()
	}
	return ""
}

// bodyRule is the safety rule of a body that cannot be replayed.
func (t *Transport) bodyRule() Reason {
	if t.cfg.bufferBodies > 0 {
		return ReasonBodyTooLarge
	}
	return ReasonBodyNotReplayable
}

// CallReport tells the caller what a [Transport] decided about one call
// that its response and error do not show: the safety rule that kept it
// from being retried or hedged. Attach it to the request's context with
// [WithCallReport] and read it once RoundTrip (or http.Client.Do) has
// returned; for a call that returns an error, [Error].NotRetried says the
// same.
type CallReport struct {
	// NotRetried names the safety rule that kept the call from retrying an
	// attempt whose outcome called for a retry (a 503, a reset after the
	// request was sent, an attempt timeout), which the call then returned:
	// [ReasonNotIdempotent], [ReasonBodyNotReplayable] or
	// [ReasonBodyTooLarge]. Empty when no rule stopped a retry.
	NotRetried Reason
	// NotHedged names the safety rule that kept a Transport with
	// [WithHedging] from hedging the call; empty when it could be hedged
	// (whether or not a hedge was sent) or hedging is off.
	NotHedged Reason
}

type callReportKey struct{}

// WithCallReport returns a context that makes a [Transport] fill r for the
// calls made with it. Fields are set, never cleared: give each call its
// own report, and read it only after the call's RoundTrip returned.
// Without one, a call costs nothing more.
func WithCallReport(ctx context.Context, r *CallReport) context.Context {
	return context.WithValue(ctx, callReportKey{}, r)
}

// report returns the call's report, or nil; it is looked up only when a
// rule applies, so that calls pay nothing for it.
func (c *call) report() *CallReport {
	r, _ := c.ctx.Value(callReportKey{}).(*CallReport)
	return r
}

// skipRetry records that rule kept the call from retrying.
func (c *call) skipRetry(rule Reason) {
	c.notRetried = rule
	if r := c.report(); r != nil {
		r.NotRetried = rule
	}
}

// retryBudget limits retries per key to ratio × calls plus floor per second
// over a sliding window, so an outage cannot multiply the load on an
// upstream by the attempt count. A retry that succeeds is given back: the
// budget caps the retries that did not help. In a storm no retry helps and
// the cap holds; in a flap most do, and the budget is not spent on them.
type retryBudget struct {
	w       window.Rate // calls and retries
	ratio   float64
	reserve float64      // floor × window seconds
	failing atomic.Int32 // attempts in a row that failed, up to failingStreak
}

// failingStreak is how many attempts in a row must fail before a key's
// retries lose the budget's floor: a key that answers nothing but
// failures (an outage) gets only the ratio of its calls as retries, since
// another attempt at it helps no one; the first blip of a quiet key still
// has its floor.
const failingStreak = 5

func newRetryBudget(ratio, floor float64, within time.Duration) *retryBudget {
	return &retryBudget{w: window.NewRate(within), ratio: ratio, reserve: floor * within.Seconds()}
}

func (b *retryBudget) deposit(now int64) { b.w.Add(now, 1, 0) }

// answered records the category of an attempt at the budget's key.
func (b *retryBudget) answered(c Category) {
	switch n := b.failing.Load(); {
	case helped(c):
		if n != 0 {
			b.failing.Store(0)
		}
	case c.Failure() && n < failingStreak:
		b.failing.Add(1)
	}
}

// withdraw takes one retry from the budget, or reports false; elsewhere
// says the retry goes to another key than the one that failed (failover),
// which keeps the floor whatever that key's streak.
func (b *retryBudget) withdraw(now int64, elsewhere bool) bool {
	reserve := b.reserve
	if !elsewhere && b.failing.Load() >= failingStreak {
		reserve = 0
	}
	calls, retries := b.w.Sum(now)
	if float64(retries+1) > b.ratio*float64(calls)+reserve {
		return false
	}
	b.w.Add(now, 0, 1)
	return true
}

// refund gives back a retry withdrawn at w, if the window still counts it.
func (b *retryBudget) refund(now, w int64) {
	if b.w.Holds(now, w) {
		b.w.Add(now, 0, -1)
	}
}

// helped reports whether an attempt of category cat, made as a retry,
// earns its retry back: the upstream served the request.
func helped(cat Category) bool {
	switch cat {
	case Success, ClientError, Slow:
		return true
	}
	return false
}

// sleep waits d before the next attempt, within the call's deadline. It
// returns nil once d has passed, or the error that ends the call when the
// caller's context ends or the call timeout passes first.
func (c *call) sleep(d time.Duration) error {
	cut := false
	if c.dl != 0 {
		if left := time.Until(c.deadline()); left <= d {
			d, cut = left, true
		}
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return ctxError(c.ctx)
		}
	} else if c.ctx.Err() != nil {
		return ctxError(c.ctx)
	}
	if cut {
		return timedOut(ErrCallTimeout, context.DeadlineExceeded)
	}
	return nil
}

// drainTime is how long a discarded response of c may be read, from now
// (Transport nanoseconds): drainTime, or less when the call has less time
// left.
func (c *call) drainTime(now int64) time.Duration {
	if left, bounded := c.remaining(now); bounded && left < drainTime {
		return left
	}
	return drainTime
}

// ctxError is what a call returns when its context ended: the caller's own
// error unchanged, or an *Error for our call timeout.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if c := timeoutCause(ctx); c != nil {
		return timedOut(c, err)
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, err) {
		return c
	}
	return err
}

// RetryStage is the retry loop alone, with the pause gate and the retry
// budget, configured by the options of the retry loop (attempts, backoff,
// RetryIf, idempotency, body buffering, the budget, charging, the key, the
// classifier, the pause gate's, observers, insights). It has no timeouts,
// breaker or limits of its own: compose [CallTimeout], [AttemptTimeout]
// and [BreakerStage] around and inside it; any other option (a timeout, a
// breaker option, a limit, [WithHedging], [WithFailover], which need the
// admission stages inside the loop) is a construction error, reported with
// every invalid option.
func RetryStage(opts ...Option) (Stage, error) {
	cfg := newConfig()
	cfg.stage, cfg.callTimeout, cfg.attemptTimeout = true, 0, 0
	s := settings{to: "RetryStage", transport: &cfg, pause: &cfg.pause}
	s.applyOptions(opts)
	proto, err := newTransport(cfg, s.errs)
	if err != nil {
		return nil, err
	}
	return func(next http.RoundTripper) http.RoundTripper {
		t := *proto
		t.base = next
		t.stage = true
		if in := innerTransport(next); in != nil {
			t.warn(stackedWarning(t.cfg.maxAttempts, in))
		}
		return &t
	}, nil
}

// run is the retry loop. The call timeout is a deadline checked between
// attempts and folded into each attempt's context, so one call costs one
// context per attempt, made lazily (see deadlineCtx). With hedging, a
// round of the loop may make several attempts at once (hedgerace.go); the loop
// goes on with the one that answered.
func (t *Transport) run(c *call) (*http.Response, error) {
	if t.obs != nil {
		t.emit(c, &Event{Kind: EventCallStart})
		if c.notHedged != "" {
			t.emit(c, &Event{Kind: EventHedgeSkipped, Reason: c.notHedged})
		}
	}
	for {
		c.attempts++
		c.rounds++
		var a attemptResult
		t.round(c, &a)
		now := a.end // the clock is read once as an attempt ends
		if c.hedge != nil {
			now = t.now() // a race may go on after its winner ended
		}
		t.limits.observe(c, &a)
		if c.budget != nil {
			c.budget.answered(a.o.Category)
		}
		c.throttled = a.o.Category == Throttled
		wait, retry, budgetSpent, stopErr := t.decide(c, &a, now)
		if stopErr != nil {
			a.drain(c.drainTime(now))
			a.resp, a.err = nil, stopErr
		}

		if t.obs != nil {
			t.observeAttempt(c, &a, retry, wait, budgetSpent)
		}
		t.charge(c, &a, retry)
		if !retry {
			c.settle()
			if c.retried != 0 && helped(a.o.Category) {
				c.budget.refund(now, c.retried)
			}
			if a.resp != nil {
				return t.handOver(c, &a), nil // its body ends the call
			}
			a.release()
			err := c.fail(a.err, budgetSpent)
			t.end(c, a.o, err)
			return nil, err
		}
		a.drain(c.drainTime(now))
		a.release()
		if err := c.sleep(wait); err != nil {
			c.settle()
			if _, ours := err.(*Error); ours {
				err = c.fail(err, false)
			}
			t.end(c, classifyError(err), err)
			return nil, err
		}
		c.prevWait = wait
	}
}

// charge reports an attempt's outcome to the breaker by the rules of the
// package documentation ("Charging the breaker"): a failure that a retry
// follows stays pending until the call ends (settle), unless it is a
// half-open probe's or every failing attempt is charged; a success forgets it;
// neutral outcomes and local refusals leave it; the breaker's own refusal
// drops it. An inner BreakerStage defers its failing permits here too.
func (t *Transport) charge(c *call, a *attemptResult, retry bool) {
	if a.o.Category == Rejected && a.resp == nil && a.err != nil {
		if mechanismOf(a.err) == MechBreaker {
			c.hasPending = false
		}
		return // no attempt was made
	}
	p, o := a.permit, a.o
	v := t.breakers.cfg.judge(o.Category)
	if c.melt != nil {
		if dp, do, ok := c.melt.take(); ok {
			p, o, v = dp, do, failure
		}
	}
	switch {
	case v == failure && retry && !t.cfg.chargePerAttempt && !p.probe():
		c.pending, c.pendingO, c.hasPending = p, o, true
		return
	case v != neutral:
		c.hasPending = false // the call's own outcome: recovered, or failed for good
	}
	p.record(o)
}

// settle charges the failure the call showed and left pending, if any; it
// is called once, when the call ends.
func (c *call) settle() {
	if c.hasPending {
		c.hasPending = false
		c.pending.record(c.pendingO)
	}
}

// fail builds the error a call returns (see [Error]), naming the safety
// rule that kept it from retrying, if one did: see failed.
func (c *call) fail(err error, budget bool) error {
	err = c.failed(err, budget)
	if c.notRetried == "" {
		return err
	}
	e, ours := err.(*Error)
	if !ours {
		return &Error{Key: c.name, Attempts: c.made, Err: err, NotRetried: c.notRetried}
	}
	if e.shared {
		cp := *e
		cp.shared = false
		e = &cp
	}
	e.NotRetried = c.notRetried
	return e
}

// failed builds the error a call returns (see [Error]): one of our own
// counted for the call; an error of the upstream's itself when at most one
// attempt was made, else wrapped with the attempts made; wrapped in the
// retry budget's refusal when that stopped the call, unless a timeout of
// ours ended the last attempt: timeouts come first (see the table of
// rejections), so an attempt timeout the budget allowed no retry after is
// the attempt timeout's alone. An attempt timeout after which the call
// timeout left no room for another attempt is the call timeout's: the call
// ran out of time, whether or not a retry's jittered wait would have
// fitted.
func (c *call) failed(err error, budget bool) error {
	e, ours := err.(*Error)
	switch {
	case budget && !(ours && e.Mechanism == MechTimeout):
		return &Error{Key: c.name, Mechanism: MechRetryBudget, Attempts: c.made, Err: err, sentinel: ErrRetryBudget}
	case ours && c.outOfTime && e.sentinel == ErrAttemptTimeout:
		return &Error{Key: c.key, Mechanism: MechTimeout, Attempts: c.made, Err: context.DeadlineExceeded, sentinel: ErrCallTimeout}
	case ours:
		return e.withAttempts(c.name, c.made)
	case c.made <= 1:
		return err
	}
	return &Error{Key: c.name, Attempts: c.made, Err: err}
}

// remaining is the time left at now (Transport nanoseconds) before the
// earlier of the caller's deadline and the call timeout, and whether there
// is one.
func (c *call) remaining(now int64) (time.Duration, bool) {
	left, bounded := time.Duration(c.dl-now), c.dl != 0
	if d, ok := c.ctx.Deadline(); ok {
		if l := d.Sub(c.t.start.Add(time.Duration(now))); !bounded || l < left {
			left, bounded = l, true
		}
	}
	return left, bounded
}

// callBound reports whether the call timeout, rather than the caller's
// deadline, is the call's earliest deadline.
func (c *call) callBound() bool {
	if c.dl == 0 {
		return false
	}
	d, ok := c.ctx.Deadline()
	return !ok || !d.Before(c.deadline())
}

// decide reports whether to retry after an attempt and how long to wait
// first; budget reports that the retry budget refused, and a non-nil stop
// is a RetryIf error that ends the call.
func (t *Transport) decide(c *call, a *attemptResult, now int64) (wait time.Duration, retry, budget bool, stop error) {
	resp, err, o := a.resp, a.err, a.o
	switch {
	case o.Category == Rejected || o.Category == Canceled:
		return 0, false, false, nil
	case resp != nil && t.cfg.retryIf == nil && !o.Category.Retryable():
		return 0, false, false, nil // an answer to return (outOfTime matters only to errors)
	case c.ctx.Err() != nil:
		return 0, false, false, nil
	}
	left, bounded := c.remaining(now)
	if bounded && left <= 0 {
		c.outOfTime = c.callBound()
		return 0, false, false, nil
	}
	if ok, stop := t.retryable(c, resp, err, o); !ok || stop != nil {
		return 0, false, false, stop
	}
	var push string // what a breakwater server asks of its caller
	if resp != nil && t.cfg.propagate {
		push = resp.Header.Get(headerPushback)
	}
	// With failover, a throttled answer, or one that asks for another
	// replica, speaks for its endpoint alone (whose pause gate holds it):
	// the retry goes at once to an endpoint the call has not tried, when
	// one is free, as pick chooses.
	elsewhere := (o.Category == Throttled || push == pushbackElsewhere) && c.ep != nil && t.eps.freeLeft(now, c.tried, t.endpointState)
	switch {
	case push == pushbackNone || push == pushbackElsewhere && !elsewhere:
		c.skipRetry(ReasonPushback)
		return 0, false, false, nil
	case c.attempts >= c.pol.MaxAttempts:
		return 0, false, false, nil
	case !(c.pol.Idempotent || idempotent(c.req) || o.NotSent):
		c.skipRetry(ReasonNotIdempotent)
		return 0, false, false, nil
	case hasBody(c.req) && c.req.GetBody == nil:
		c.skipRetry(t.bodyRule())
		return 0, false, false, nil
	case o.RetryAfterTooLong && !elsewhere:
		return 0, false, false, nil
	}
	if elsewhere {
		c.throttled = false // not a retry of the throttled endpoint's: no place in its line
	} else {
		var ok bool
		if c.planned {
			wait = t.cfg.plan()[c.attempts-1]
		} else if wait, ok = backoffSafely(t.cfg.backoff, c.attempts, c.prevWait); !ok {
			return 0, false, false, nil // a Backoff that panics means "do not retry"
		}
		if o.Status == http.StatusBadGateway && c.attempts == 1 {
			wait = 0 // a gateway's backend failed: at once, its next pick is another
		}
		if o.HasRetryAfter {
			hint := o.RetryAfter
			if !c.planned {
				hint += time.Duration(rand.Float64() * retryAfterJitter * float64(o.RetryAfter))
			}
			wait = max(wait, hint)
		}
	}
	answered := resp != nil || c.planned && o.Status != 0
	if need := wait; bounded && (left <= need || answered && left <= need+drainTime) {
		c.outOfTime = c.callBound()
		return 0, false, false, nil // the wait, and draining the response, must fit
	}
	if c.budget != nil {
		if !c.budget.withdraw(now, c.ep != nil) {
			return 0, false, true, nil
		}
		c.retried = now
	}
	return wait, true, false, nil
}

// retryable asks the user's RetryIf, or else the category. A RetryIf that
// panics means "do not retry".
func (t *Transport) retryable(c *call, resp *http.Response, err error, o Outcome) (ok bool, stop error) {
	if t.cfg.retryIf == nil || c.planned {
		return o.Category.Retryable(), nil
	}
	defer func() {
		if recover() != nil {
			ok, stop = false, nil
		}
	}()
	return t.cfg.retryIf(c.ctx, resp, err)
}

// bufferBody returns a copy of req whose body is replayable when it fits in
// limit bytes; a longer body is passed on unchanged and not replayable.
func bufferBody(req *http.Request, limit int64) *http.Request {
	buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	r := req.WithContext(req.Context())
	if err == nil && int64(len(buf)) <= limit {
		_ = req.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(buf))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		r.ContentLength = int64(len(buf))
		return r
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
	return r
}

// meltSlot carries a failing attempt's permit from a BreakerStage out to
// the enclosing RetryStage, which charges it only if the call gives up.
type meltSlot struct {
	mu      sync.Mutex
	pending Permit
	outcome Outcome // as the breaker stage's classifier saw it
	has     bool
}

type meltKey struct{}

func (m *meltSlot) defer_(p Permit, o Outcome) {
	m.mu.Lock()
	m.pending, m.outcome, m.has = p, o, true
	m.mu.Unlock()
}

// take returns the deferred permit of the last attempt and its outcome, if
// any.
func (m *meltSlot) take() (Permit, Outcome, bool) {
	if m == nil {
		return Permit{}, Outcome{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, o, ok := m.pending, m.outcome, m.has
	m.pending, m.outcome, m.has = Permit{}, Outcome{}, false
	return p, o, ok
}

// snapshot returns the budget's state at now, as withdraw judges it.
func (b *retryBudget) snapshot(key string, now int64) RetryBudgetSnapshot {
	reserve := b.reserve
	if b.failing.Load() >= failingStreak {
		reserve = 0
	}
	calls, retries := b.w.Sum(now)
	s := RetryBudgetSnapshot{Key: key, Calls: calls, Retries: retries, Allowed: b.ratio*float64(calls) + reserve}
	s.Spent = retries > 0 && float64(retries+1) > s.Allowed
	return s
}
