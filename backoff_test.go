package breakwater_test

import (
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

func TestBackoffSequences(t *testing.T) {
	ms := time.Millisecond
	seq := func(b bw.Backoff, n int) []time.Duration {
		var out []time.Duration
		var prev time.Duration
		for i := 1; i <= n; i++ {
			prev = b.Delay(i, prev)
			out = append(out, prev)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  []time.Duration
		want []time.Duration
	}{
		{"linear", seq(bw.Linear(100*ms, 50*ms, time.Hour), 5), []time.Duration{100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms}},
		{"linear capped", seq(bw.Linear(100*ms, 100*ms, 250*ms), 3), []time.Duration{100 * ms, 200 * ms, 250 * ms}},
		{"constant", seq(bw.Constant(7*ms), 3), []time.Duration{7 * ms, 7 * ms, 7 * ms}},
	} {
		if len(tc.got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
		for i := range tc.want {
			if tc.got[i] != tc.want[i] {
				t.Fatalf("%s: %v, want %v", tc.name, tc.got, tc.want)
			}
		}
	}
	for range 1000 {
		for i, d := range seq(bw.ExponentialJitter(100*ms, time.Second), 6) {
			if hi := min(time.Second, 100*ms<<i); d < 0 || d > hi {
				t.Fatalf("full jitter wait %d = %s, want within [0, %s]", i+1, d, hi)
			}
		}
		for _, d := range seq(bw.DecorrelatedJitter(100*ms, 2*time.Second), 8) {
			if d < 100*ms || d > 2*time.Second {
				t.Fatalf("decorrelated jitter wait %s outside [100ms, 2s]", d)
			}
		}
	}
}
