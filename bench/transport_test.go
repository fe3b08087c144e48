package bench_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/bench/internal/stacks"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
)

// outboundLibs are the whole outbound stacks, each over the base transport
// newBase returns (called once per stack). The rows the issue asks for:
// bare (the base alone), breakwater's default chain, failsafehttp with retry
// and breaker, go-retryablehttp with a nil logger, gobreaker around
// RoundTrip. Two rows make like-for-like comparisons with breakwater's
// default, which also runs a call and an attempt timeout: breakwater without
// timeouts (retry + breaker, as failsafehttp) and failsafehttp with both
// timeouts (timeout, retry, breaker, timeout).
func outboundLibs(newBase func() http.RoundTripper, url string) []lib {
	stack := func(build func(base http.RoundTripper) (http.RoundTripper, error)) func(b *testing.B) func() func() error {
		return func(b *testing.B) func() func() error {
			base := newBase()
			rt, err := build(base)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if c, ok := base.(interface{ CloseIdleConnections() }); ok {
					c.CloseIdleConnections()
				}
			})
			req := benchRequest(b, url)
			return same(func() error { return roundTrip(rt, req) })
		}
	}
	return []lib{
		{"bare", stack(func(base http.RoundTripper) (http.RoundTripper, error) { return base, nil })},
		// What any request whose context can end costs, with no library:
		// the comparison for the deadlines of breakwater's default chain.
		{"bare-timeout", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return stacks.BareTimeout(base, 10*time.Second), nil // breakwater's attempt timeout
		})},
		{"breakwater", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return bw.NewTransport(bw.WithBase(base))
		})},
		{"breakwater-notimeouts", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return bw.NewTransport(bw.WithBase(base), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0))
		})},
		{"failsafehttp", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return failsafehttp.NewRoundTripper(base, stacks.FailsafeRetry(stacks.Options{}), stacks.FailsafeBreaker()), nil
		})},
		{"failsafehttp-timeouts", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return failsafehttp.NewRoundTripper(base,
				timeout.New[*http.Response](30*time.Second), // breakwater's call timeout
				stacks.FailsafeRetry(stacks.Options{}),
				stacks.FailsafeBreaker(),
				timeout.New[*http.Response](10*time.Second), // and attempt timeout
			), nil
		})},
		{"go-retryablehttp", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return stacks.Retryablehttp(base, stacks.Options{}, false), nil
		})},
		{"gobreaker", stack(func(base http.RoundTripper) (http.RoundTripper, error) {
			return stacks.Gobreaker(base), nil
		})},
	}
}

// BenchmarkTransport: one call through each whole outbound stack over an
// in-memory base transport that answers a canned 200, so the figures are
// the stacks' own cost.
func BenchmarkTransport(b *testing.B) {
	compare(b, outboundLibs(func() http.RoundTripper { return cannedOK{} }, memURL))
}

// BenchmarkTransportLoopback: the same stacks over a real loopback
// connection (see loopbackLibs).
func BenchmarkTransportLoopback(b *testing.B) {
	compare(b, loopbackLibs(b))
}

// loopbackLibs are the outbound stacks over a loopback httptest server
// answering 200 "ok", which ends with b, each stack with its own clone of
// http.DefaultTransport (keep-alive, enough idle connections for the
// parallel runs).
func loopbackLibs(b *testing.B) []lib {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	b.Cleanup(srv.Close)
	newBase := func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		return t
	}
	return outboundLibs(newBase, srv.URL+"/v1/items/42")
}

// BenchmarkLoopbackPaired: breakwater's default chain (and, for
// comparison, bare-timeout and the chain without its timeouts) against the
// bare base over loopback, timed in pairs (see comparePaired). On a shared
// machine the rounds of TransportLoopback spread by a third, ten times the
// few per cent a stack adds.
func BenchmarkLoopbackPaired(b *testing.B) {
	libs := loopbackLibs(b)
	comparePaired(b, pick(b, libs, "bare"), pick(b, libs, "breakwater"), pick(b, libs, "bare-timeout"), pick(b, libs, "breakwater-notimeouts"))
}
