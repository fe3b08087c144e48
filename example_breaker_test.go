package breakwater_test

import (
	"errors"
	"fmt"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A registry of breakers, one per upstream host, that opens on the third
// failure within a minute.
func ExampleNewBreakers() {
	breakers, err := bw.NewBreakers(
		bw.WithPolicy(bw.Window(2, time.Minute)),
		bw.OnTransition(func(t bw.Transition) {
			fmt.Printf("%s: %s -> %s (%s after %d failures)\n", t.Key, t.From, t.To, t.Reason, t.Failures)
		}),
	)
	if err != nil {
		panic(err)
	}
	for range 4 {
		permit, err := breakers.Allow("payments.internal:443")
		if errors.Is(err, bw.ErrCircuitOpen) {
			fmt.Println("rejected:", err != nil)
			continue
		}
		// ... make the attempt, classify it, and report the outcome:
		permit.Done(bw.Outcome{Category: bw.ServerError, Status: 502})
	}
	fmt.Println("available:", breakers.Available("payments.internal:443"))
	// Output:
	// payments.internal:443: closed -> open (failures after 3 failures)
	// rejected: true
	// available: false
}

// Consecutive counting with a lower threshold for timeouts, in the manner of
// Lasso's per-category thresholds.
func ExampleConsecutive() {
	breakers, _ := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.Timeout, 2)))
	for _, c := range []bw.Category{bw.ServerError, bw.Timeout} {
		breakers.Melt("search", c)
		fmt.Println(c, "->", breakers.State("search"))
	}
	// Output:
	// server_error -> closed
	// timeout -> open
}

// Trip forces a breaker open, for a planned maintenance window or an
// operator's decision; Reset closes it again.
func ExampleBreakers_Trip() {
	breakers, _ := bw.NewBreakers()
	breakers.Trip("ledger", 10*time.Minute)
	_, err := breakers.Allow("ledger")
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrCircuitOpen), d > 9*time.Minute)
	}
	breakers.Reset("ledger")
	fmt.Println(breakers.State("ledger"))
	// Output:
	// true true
	// closed
}
