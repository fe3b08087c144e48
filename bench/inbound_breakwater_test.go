package bench_test

import (
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// breakwater's per-client rate limit (middleware.go): a ClientRateLimit on
// a RateLimiters registry keyed by the client address, perClientRate
// requests per second per client like httprate's row. The burst of 1000
// keeps the RateLimit header values in the table ClientRateLimit
// precomputes for ordinary bursts; with a burst in the millions it formats
// them on every response, as httprate always does.
func init() {
	breakwaterInbound = append(breakwaterInbound, lib{"breakwater", func(b *testing.B) func() func() error {
		rl, err := bw.NewRateLimiters(perClientRate, 1000)
		if err != nil {
			b.Fatal(err)
		}
		crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
		if err != nil {
			b.Fatal(err)
		}
		return serve(router(crl))
	}})
}
