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
		onTransition(func(t bw.Transition) {
			fmt.Printf("%s: %s -> %s (%s after %d failures)\n", t.Key, t.From, t.To, t.Reason, t.Failures)
		}),
	)
	if err != nil {
		panic(err)
	}
	for range 4 {
		permit, err := breakers.Get("payments.internal:443").Allow()
		if errors.Is(err, bw.ErrCircuitOpen) {
			fmt.Println("rejected:", err != nil)
			continue
		}
		// ... make the attempt, classify it, and report the outcome:
		permit.Done(bw.Outcome{Category: bw.ServerError, Status: 502})
	}
	fmt.Println("available:", available(breakers, "payments.internal:443"))
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
		breakers.Get("search").RecordFailure(c)
		fmt.Println(c, "->", breakers.Get("search").State())
	}
	// Output:
	// server_error -> closed
	// timeout -> open
}

// Trip forces a breaker open, for a planned maintenance window or an
// operator's decision; Reset closes it again.
func ExampleBreaker_Trip() {
	breakers, _ := bw.NewBreakers()
	breakers.Get("ledger").Trip(10 * time.Minute)
	_, err := breakers.Get("ledger").Allow()
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrCircuitOpen), d > 9*time.Minute)
	}
	breakers.Get("ledger").Reset()
	fmt.Println(breakers.Get("ledger").State())
	// Output:
	// true true
	// closed
}
