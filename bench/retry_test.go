package bench_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/bench/internal/stacks"
	"github.com/cenkalti/backoff/v5"
	"github.com/eapache/go-resiliency/retrier"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
)

func benchRequest(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

const memURL = "https://api.example.com/v1/items/42"

// BenchmarkRetry: one call through a retry wrapper whose first attempt
// succeeds, over the in-memory 200. breakwater, failsafehttp and
// go-retryablehttp are RoundTrippers; cenkalti/backoff and go-resiliency
// retry a function, here one that makes the same RoundTrip and treats a 5xx
// as an error.
func BenchmarkRetry(b *testing.B) {
	var base cannedOK
	compare(b, []lib{
		{"breakwater", func(b *testing.B) func() func() error {
			rt, err := bw.NewTransport(bw.WithBase(base), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0),
				bw.WithoutBreaker())
			if err != nil {
				b.Fatal(err)
			}
			req := benchRequest(b, memURL)
			return same(func() error { return roundTrip(rt, req) })
		}},
		{"breakwater-stage", func(b *testing.B) func() func() error {
			stage, err := bw.RetryStage()
			if err != nil {
				b.Fatal(err)
			}
			rt, req := stage(base), benchRequest(b, memURL)
			return same(func() error { return roundTrip(rt, req) })
		}},
		{"failsafehttp", func(b *testing.B) func() func() error {
			rt, req := failsafehttp.NewRoundTripper(base, stacks.FailsafeRetry(stacks.Options{})), benchRequest(b, memURL)
			return same(func() error { return roundTrip(rt, req) })
		}},
		{"go-retryablehttp", func(b *testing.B) func() func() error {
			rt, req := stacks.Retryablehttp(base, stacks.Options{}, false), benchRequest(b, memURL)
			return same(func() error { return roundTrip(rt, req) })
		}},
		{"cenkalti-backoff", func(b *testing.B) func() func() error {
			req := benchRequest(b, memURL)
			ctx := context.Background()
			return same(func() error {
				resp, err := backoff.Retry(ctx, func() (*http.Response, error) {
					resp, err := base.RoundTrip(req)
					if err == nil && resp.StatusCode >= 500 {
						_ = resp.Body.Close()
						return nil, errFailure
					}
					return resp, err
				}, backoff.WithMaxTries(3))
				return finish(resp, err)
			})
		}},
		{"go-resiliency", func(b *testing.B) func() func() error {
			r := retrier.New(retrier.ExponentialBackoff(2, 100*time.Millisecond), nil)
			req := benchRequest(b, memURL)
			return same(func() error {
				var resp *http.Response
				err := r.Run(func() error {
					var err error
					resp, err = base.RoundTrip(req)
					if err == nil && resp.StatusCode >= 500 {
						_ = resp.Body.Close()
						return errFailure
					}
					return err
				})
				return finish(resp, err)
			})
		}},
	})
}
