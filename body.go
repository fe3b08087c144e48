package breakwater

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// trackedBody releases what an attempt holds (its timeout context, a
// concurrency slot, a probe lease, its endpoint's in-flight count) and
// reports the end of an observed call when the response body is closed or
// read to EOF or an error, whichever comes first. Reading a good body
// therefore never fails because RoundTrip returned; a body that outlives
// the attempt timeout fails with the timeout.
type trackedBody struct {
	rc      io.ReadCloser
	ctx     context.Context // the attempt's context, to report our timeouts
	state   atomic.Uint32   // bodyLive, bodyReleasing or bodyReleased, maybe | bodyWaited
	own     bool            // ctx is the attempt's own deadlineCtx, ended at release
	release releaser
	// stop unregisters expire; set before the response is returned and
	// read only on the body's own path (Read, Close).
	stop func() bool
}

// hold is the one allocation of an attempt with a context of its own: the
// context, the copy of the request that carries it, and the wrapper of its
// response body.
type hold struct {
	ctx  deadlineCtx
	req  http.Request
	body trackedBody
}

// observedHold is the hold of an observed Transport's attempt, with room
// for the call's end its body reports (see callEnd): unobserved attempts
// do not carry it.
type observedHold struct {
	hold
	end callEnd
}

// newHold returns an attempt's hold, with room for the call's end when
// observed.
func newHold(observed bool) *hold {
	if !observed {
		return &hold{}
	}
	h := &observedHold{}
	h.body.release.end = &h.end
	return &h.hold
}

// use makes h's body wrap the response of an attempt under h's context.
func (h *hold) use() *trackedBody {
	h.body.ctx, h.body.own = &h.ctx, true
	return &h.body
}

// releaser is everything one response holds until its body ends, besides
// its context.
type releaser struct {
	permit Permit
	slot   Slot
	ep     *endpoint // counts the attempt in flight (failover)
	end    *callEnd  // the call's end, to report; nil when not observed
}

func (r *releaser) empty() bool {
	return r.permit.lease == 0 && !r.slot.held() && r.ep == nil && (r.end == nil || r.end.t == nil)
}

// run gives back what r holds and reports the call's end, at now
// (Transport nanoseconds; 0: read the clock).
func (r *releaser) run(now int64) {
	r.permit.release()
	r.slot.release()
	if r.ep != nil {
		r.ep.end()
	}
	r.end.report(now, r.ep)
}

// track makes resp.Body release r when it ends, in a body it allocates
// only when r holds something (see trackedBody.track).
func track(ctx context.Context, resp *http.Response, r releaser) {
	switch {
	case r.empty():
	case untracked(resp):
		r.run(0)
	default:
		tb := &trackedBody{ctx: ctx, release: r}
		tb.track(resp, 0)
	}
}

// untracked reports whether resp's body ends with RoundTrip: it has none,
// or it is the connection a 101 Switching Protocols upgraded (an
// io.ReadWriteCloser that WebSocket and h2c clients and
// httputil.ReverseProxy rely on), no longer an attempt in flight.
func untracked(resp *http.Response) bool {
	return resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols
}

// track makes resp.Body, read under b.ctx, release what b holds when it
// ends; a response whose body is untracked releases it at once, at now
// (see releaser.run).
func (b *trackedBody) track(resp *http.Response, now int64) {
	if untracked(resp) {
		b.state.Store(bodyReleased)
		b.releaseAll(now)
		return
	}
	b.rc = resp.Body
	if b.release.slot.held() && b.ctx.Done() != nil {
		// A body nobody closes must not hold its concurrency slot past
		// the attempt: give it back when the attempt's context ends.
		b.stop = context.AfterFunc(b.ctx, b.expire)
	}
	resp.Body = b
}

// releaseAll ends b's own context and runs its releaser.
func (b *trackedBody) releaseAll(now int64) {
	if b.own {
		b.ctx.(*deadlineCtx).cancel()
	}
	b.release.run(now)
}

// testHookRelease, set by a test, runs as a release of b begins.
var testHookRelease func(b *trackedBody)

// finish releases what the response holds, once; called on the body's
// path (Read, Close). When the expiry got there first, it returns once the
// expiry's release is done, so that a caller whose Close returned never
// finds the slot still held.
func (b *trackedBody) finish() {
	if b.stop != nil {
		b.stop() // an expiry already started is waited for below
	}
	b.releaseOnce()
}

// expire releases what the response holds when the attempt's context
// ended before the body did.
func (b *trackedBody) expire() { b.releaseOnce() }

// States of a trackedBody's release; bodyWaited is or-ed in by a Close
// waiting for a release under way.
const (
	bodyLive uint32 = iota
	bodyReleasing
	bodyReleased
	bodyWaited uint32 = 4
)

// bodyWaits is where a Close that raced an expiry waits for the expiry's
// release to end (rare: one condition for every body is enough).
var bodyWaits = sync.Cond{L: new(sync.Mutex)}

func (b *trackedBody) releaseOnce() {
	if !b.state.CompareAndSwap(bodyLive, bodyReleasing) {
		b.waitReleased()
		return
	}
	if testHookRelease != nil {
		testHookRelease(b)
	}
	b.releaseAll(0)
	if b.state.Swap(bodyReleased)&bodyWaited != 0 {
		bodyWaits.L.Lock()
		bodyWaits.Broadcast()
		bodyWaits.L.Unlock()
	}
}

// waitReleased returns once the release under way, if any, has ended.
func (b *trackedBody) waitReleased() {
	bodyWaits.L.Lock()
	defer bodyWaits.L.Unlock()
	for {
		s := b.state.Load()
		switch {
		case s == bodyReleased:
			return
		case s&bodyWaited != 0 || b.state.CompareAndSwap(s, s|bodyWaited):
			bodyWaits.Wait() // the releaser broadcasts under L after it set bodyReleased
		}
	}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		err = markTimeout(b.ctx, err)
		b.finish()
	}
	return n, err
}

// Close closes the underlying body, then releases the attempt's resources.
func (b *trackedBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

// isUpgrade reports whether req asks to switch protocols (Connection:
// Upgrade with an Upgrade field, as WebSocket handshakes do). Timeouts do
// not apply to such requests: they would bound the upgraded connection.
func isUpgrade(req *http.Request) bool {
	if len(req.Header["Upgrade"]) == 0 {
		return false
	}
	for _, v := range req.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// errUnsolicitedUpgrade ends an attempt whose upstream answered 101
// Switching Protocols to a request that did not ask to switch: the
// connection then speaks a protocol nobody agreed on, and reading a body
// from it could wait forever. It is a [NetworkError], retried like a reset.
var errUnsolicitedUpgrade = errors.New("breakwater: 101 Switching Protocols to a request that did not ask to upgrade")

// errNilResponse ends an attempt whose base RoundTripper returned neither
// a response nor an error, breaking the [http.RoundTripper] contract, as
// http.Client reports it. It is a [NetworkError].
var errNilResponse = errors.New("breakwater: the base RoundTripper returned a nil response and a nil error")

// refuseBadAnswer returns the error that an answer without one stands
// for: errNilResponse for no response, errUnsolicitedUpgrade (resp's body
// closed) when resp switches protocols although req did not ask to; it
// returns nil otherwise.
func refuseBadAnswer(req *http.Request, resp *http.Response) error {
	if resp == nil {
		return errNilResponse
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || isUpgrade(req) {
		return nil
	}
	if resp.Body != nil {
		_ = resp.Body.Close() // an upgraded body closes the connection
	}
	return errUnsolicitedUpgrade
}

// drainLimit bounds how much of a discarded response is read so that its
// connection can be reused.
const drainLimit = 64 << 10

// drainTime bounds how long a discarded response is read. A body that has
// not arrived by then is abandoned: its connection is closed rather than
// waited on, so a stalled body costs the retry at most this long.
const drainTime = 20 * time.Millisecond

// discard drains a response the caller will not see, up to drainLimit bytes
// and for at most d, and closes it. When d runs out first, abort (which
// ends the attempt's context, which net/http aborts the read on) is
// called, or the body is closed when there is no abort.
func discard(resp *http.Response, d time.Duration, abort func()) {
	if resp == nil || resp.Body == nil {
		return
	}
	body := resp.Body
	if d > 0 {
		stop := abort
		if stop == nil {
			stop = func() { _ = body.Close() }
		}
		t := time.AfterFunc(d, stop)
		_, _ = io.CopyN(io.Discard, body, drainLimit)
		if !t.Stop() && abort == nil {
			return // closed by the timer
		}
	}
	_ = body.Close()
}
