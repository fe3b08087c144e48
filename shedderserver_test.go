package breakwater_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// warnings records the EventWarnings an observer sees.
type warnings struct {
	mu   sync.Mutex
	errs []string
}

func (w *warnings) Observe(_ context.Context, e bw.Event) {
	if e.Kind == bw.EventWarning {
		w.mu.Lock()
		defer w.mu.Unlock()
		if e.Mechanism != bw.MechShed || e.Err == nil {
			w.errs = append(w.errs, "a warning without its mechanism or error")
			return
		}
		w.errs = append(w.errs, e.Err.Error())
	}
}

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errs...)
}

// A Shedder behind a server that lets slow clients hold their slots
// without bound (no ReadTimeout, no WriteTimeout) says so, once, through
// its observer; behind one with both timeouts it says nothing.
func TestShedderWarnsOfAServerWithoutTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		read, write   time.Duration
		header        time.Duration
		want, wantNot string
	}{
		{"no timeouts", 0, 0, 0, "without ReadTimeout and WriteTimeout", ""},
		{"a header timeout only", 0, 0, time.Second, "without ReadTimeout and WriteTimeout", ""},
		{"no write timeout", time.Second, 0, 0, "without WriteTimeout", "ReadTimeout"},
		{"no read timeout", 0, time.Second, time.Second, "without ReadTimeout", "WriteTimeout"},
		{"both", time.Second, time.Second, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bh, err := bw.NewBulkheads(8)
			if err != nil {
				t.Fatal(err)
			}
			var w warnings
			sh, err := bw.Shedder(bh, bw.WithObserver(&w))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
			srv.Config.ReadTimeout, srv.Config.WriteTimeout, srv.Config.ReadHeaderTimeout = tc.read, tc.write, tc.header
			srv.Start()
			defer srv.Close()
			for range 3 {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			got := w.list()
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("warnings %q behind a server with both timeouts", got)
			case tc.want == "":
			case len(got) != 1:
				t.Fatalf("%d warnings over 3 requests, want 1: %q", len(got), got)
			case !strings.Contains(got[0], tc.want) || tc.wantNot != "" && strings.Contains(got[0], tc.wantNot) || !strings.Contains(got[0], "Shedder"):
				t.Fatalf("warning %q, want one about %q", got[0], tc.want)
			}
		})
	}
}

// A LogObserver logs the warning at Warn.
func TestShedderWarningIsLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bh, err := bw.NewBulkheads(8)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := bw.Shedder(bh, bw.WithObserver(bw.LogObserver(log, 0)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	for range 2 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	out := buf.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "mechanism=shed") || !strings.Contains(out, "without ReadTimeout and WriteTimeout") {
		t.Fatalf("log:\n%s", out)
	}
}
