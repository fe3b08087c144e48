package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
	"github.com/breakwater-go/breakwater/timeline"
)

// refresh is the status page's polling period in these tests.
const refresh = 500 * time.Millisecond

// outage is a loopback upstream that answers 200 until it is told to
// fail, then 502, and the traffic that a few callers send it through a
// breakwater Transport.
type outage struct {
	upstream *httptest.Server
	failing  atomic.Bool
	tr       *bw.Transport
	key      string
	rec      *timeline.Recorder
	stop     context.CancelFunc
	done     sync.WaitGroup
}

func startOutage(t *testing.T) *outage {
	t.Helper()
	o := &outage{rec: timeline.New(250 * time.Millisecond)}
	o.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.failing.Load() {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(o.upstream.Close)
	o.rec.Phase(0, "healthy", true)
	var err error
	o.tr, err = bw.NewTransport(
		bw.WithBase(o.upstream.Client().Transport),
		bw.WithMaxAttempts(2),
		bw.WithBackoff(bw.Constant(20*time.Millisecond)),
		bw.WithPolicy(bw.Consecutive(5)), bw.WithOpenTimeout(time.Minute, time.Minute),
		bw.WithObserver(o.rec),
		bw.WithInsights(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.tr.CloseIdleConnections)
	o.key = bw.HostKey(httptest.NewRequest(http.MethodGet, o.upstream.URL, nil))
	ctx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	client := &http.Client{Transport: o.tr}
	for range 3 {
		o.done.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.upstream.URL, nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(40 * time.Millisecond):
				}
			}
		})
	}
	t.Cleanup(o.halt)
	return o
}

// fail starts the outage.
func (o *outage) fail() {
	o.failing.Store(true)
	o.rec.Phase(o.rec.Elapsed(), "502 outage", false)
}

// halt stops the traffic; it is safe to call twice.
func (o *outage) halt() {
	o.stop()
	o.done.Wait()
}

// waitState waits for the breaker to reach s on the server side and
// returns when it did.
func (o *outage) waitState(t *testing.T, s bw.State, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for o.tr.Breakers().Get(o.key).State() != s {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %s, not %s, after %s", o.tr.Breakers().Get(o.key).State(), s, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Now()
}

// The status page loads without a console error, shows the breaker opening
// within one refresh of it opening, resets it from its control, and the
// timeline of the same traffic opens in the same browser; both are
// screenshotted.
func TestStatusPageAndTimelineInChromium(t *testing.T) {
	b := newBrowser(t)
	dir := screenshotDir(t)
	o := startOutage(t)

	page, err := status.New(status.Source("outbound", o.tr), status.WithTitle("checkout"), status.WithRefresh(refresh), status.WithControls())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/breakwater/", http.StripPrefix("/debug/breakwater", page))
	admin := httptest.NewServer(mux)
	t.Cleanup(admin.Close)

	row := fmt.Sprintf(`document.querySelector('tr[data-key=%s]')`, strconv.Quote(o.key))
	b.do(t, chromedp.Navigate(admin.URL+"/debug/breakwater/"))
	b.waitFor(t, row+`?.dataset.state === "closed"`, 10*time.Second)

	o.fail()
	opened := o.waitState(t, bw.StateOpen, 10*time.Second)
	// The first state the page draws after the opening shows it open: the
	// page learns of an opening within one refresh.
	var first string
	deadline := time.Now().Add(3 * refresh)
	for first == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the page drew no state within %s of the opening", 3*refresh)
		}
		drawn, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[document.body.dataset.updated || "", `+row+`?.dataset.state || ""]`))
		if err != nil {
			t.Fatal(err)
		}
		if at, err := time.Parse(time.RFC3339Nano, drawn[0]); err == nil && at.After(opened) {
			first = drawn[1]
			t.Logf("the page drew the breaker %s %s after the opening (refresh %s)", first, time.Since(opened).Round(time.Millisecond), refresh)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if first != "open" {
		t.Errorf("the first state the page drew after the opening shows the breaker %q", first)
	}
	if lag := time.Since(opened); lag > 2*refresh {
		t.Errorf("the page showed the opening %s after it happened; it refreshes every %s", lag, refresh)
	}
	time.Sleep(time.Second) // a little more traffic for the timeline
	o.halt()
	b.waitFor(t, `document.querySelector('.insights') !== null`, 3*time.Second)
	b.screenshot(t, dir, "status-page.png")

	// The reset control, pressed in the page, closes the breaker.
	b.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-key=%s] button.reset`, strconv.Quote(o.key)))))
	o.waitState(t, bw.StateClosed, 3*time.Second)
	b.waitFor(t, row+`?.dataset.state === "closed"`, refresh+time.Second)

	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors on the status page:\n%s", strings.Join(errs, "\n"))
	}

	// The timeline of the same traffic, as an SVG file, in the same browser.
	svg := filepath.Join(dir, "timeline.svg")
	f, err := os.Create(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := timeline.WriteSVG(f, o.rec.Timeline(), "checkout: a 502 outage, as the transport saw it"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b.do(t, chromedp.Navigate("file://"+svg))
	rejected := b.attr(t, "#calls-breaker_open", "data-values")
	if strings.Trim(rejected, "0,") == "" {
		t.Errorf("the timeline shows no call rejected by the open breaker: %q", rejected)
	}
	b.waitFor(t, `document.querySelector('#band-breaker [data-state="open"]') !== null`, time.Second)
	b.screenshot(t, dir, "timeline.png")

	// A simulated outage, drawn as `breakwater simulate -svg` draws it.
	simulated := filepath.Join(dir, "simulated-outage.svg")
	writeSimulatedOutage(t, simulated)
	b.do(t, chromedp.Navigate("file://"+simulated))
	if v := b.attr(t, "#calls-breaker_open", "data-values"); strings.Trim(v, "0,") == "" {
		t.Errorf("the simulated timeline shows no rejection: %q", v)
	}
	b.waitFor(t, `document.querySelectorAll('#band-breaker [data-state="closed"]').length >= 2`, time.Second)
	b.screenshot(t, dir, "simulated-outage.png")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// writeSimulatedOutage simulates four callers through 20 s of 500s after
// 10 s of health, on the default configuration, and draws it to path.
func writeSimulatedOutage(t *testing.T, path string) {
	t.Helper()
	tr, err := bw.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	rec := timeline.New(time.Second)
	rec.Phase(0, "healthy", true)
	rec.Phase(10*time.Second, "502 outage", false)
	rec.Phase(30*time.Second, "recovered", true)
	tr.Simulate(bw.Scenario{
		Callers: 4, Think: 100 * time.Millisecond, AttemptTime: 20 * time.Millisecond,
		HealthyFor: 10 * time.Second, FailFor: 20 * time.Second, Duration: time.Minute,
		Observe: rec.Record,
	})
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := timeline.WriteSVG(f, rec.Timeline(), "simulated: 4 callers, 20 s of 500s"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
