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

// breakwaterAdmission are breakwater's rows, added by
// ratelimit_breakwater_test.go.
var breakwaterAdmission []lib

// admit is the work of one admission: allow must grant a token.
func admit(allow func() bool) func() func() error {
	return same(func() error {
		if !allow() {
			return errRejected
		}
		return nil
	})
}

// BenchmarkRateAdmission: take one token from a rate limiter that has
// plenty: x/time/rate's Limiter.Allow and failsafe-go's smooth rate
// limiter, TryAcquirePermit.
func BenchmarkRateAdmission(b *testing.B) {
	libs := append([]lib(nil), breakwaterAdmission...)
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
