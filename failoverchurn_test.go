package breakwater_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// TestFailoverBreakerKeptThroughChurn: an endpoint's breaker stays in the
// registry while an attempt to it runs, however many other keys come and
// go meanwhile, so the failure the attempt shows is charged to the breaker
// later calls consult.
func TestFailoverBreakerKeptThroughChurn(t *testing.T) {
	var tr *bw.Transport
	sent := map[string]int{}
	base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sent[req.URL.Host]++
		for i := range 50 { // other keys crowd the registry while the attempt runs
			tr.Breakers().Get(fmt.Sprintf("other-%d", i))
		}
		return &http.Response{StatusCode: http.StatusInternalServerError, Body: http.NoBody, Request: req}, nil
	})
	tr = newTransport(t, base,
		bw.WithFailover(bw.Failover{Endpoints: []string{"http://a.test", "http://b.test"}}),
		bw.WithKeyLimits(4, time.Hour),
		bw.WithPolicy(bw.Consecutive(1)),
		bw.WithMaxAttempts(1))
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	for host, n := range sent {
		b, ok := tr.Breakers().Lookup("http://" + host)
		if n > 0 && (!ok || b.State() != bw.StateOpen) {
			t.Errorf("%s failed %d times, and its breaker is not open in the registry (present: %v)", host, n, ok)
		}
	}
	if len(sent) == 0 {
		t.Fatal("nothing was sent")
	}
}
