package breakwater_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
)

// maxKeys is the documented bound of a registry's cap (WithKeyLimits).
const maxKeys = 1 << 28

// Every bound of the registries' arguments and options, on both sides: the
// last value rejected and the first accepted.
func TestRegistryBounds(t *testing.T) {
	keyLimits := []struct {
		name string
		opt  bw.Option
		ok   bool
	}{
		{"0 keys", bw.WithKeyLimits(0, time.Minute), false},
		{"1 key", bw.WithKeyLimits(1, time.Minute), true},
		{"the most keys", bw.WithKeyLimits(maxKeys, time.Minute), true},
		{"one key too many", bw.WithKeyLimits(maxKeys+1, time.Minute), false},
		{"idle TTL 0", bw.WithKeyLimits(10, 0), false},
		{"idle TTL 1ns", bw.WithKeyLimits(10, time.Nanosecond), true},
	}
	for _, c := range keyLimits {
		if _, err := bw.NewRateLimiters(1, 1, c.opt); (err == nil) != c.ok {
			t.Errorf("NewRateLimiters, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
		if _, err := bw.NewBulkheads(1, c.opt); (err == nil) != c.ok {
			t.Errorf("NewBulkheads, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
		if _, err := bw.NewPauseGates(c.opt); (err == nil) != c.ok {
			t.Errorf("NewPauseGates, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}

	for _, c := range []struct {
		name  string
		limit rate.Limit
		burst int
		opts  []bw.Option
		ok    bool
	}{
		{"limit 0", 0, 1, nil, false},
		{"the smallest limit", rate.Limit(5e-324), 1, nil, true},
		{"the largest finite limit", rate.Limit(1e300), 1, nil, true},
		{"infinite limit", rate.Inf, 1, nil, false},
		{"burst 0", 1, 0, nil, false},
		{"burst 1", 1, 1, nil, true},
		{"wait -1ns", 1, 1, []bw.Option{bw.WithMaxWait(-time.Nanosecond)}, false},
		{"wait 0", 1, 1, []bw.Option{bw.WithMaxWait(0)}, true},
	} {
		if _, err := bw.NewRateLimiters(c.limit, c.burst, c.opts...); (err == nil) != c.ok {
			t.Errorf("NewRateLimiters, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}

	for _, c := range []struct {
		name  string
		limit int
		opts  []bw.Option
		ok    bool
	}{
		{"limit 0", 0, nil, false},
		{"limit 1", 1, nil, true},
		{"the largest limit", 1 << 30, nil, true},
		{"a limit too large", 1<<30 + 1, nil, false},
		{"queue -1", 1, []bw.Option{bw.WithMaxQueue(-1), bw.WithMaxWait(time.Second)}, false},
		{"queue 0 without wait", 1, []bw.Option{bw.WithMaxQueue(0), bw.WithMaxWait(0)}, true},
		{"queue 1 without wait", 1, []bw.Option{bw.WithMaxQueue(1), bw.WithMaxWait(0)}, false},
		{"queue 1 with a wait of 1ns", 1, []bw.Option{bw.WithMaxQueue(1), bw.WithMaxWait(time.Nanosecond)}, true},
	} {
		if _, err := bw.NewBulkheads(c.limit, c.opts...); (err == nil) != c.ok {
			t.Errorf("NewBulkheads, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}

	for _, c := range []struct {
		name string
		opt  bw.Option
		ok   bool
	}{
		{"pause 0", bw.WithMaxRetryAfter(0), false},
		{"pause 1ns", bw.WithMaxRetryAfter(time.Nanosecond), true},
		{"wait -1ns", bw.WithMaxWait(-time.Nanosecond), false},
		{"wait 0", bw.WithMaxWait(0), true},
	} {
		if _, err := bw.NewPauseGates(c.opt); (err == nil) != c.ok {
			t.Errorf("NewPauseGates, %s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
