package breakwater_test

import (
	"errors"
	"io"
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// A RetryError matches ErrRetryBudget exactly when the budget ended the call,
// matches what it wraps, and nothing else.
func TestRetryErrorMatches(t *testing.T) {
	budget := &bw.RetryError{Key: "k", Attempts: 2, Budget: true, Err: io.ErrUnexpectedEOF}
	plain := &bw.RetryError{Key: "k", Attempts: 3, Err: io.ErrUnexpectedEOF}
	for _, c := range []struct {
		err    error
		target error
		want   bool
	}{
		{budget, bw.ErrRetryBudget, true},
		{budget, io.ErrUnexpectedEOF, true},
		{budget, bw.ErrCircuitOpen, false},
		{budget, bw.ErrCallTimeout, false},
		{plain, bw.ErrRetryBudget, false},
		{plain, io.ErrUnexpectedEOF, true},
		{plain, bw.ErrCircuitOpen, false},
	} {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, c.target, got, c.want)
		}
	}
}
