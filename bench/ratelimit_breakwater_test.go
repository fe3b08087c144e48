package bench_test

import (
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// breakwater's token buckets (ratelimit.go): the per-key registry a
// Transport asks on every attempt, one key.
func init() {
	breakwaterAdmission = append(breakwaterAdmission,
		lib{"breakwater", func(b *testing.B) func() func() error {
			rs, err := bw.NewRateLimiters(admitRate, admitRate)
			if err != nil {
				b.Fatal(err)
			}
			return admit(func() bool { return !rs.Take("api.example.com:443").Limited })
		}},
	)
}
