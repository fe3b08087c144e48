package breakwater

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// timeoutCause returns ErrAttemptTimeout or ErrCallTimeout when ctx ended
// because of one of them, else nil.
func timeoutCause(ctx context.Context) error {
	if c, ok := ctx.(*deadlineCtx); ok && c.share != nil {
		return c.timeoutCause()
	}
	if ctx.Err() == nil {
		return nil
	}
	if c := context.Cause(ctx); c == ErrAttemptTimeout || c == ErrCallTimeout {
		return c
	}
	return nil
}

// markTimeout wraps err in an *Error when ctx ended because of one of our
// timeouts. (net/http's HTTP/1 transport returns the context's cause,
// its HTTP/2 transport ctx.Err(), and a broken read whatever broke: all of
// them become the same typed error.)
func markTimeout(ctx context.Context, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if c := timeoutCause(ctx); c != nil && !isTimeoutError(err) {
		return timedOut(c, err)
	}
	return err
}

// isTimeoutError reports whether err is or wraps the *Error of a timeout.
func isTimeoutError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Mechanism == MechTimeout
}

// CallTimeout is a timeout stage for the outside of a retry stage: one
// deadline over everything inside it, response body included, ending with
// cause [ErrCallTimeout]. d <= 0 makes it a pass-through.
func CallTimeout(d time.Duration) Stage { return timeoutStage(d, false) }

// AttemptTimeout is a timeout stage for the inside of a retry stage: a
// deadline over one attempt, response body included, ending with cause
// [ErrAttemptTimeout]. d <= 0 makes it a pass-through.
func AttemptTimeout(d time.Duration) Stage { return timeoutStage(d, true) }

// timeoutStage is a timeout stage of d, an attempt timeout's when attempt,
// else a call timeout's.
func timeoutStage(d time.Duration, attempt bool) Stage {
	return func(next http.RoundTripper) http.RoundTripper {
		if d <= 0 {
			return next
		}
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if isUpgrade(req) { // the connection outlives the call
				return next.RoundTrip(req)
			}
			h := &hold{} // the context, the request and the body wrapper, in one allocation
			h.ctx.init(req.Context(), &stageEpoch, int64(time.Since(stageEpoch)+d), attempt)
			h.req = *req.WithContext(&h.ctx) // inlined: the copy is made in h
			resp, err := next.RoundTrip(&h.req)
			if err == nil {
				if err = refuseBadAnswer(req, resp); err != nil {
					resp = nil
				}
			}
			if err != nil {
				h.ctx.cancel()
				return nil, markTimeout(&h.ctx, err)
			}
			h.use().track(resp, 0)
			return resp, nil
		})
	}
}
