package breakwater_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
)

// A full registry of token buckets makes room for a new key by evicting a
// full bucket rather than one still refilling, from the instant it is
// full: a key that spent its quota keeps its state.
func TestRateLimitersEvictAFullBucketFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs, err := bw.NewRateLimiters(1, 3, bw.WithKeyLimits(2, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		rs.Take("drained")
		rs.Take("full")
		rs.Take("full") // full again at 2 s
		time.Sleep(time.Second / 2)
		rs.Take("drained")
		rs.Take("drained") // full again at 3 s
		time.Sleep(time.Second + time.Second/2)
		rs.Take("new")
		for k, want := range map[string]bool{"drained": true, "full": false, "new": true} {
			if _, ok := bucketOf(rs, k); ok != want {
				t.Errorf("%s kept: %v, want %v", k, ok, want)
			}
		}
	})
}

// With a shared store, a key the store refused keeps its bucket, and so
// the refusal, until the refusal ends; from that instant it is as good as
// new.
func TestRateLimitersEvictAFreeSharedKeyFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs, err := bw.NewRateLimiters(rate.Every(time.Minute), 1, bw.WithSharedLimiter(&fakeShared{}),
			bw.WithMaxWait(0), bw.WithKeyLimits(2, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rs.Wait(ctx, "refused")
		time.Sleep(time.Second)
		rs.Wait(ctx, "ends")
		if err := rs.Wait(ctx, "ends"); err == nil {
			t.Fatal("the store admitted a second request in the minute")
		} // refused until 61 s
		time.Sleep(59 * time.Second)
		rs.Wait(ctx, "refused")
		if err := rs.Wait(ctx, "refused"); err == nil {
			t.Fatal("the store admitted a second request in the minute")
		} // refused until 120 s
		time.Sleep(time.Second) // 61 s: the refusal of "ends" ends
		rs.Take("new")
		for k, want := range map[string]bool{"refused": true, "ends": false, "new": true} {
			if _, ok := bucketOf(rs, k); ok != want {
				t.Errorf("%s kept: %v, want %v", k, ok, want)
			}
		}
	})
}
