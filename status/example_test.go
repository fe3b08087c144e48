package status_test

import (
	"context"
	"encoding/json"
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

// A Counts observes the middleware and the Transports of a service in a
// fleet, and the page shows what it counted: here a Shedder's one slot is
// taken, and a breakwater caller's critical request is shed.
func ExampleCounts() {
	counts := status.NewCounts()
	bh, _ := bw.NewBulkheads(1)
	shed, _ := bw.Shedder(bh, bw.WithObserver(counts))
	trust, _ := bw.CallerHeaders("192.0.2.0/24")
	mux := http.NewServeMux()
	mux.Handle("GET /orders", trust(shed(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))

	slot, _ := bh.Acquire(context.Background(), "")
	defer slot.Release()
	req := httptest.NewRequest(http.MethodGet, "/orders", nil)
	req.RemoteAddr = "192.0.2.7:4000" // a trusted peer of the fleet
	req.Header.Set("Breakwater-Criticality", "critical")
	req.Header.Set("Breakwater-Timeout-Ms", "800")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	fmt.Println(w.Code, w.Header().Get("Breakwater-Pushback"))

	page, _ := status.New(status.Source("fleet", counts))
	w = httptest.NewRecorder()
	page.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/state", nil))
	var st struct {
		Sources []struct {
			Fleet struct {
				Rows []struct {
					Key  string
					Shed map[string]int
				}
			}
		}
	}
	_ = json.Unmarshal(w.Body.Bytes(), &st)
	r := st.Sources[0].Fleet.Rows[0]
	fmt.Println(r.Key, "shed critical:", r.Shed["critical"])
	// Output:
	// 503 elsewhere
	// GET /orders shed critical: 1
}
