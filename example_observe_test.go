package breakwater_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// An outage as the log shows it: a retried call, the breaker opening, and a
// rejection.
func ExampleLogObserver() {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer down.Close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "key", "delay", "open_for", "error":
				return slog.Attr{} // drop what changes from run to run
			}
			return a
		},
	}))
	tr, _ := bw.NewTransport(
		bw.WithObserver(bw.LogObserver(logger, 0)),
		bw.WithMaxAttempts(2),
		bw.WithBackoff(bw.Constant(time.Millisecond)),
		bw.WithPolicy(bw.Consecutive(1)),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(down.URL)
		if err != nil {
			fmt.Println("error:", err != nil)
			continue
		}
		resp.Body.Close()
		fmt.Println("status:", resp.StatusCode)
	}
	// Output:
	// level=DEBUG msg="breakwater: retrying" attempt=1 category=server_error status=502
	// level=WARN msg="breakwater: breaker open" from=closed to=open reason=failures opens=1 failures=1 category=server_error
	// status: 502
	// level=INFO msg="breakwater: rejected" mechanism=breaker
	// error: true
}

// A quarter of the calls fail and the breaker does not open: with
// insights on, the snapshot says so (its Message in plain words, Check and
// Value for a program).
func ExampleWithInsights_breakerNeverOpened() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("i") == "3" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	for _, on := range []bool{false, true} {
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1), bw.WithInsights(on))
		for i := range 20 {
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "?i=" + strconv.Itoa(i%4))
			if err == nil {
				resp.Body.Close()
			}
		}
		fmt.Println(on, len(tr.Snapshot().Insights), "insights")
		for _, in := range tr.Snapshot().Insights {
			fmt.Println(in.Check, in.Value)
		}
	}
	// Output:
	// false 0 insights
	// true 1 insights
	// breaker_never_opened 0.25
}
