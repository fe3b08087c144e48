package breakwater_test

import (
	"errors"
	"io"
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// An Error matches ErrRetryBudget exactly when the budget ended the call,
// matches what it wraps, and nothing else; one made by hand matches the
// sentinel of its mechanism.
func TestGivingUpErrorMatches(t *testing.T) {
	budget := &bw.Error{Key: "k", Mechanism: bw.MechRetryBudget, Attempts: 2, Err: io.ErrUnexpectedEOF}
	plain := &bw.Error{Key: "k", Attempts: 3, Err: io.ErrUnexpectedEOF}
	open := &bw.Error{Key: "k", Mechanism: bw.MechBreaker}
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
		{open, bw.ErrCircuitOpen, true},
		{open, bw.ErrHalfOpenBusy, false},
		{open, nil, false},
	} {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, c.target, got, c.want)
		}
	}
}
