package tail

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater/bench/internal/stacks"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunBare: the bare stack sends one request per call, and the upstream
// makes about the configured share of requests slow.
func TestRunBare(t *testing.T) {
	cfg := Config{Calls: 200, Warmup: 20, Workers: 4, Rounds: 1, Fast: time.Millisecond,
		Slow: 30 * time.Millisecond, SlowShare: 0.1, Seed: 7, Settle: time.Second}
	bare := Builder{"bare", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.Bare(b), nil }}
	rep, err := Run(context.Background(), cfg, []Builder{bare}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Calls != 200 || r.Requests != 200 || r.Failed != 0 || r.Extra() != 0 || r.Conns != 0 {
		t.Fatalf("bare: %+v", r)
	}
	if r.P50 < cfg.Fast || r.P50 > cfg.Slow/2 || r.P99 < cfg.Slow {
		t.Fatalf("bare: p50 %s, p99 %s: want the fast latency and the slow one", r.P50, r.P99)
	}
}
