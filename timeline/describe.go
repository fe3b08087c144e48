package timeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// Describe says in words what a breaker transition means, for a log line
// or a demo: what happened, why, and what the breaker does next.
func Describe(t breakwater.Transition) string {
	var b strings.Builder
	switch t.To {
	case breakwater.StateOpen:
		switch {
		case t.Reason == breakwater.ReasonTrip:
			b.WriteString("breaker tripped by hand")
		case t.From == breakwater.StateHalfOpen:
			fmt.Fprintf(&b, "breaker reopened: a probe failed (%s)", t.Category)
		default:
			fmt.Fprintf(&b, "breaker opened: %d failures reached its threshold (last: %s)", t.Failures, t.Category)
		}
		fmt.Fprintf(&b, "; rejects calls for %s", round(t.OpenFor))
		if t.Opens > 1 {
			fmt.Fprintf(&b, " (opening %d in a row: probes grow rarer as the outage ages)", t.Opens)
		}
	case breakwater.StateHalfOpen:
		switch t.Reason {
		case breakwater.ReasonRecovery:
			b.WriteString("breaker half-open: a recovery signal arrived")
		default:
			b.WriteString("breaker half-open: its open time elapsed")
		}
		b.WriteString("; lets a few probes through, rejects the rest")
	case breakwater.StateClosed:
		switch t.Reason {
		case breakwater.ReasonReset:
			b.WriteString("breaker reset by hand")
		case breakwater.ReasonRecovery:
			b.WriteString("breaker closed: a recovery signal arrived")
		default:
			b.WriteString("breaker closed: its probes succeeded")
		}
		b.WriteString("; admits every call again")
	}
	return b.String()
}

// round prints d to the millisecond below a second, to the tenth above.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
