package breakwater_test

import (
	"fmt"
	"net/http"

	"github.com/breakwater-go/breakwater"
)

// A 503 with Retry-After is the upstream asking for a pause, not a failure:
// it is Throttled, and carries the hint.
func ExampleClassify() {
	resp := &http.Response{
		StatusCode: http.StatusServiceUnavailable,
		Header:     http.Header{"Retry-After": {"30"}},
	}
	o := breakwater.Classify(resp, nil)
	fmt.Println(o.Category, o.Status, o.RetryAfter, o.RetryAfterTooLong)

	// Without the hint, the same status is a server error.
	resp.Header.Del("Retry-After")
	fmt.Println(breakwater.Classify(resp, nil).Category)
	// Output:
	// throttled 503 30s false
	// server_error
}

// A lock service answers 423 Locked while another writer holds the lock.
// That is worth retrying and says nothing about the service's health, so
// classify it as Throttled; every other result keeps the default.
func ExampleWhen() {
	locked := func(resp *http.Response, err error) bool {
		return resp != nil && resp.StatusCode == http.StatusLocked
	}
	classify := breakwater.When(breakwater.Classify, locked, breakwater.Throttled)

	for _, status := range []int{http.StatusLocked, http.StatusConflict, http.StatusOK} {
		o := classify(&http.Response{StatusCode: status, Header: http.Header{}}, nil)
		fmt.Println(o.Status, o.Category, o.Category.Retryable())
	}
	// Output:
	// 423 throttled true
	// 409 client_error false
	// 200 success false
}
