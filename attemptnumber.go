package breakwater

import "context"

// attemptKey is the context key of an attempt's number.
type attemptKey struct{}

// AttemptFromContext returns the number of the [Transport] attempt that ctx,
// a request's context as the base transport receives it, belongs to: 1 for a
// call's first attempt, 2 for its first retry, and so on. A base transport
// reads it to tell a retry from a first try, for example to set the
// http.request.resend_count attribute (the number minus one) on the span of
// each attempt.
//
// The first attempt of a call carries no number, so that it costs nothing:
// any context without one reports 1, whether it is a first attempt or a
// request no Transport sent. A Transport inside another one sees the outer
// call's number on its own first attempt.
func AttemptFromContext(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// withAttempt returns ctx carrying attempt number n; the first attempt
// (n <= 1) keeps ctx as it is.
func withAttempt(ctx context.Context, n int) context.Context {
	if n <= 1 {
		return ctx
	}
	return context.WithValue(ctx, attemptKey{}, n)
}
