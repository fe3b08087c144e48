package breakwater

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// timeoutCause returns ErrAttemptTimeout or ErrCallTimeout when ctx ended
// because of one of them, else nil.
func timeoutCause(ctx context.Context) error {
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
	if err == nil {
		return nil
	}
	var e *Error
	if c := timeoutCause(ctx); c != nil && !(errors.As(err, &e) && e.Mechanism == MechTimeout) {
		return timedOut(c, err)
	}
	return err
}

// CallTimeout is a timeout stage for the outside of a retry stage: one
// deadline over everything inside it, response body included, ending with
// cause [ErrCallTimeout]. d <= 0 makes it a pass-through.
func CallTimeout(d time.Duration) Stage { return timeoutStage(d, ErrCallTimeout) }

// AttemptTimeout is a timeout stage for the inside of a retry stage: a
// deadline over one attempt, response body included, ending with cause
// [ErrAttemptTimeout]. d <= 0 makes it a pass-through.
func AttemptTimeout(d time.Duration) Stage { return timeoutStage(d, ErrAttemptTimeout) }

func timeoutStage(d time.Duration, cause error) Stage {
	return func(next http.RoundTripper) http.RoundTripper {
		if d <= 0 {
			return next
		}
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if isUpgrade(req) { // the connection outlives the call
				return next.RoundTrip(req)
			}
			ctx, cancel := context.WithTimeoutCause(req.Context(), d, cause)
			resp, err := next.RoundTrip(req.WithContext(ctx))
			if err == nil {
				if err = refuseUnsolicitedUpgrade(req, resp); err != nil {
					resp = nil
				}
			}
			if err != nil {
				cancel()
				return nil, markTimeout(ctx, err)
			}
			track(ctx, resp, releaser{cancel: cancel})
			return resp, nil
		})
	}
}

// timeLeft returns the time from now to the earlier of ctx's deadline and
// dl (the zero time: none), and whether either exists.
func timeLeft(ctx context.Context, dl, now time.Time) (time.Duration, bool) {
	if d, ok := ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
		dl = d
	}
	if dl.IsZero() {
		return 0, false
	}
	return dl.Sub(now), true
}
