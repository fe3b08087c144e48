package status_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// The page shows a Counts source's sheds by criticality, the pushback its
// server sent and the pushback its Transport honoured, the most critical
// sheds first.
func TestFleetCounts(t *testing.T) {
	counts := status.NewCounts()
	bh, err := bw.NewBulkheads(1, bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := bw.Shedder(bh, bw.WithObserver(counts))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := bw.CallerHeaders("127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", trust(shed(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	mux.Handle("GET /other", trust(shed(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	slot, err := bh.Acquire(context.Background(), "") // the one slot, taken: every request is shed
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	tr, err := bw.NewTransport(bw.WithPropagation(true), bw.WithObserver(counts))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	for _, c := range []struct {
		path string
		crit bw.Criticality
	}{{"/other", 0}, {"/other", 0}, {"/items/7", bw.Critical}, {"/items/8", bw.Sheddable}} {
		req, err := http.NewRequestWithContext(bw.ContextWithCriticality(context.Background(), c.crit), http.MethodGet, srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	h := newPage(t, status.Source("fleet", counts))
	w := get(t, h, "/state")
	var st struct {
		Sources []struct {
			Fleet struct {
				Total  int
				Counts map[string]int
				Rows   []struct {
					Key       string            `json:"key"`
					Shed      map[string]uint64 `json:"shed"`
					Late      map[string]uint64 `json:"late"`
					Elsewhere uint64            `json:"pushback_elsewhere"`
					Honoured  uint64            `json:"pushback_honoured"`
				}
			} `json:"fleet"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Sources) != 1 {
		t.Fatalf("sources: %s", w.Body)
	}
	f := st.Sources[0].Fleet
	if f.Total != 3 || f.Counts["critical_shed"] != 1 {
		t.Fatalf("fleet table %+v, want 3 keys (2 routes and the upstream), one shedding critical requests", f)
	}
	first := f.Rows[0]
	if first.Key != "GET /items/{id}" || first.Shed["critical"] != 1 || first.Shed["sheddable"] != 1 || first.Elsewhere != 2 {
		t.Errorf("first row %+v, want the route that shed a critical request", first)
	}
	var honoured uint64
	for _, r := range f.Rows {
		honoured += r.Honoured
	}
	if honoured != 4 {
		t.Errorf("pushback honoured %d times, want 4: %s", honoured, w.Body)
	}
	js := get(t, h, "/app.js").Body.String()
	if !strings.Contains(js, "pushback honoured") {
		t.Error("the page does not draw the fleet table")
	}
}
