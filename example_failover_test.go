package breakwater_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Failover over two replicas, one of them down: every call succeeds, its
// retry going to the other replica, and after five failures in a row the
// broken one is ejected.
func ExampleWithFailover() {
	var down atomic.Int32
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok from b")
	}))
	defer b.Close()

	tr, err := bw.NewTransport(bw.WithBackoff(bw.Constant(time.Millisecond)),
		bw.WithFailover(bw.Failover{Endpoints: []string{a.URL, b.URL}}))
	if err != nil {
		panic(err)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var answers []string
	for range 8 {
		resp, err := client.Get("http://inventory/items/42")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, string(body))
	}
	fmt.Println(strings.Join(answers, "; "))
	for _, ep := range tr.Snapshot().Endpoints {
		name := "a"
		if ep.Endpoint == b.URL {
			name = "b"
		}
		fmt.Println(name, ep.Health)
	}
	fmt.Println("requests to a:", down.Load())
	// Output:
	// ok from b; ok from b; ok from b; ok from b; ok from b; ok from b; ok from b; ok from b
	// a ejected
	// b healthy
	// requests to a: 5
}
