package breakwater_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A call timeout no retry fits in is a warning, and Explain says how many
// attempts fit; the transport does what Explain says.
func TestCallTimeoutShorterThanTheFirstWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
		var log eventLog
		tr := newTransport(t, u.Transport(), bw.WithObserver(&log), bw.WithCallTimeout(50*time.Millisecond), bw.WithBackoff(bw.Constant(100*time.Millisecond)))
		warnings := log.of(bw.EventWarning)
		if len(warnings) != 1 || warnings[0].Reason != bw.ReasonRetriesDoNotFit || warnings[0].Mechanism != bw.MechTimeout ||
			!strings.Contains(warnings[0].Err.Error(), "the call timeout 50ms is no longer than the first wait between attempts (100ms)") {
			t.Fatalf("warnings %+v", warnings)
		}
		want := "attempts         up to 3, but only 1 fit in the call timeout (50ms): the waits before attempt 2 add up to 100ms\n"
		if out := tr.Explain(); !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
		if r := get(tr); r.status != 503 || u.Count() != 1 {
			t.Fatalf("got %+v after %d attempts; Explain promised 1", r, u.Count())
		}
	})
	t.Run("jittered", func(t *testing.T) {
		var log eventLog
		tr, err := bw.NewTransport(bw.WithObserver(&log), bw.WithCallTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if w := log.of(bw.EventWarning); len(w) != 1 || !strings.Contains(w[0].Err.Error(), "(up to 100ms, jittered)") {
			t.Fatalf("warnings %+v", w)
		}
		want := "up to 3, but only 1 fit in the call timeout (50ms) when the waits are their longest (up to 100ms before attempt 2); more when they are drawn shorter\n"
		if out := tr.Explain(); !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	})
	t.Run("some fit", func(t *testing.T) {
		var log eventLog
		tr, err := bw.NewTransport(bw.WithObserver(&log), bw.WithCallTimeout(time.Second), bw.WithMaxAttempts(5), bw.WithBackoff(bw.Constant(400*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if w := log.of(bw.EventWarning); len(w) != 0 {
			t.Fatalf("warnings %+v, want none: a retry fits", w)
		}
		want := "up to 5, but only 3 fit in the call timeout (1s): the waits before attempt 4 add up to 1.2s\n"
		if out := tr.Explain(); !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		var log eventLog
		if _, err := bw.NewTransport(bw.WithObserver(&log)); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.NewTransport(bw.WithObserver(&log), bw.WithCallTimeout(50*time.Millisecond), bw.WithMaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
		if w := log.of(bw.EventWarning); len(w) != 0 {
			t.Fatalf("warnings %+v, want none", w)
		}
	})
}

// unwrapping is a RoundTripper over another that says which.
type unwrapping struct{ next http.RoundTripper }

func (u unwrapping) RoundTrip(r *http.Request) (*http.Response, error) { return u.next.RoundTrip(r) }
func (u unwrapping) Unwrap() http.RoundTripper                         { return u.next }

// A Transport over another is a warning, and Explain says so.
func TestStackedTransportsWarn(t *testing.T) {
	inner, err := bw.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	retry, err := bw.RetryStage(bw.WithMaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		base http.RoundTripper
		want int // attempts per call
	}{
		{"directly", inner, 9},
		{"wrapped", unwrapping{unwrapping{inner}}, 9},
		{"a retry stage", retry(inner), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log eventLog
			tr, err := bw.NewTransport(bw.WithBase(tc.base), bw.WithObserver(&log))
			if err != nil {
				t.Fatal(err)
			}
			w := log.of(bw.EventWarning)
			if len(w) != 1 || w[0].Reason != bw.ReasonStackedTransport || !strings.Contains(w[0].Err.Error(), fmt.Sprintf("(up to %d per call)", tc.want)) {
				t.Fatalf("warnings %+v", w)
			}
			if out := tr.Explain(); !strings.Contains(out, "  base\n    stacked          on another breakwater.Transport") {
				t.Errorf("Explain does not say it is stacked:\n%s", out)
			}
		})
	}
	t.Run("under a retry stage", func(t *testing.T) {
		var log eventLog
		stage, err := bw.RetryStage(bw.WithObserver(&log))
		if err != nil {
			t.Fatal(err)
		}
		stage(inner)
		if w := log.of(bw.EventWarning); len(w) != 1 || w[0].Reason != bw.ReasonStackedTransport || !strings.Contains(w[0].Err.Error(), "up to 9 per call") {
			t.Fatalf("warnings %+v", w)
		}
	})
	t.Run("not stacked", func(t *testing.T) {
		var log eventLog
		tr, err := bw.NewTransport(bw.WithBase(unwrapping{http.DefaultTransport}), bw.WithObserver(&log))
		if err != nil {
			t.Fatal(err)
		}
		if w := log.of(bw.EventWarning); len(w) != 0 || strings.Contains(tr.Explain(), "stacked") {
			t.Fatalf("warnings %+v", w)
		}
	})
}

// An option given twice to one constructor is an error naming it, except
// the options that add up; options after a Config override it.
func TestOptionGivenTwice(t *testing.T) {
	var cfg bw.Config
	cfg.Retry.MaxAttempts = 5
	for _, tc := range []struct {
		name  string
		build func() error
		want  string // "" for no error
	}{
		{"a timeout", func() error {
			_, err := bw.NewTransport(bw.WithCallTimeout(time.Second), bw.WithAttemptTimeout(time.Second), bw.WithCallTimeout(2*time.Second))
			return err
		}, "WithCallTimeout is given twice to NewTransport"},
		{"a breaker option", func() error {
			_, err := bw.NewTransport(bw.WithPolicy(bw.Consecutive(5)), bw.WithPolicy(bw.Consecutive(3)))
			return err
		}, "WithPolicy is given twice to NewTransport"},
		{"a registry's", func() error {
			_, err := bw.NewBreakers(bw.WithOpenJitter(0), bw.WithOpenJitter(0.2))
			return err
		}, "WithOpenJitter is given twice to NewBreakers"},
		{"a nested limit's", func() error {
			_, err := bw.NewTransport(bw.WithConcurrencyLimit(4, bw.WithMaxQueue(1), bw.WithMaxQueue(2)))
			return err
		}, "WithMaxQueue is given twice to WithConcurrencyLimit"},
		{"a retry stage's", func() error {
			_, err := bw.RetryStage(bw.WithMaxAttempts(2), bw.WithMaxAttempts(4))
			return err
		}, "WithMaxAttempts is given twice to RetryStage"},
		{"a middleware's", func() error {
			_, err := bw.Shedder(mustBulkheads(t), bw.WithShedRetryAfter(time.Second, 2*time.Second), bw.WithShedRetryAfter(time.Second, 3*time.Second))
			return err
		}, "WithShedRetryAfter is given twice to Shedder"},
		{"the same value", func() error {
			_, err := bw.NewTransport(bw.WithKeyLimits(10, time.Minute), bw.WithKeyLimits(10, time.Minute))
			return err
		}, "WithKeyLimits is given twice to NewTransport"},
		{"before a Config", func() error {
			_, err := bw.NewTransport(bw.WithMaxAttempts(2), cfg)
			return err
		}, "WithMaxAttempts is given to NewTransport before a Config that sets it too"},
		{"observers and failure categories add up", func() error {
			_, err := bw.NewTransport(bw.WithObserver(&eventLog{}), bw.WithObserver(&eventLog{}),
				bw.WithCountAsFailure(bw.AuthError), bw.WithCountAsFailure(bw.Throttled))
			return err
		}, ""},
		{"after a Config", func() error {
			_, err := bw.NewTransport(cfg, bw.WithMaxAttempts(2))
			return err
		}, ""},
		{"one per constructor", func() error {
			_, err := bw.NewTransport(bw.WithMaxWait(time.Second), bw.WithRateLimit(10, 1, bw.WithMaxWait(0)), bw.WithConcurrencyLimit(2, bw.WithMaxWait(0)))
			return err
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A call timeout no longer than the first wait leaves no room for a
// retry: the transport warns as it is built, and Explain says how many
// attempts fit.
func ExampleWithCallTimeout_noRetryFits() {
	warned := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
		if e.Kind == bw.EventWarning {
			fmt.Println("warning:", e.Reason)
		}
	})
	tr, _ := bw.NewTransport(bw.WithObserver(warned), bw.WithCallTimeout(50*time.Millisecond), bw.WithBackoff(bw.Constant(100*time.Millisecond)))
	for line := range strings.Lines(tr.Explain()) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "attempts" {
			fmt.Println(strings.Join(f, " "))
		}
	}
	// Output:
	// warning: retries_do_not_fit
	// attempts up to 3, but only 1 fit in the call timeout (50ms): the waits before attempt 2 add up to 100ms
}
