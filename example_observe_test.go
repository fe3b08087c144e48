package breakwater_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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
