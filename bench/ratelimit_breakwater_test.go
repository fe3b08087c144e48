package bench_test

import (
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// breakwater's token buckets (ratelimit.go): one limiter alone, and the
// per-key registry a Transport asks on every attempt.
func init() {
	breakwaterAdmission = append(breakwaterAdmission,
		lib{"breakwater", func(b *testing.B) func() func() error {
			l, err := bw.NewRateLimiter(admitRate, admitRate)
			if err != nil {
				b.Fatal(err)
			}
			return admit(l.Allow)
		}},
		lib{"breakwater-keyed", func(b *testing.B) func() func() error {
			rs, err := bw.NewRateLimiters(admitRate, admitRate)
			if err != nil {
				b.Fatal(err)
			}
			return admit(func() bool { return rs.Get("api.example.com:443").Allow() })
		}},
	)
}
