package bench_test

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"golang.org/x/time/rate"
)

// admitRate is high enough that no limiter here ever rejects: the
// benchmarks measure the cost of admitting one call.
const admitRate = 1e9

// breakwaterAdmit, when set, returns a function that asks breakwater's
// outbound rate limiter for one token at admitRate per second and reports
// whether it was granted; ratelimit_breakwater_test.go (build tag limits)
// sets it.
var breakwaterAdmit func(b *testing.B) func() bool

// BenchmarkRateAdmission: take one token from a rate limiter that has
// plenty: x/time/rate's Limiter.Allow and failsafe-go's smooth rate
// limiter, TryAcquirePermit.
func BenchmarkRateAdmission(b *testing.B) {
	admit := func(allow func() bool) func() func() error {
		return same(func() error {
			if !allow() {
				return errRejected
			}
			return nil
		})
	}
	var libs []lib
	if breakwaterAdmit != nil {
		libs = append(libs, lib{"breakwater", func(b *testing.B) func() func() error { return admit(breakwaterAdmit(b)) }})
	}
	libs = append(libs,
		lib{"x-time-rate", func(*testing.B) func() func() error {
			return admit(rate.NewLimiter(admitRate, admitRate).Allow)
		}},
		lib{"failsafe-go", func(*testing.B) func() func() error {
			return admit(ratelimiter.NewSmooth[any](admitRate, time.Second).TryAcquirePermit)
		}},
	)
	compare(b, libs)
}
