package status_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// Mount the page on an admin listener, under a prefix, next to other debug
// handlers; never on the listener that serves the public.
func ExampleNew() {
	tr, err := bw.NewTransport()
	if err != nil {
		fmt.Println(err)
		return
	}
	page, err := status.New(status.Source("outbound", tr), status.WithTitle("checkout"))
	if err != nil {
		fmt.Println(err)
		return
	}
	admin := http.NewServeMux()
	admin.Handle("/debug/breakwater/", http.StripPrefix("/debug/breakwater", page))
	// http.ListenAndServe("127.0.0.1:6060", admin)

	w := httptest.NewRecorder()
	admin.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/breakwater/state", nil))
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	// Output: 200 application/json
}
