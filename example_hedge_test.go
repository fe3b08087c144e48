package breakwater_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A hedge cures a slow attempt: the first request hangs, a copy sent 20 ms
// later answers, and the call returns that answer. The hanging request is
// cancelled.
func ExampleWithHedging() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // the slow one: held until the client gives up on it
			return
		}
		fmt.Fprint(w, "fast")
	}))
	defer srv.Close()

	// Budget 1 lets the very first call hedge; the default, 0.1, allows one
	// hedge per ten calls of the key.
	tr, err := bw.NewTransport(bw.WithHedging(bw.Hedging{Delay: 20 * time.Millisecond, Budget: 1}))
	if err != nil {
		panic(err)
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body), "after", n.Load(), "requests")
	// Output: fast after 2 requests
}
