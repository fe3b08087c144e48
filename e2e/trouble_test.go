package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// flaky is a loopback upstream that answers 200 until it is told to
// answer otherwise.
type flaky struct {
	*httptest.Server
	bad atomic.Bool
	key string
}

func newFlaky(t *testing.T, answer func(w http.ResponseWriter)) *flaky {
	t.Helper()
	f := &flaky{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.bad.Load() {
			answer(w)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(f.Close)
	f.key = bw.HostKey(httptest.NewRequest(http.MethodGet, f.URL, nil))
	return f
}

// troubleText is what the head of the page says: its text, and each
// line of trouble as "<kind> <key>: <text>".
type troubleText struct {
	At    string   `json:"at"`
	Text  string   `json:"text"`
	Items []string `json:"items"`
	Page  string   `json:"page"`
}

const readTrouble = `(() => {
  const t = document.getElementById('trouble');
  return {
    at: document.body.dataset.updated || '',
    text: t ? t.innerText : '',
    items: [...document.querySelectorAll('#trouble li')].map((li) => li.dataset.kind + ' ' + li.dataset.key + ': ' + li.innerText),
    page: document.body.innerText,
  };
})()`

// readAfter returns the first head of the page drawn from a state taken
// after at.
func (b *browser) readAfter(t *testing.T, at time.Time, timeout time.Duration) troubleText {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[troubleText](readTrouble))
		if err != nil {
			t.Fatal(err)
		}
		if drawn, err := time.Parse(time.RFC3339Nano, got.At); err == nil && drawn.After(at) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page drew no state within %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// During an outage of one host (its breaker open) while another asks to
// slow down (paused), the head of the page lists both, the open breaker
// first, in words that say how bad and why, and never "Nothing to
// report"; once both are over, it says "Nothing to report".
func TestStatusPageTellsTheTruthInChromium(t *testing.T) {
	b := newBrowser(t)
	failing := newFlaky(t, func(w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) })
	throttled := newFlaky(t, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "4")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	tr, err := bw.NewTransport(
		bw.WithBase(failing.Client().Transport),
		bw.WithMaxAttempts(1),
		bw.WithPolicy(bw.Consecutive(3)), bw.WithOpenTimeout(4*time.Second, 4*time.Second), bw.WithOpenJitter(0), bw.WithHalfOpen(1, 1),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)

	ctx, stop := context.WithCancel(context.Background())
	var callers sync.WaitGroup
	t.Cleanup(func() { stop(); callers.Wait() })
	client := &http.Client{Transport: tr}
	for _, u := range []string{failing.URL, throttled.URL} {
		callers.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
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

	// The inbound side: a shedder's bulkheads, one slot per key.
	slots, err := bw.NewBulkheads(1)
	if err != nil {
		t.Fatal(err)
	}
	page, err := status.New(status.Source("outbound", tr), status.Source("inbound", slots), status.WithTitle("checkout"), status.WithRefresh(refresh))
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(page)
	t.Cleanup(admin.Close)
	b.do(t, chromedp.Navigate(admin.URL+"/"))

	healthy := b.readAfter(t, time.Now(), 5*time.Second)
	if !strings.HasPrefix(healthy.Text, "Nothing to report") || len(healthy.Items) != 0 {
		t.Fatalf("healthy, the page heads with %q, items %q", healthy.Text, healthy.Items)
	}

	// A bulkhead-only source shows its bulkheads, nothing it does not
	// hold, and no insights it cannot have.
	inbound, _, _ := strings.Cut(healthy.Page[strings.Index(healthy.Page, "\ninbound\n"):], "Breakers: closed")
	for _, absent := range []string{"breaker", "pause", "token bucket", "insights", "observer"} {
		if strings.Contains(inbound, absent) {
			t.Errorf("the bulkhead-only source mentions %q:\n%s", absent, inbound)
		}
	}

	// The outage: one host fails, the other asks to slow down, and the
	// inbound side's only slot is taken.
	slot, err := slots.Acquire(ctx, "/checkout")
	if err != nil {
		t.Fatal(err)
	}
	failing.bad.Store(true)
	throttled.bad.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for tr.Breakers().Get(failing.key).State() != bw.StateOpen || !paused(tr, throttled.key) {
		if time.Now().After(deadline) {
			t.Fatalf("no open breaker and pause after 10s: %+v", tr.Snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
	during := b.readAfter(t, time.Now(), 2*refresh+time.Second)
	t.Logf("during the outage the page heads with:\n%s", during.Text)
	if len(during.Items) != 3 {
		t.Fatalf("items %q, want the open breaker, the pause and the full bulkhead", during.Items)
	}
	for i, want := range [][]string{
		{"breaker_open " + failing.key + ": ", "breaker open", "rejects calls for", "opened on 3 failures (threshold 3)", "last failure: server error"},
		{"paused " + throttled.key + ": ", "paused", "holds its calls for"},
		{"bulkhead_saturated /checkout: ", "bulkhead full", "in inbound", "1 of 1 slots taken"},
	} {
		if !strings.HasPrefix(during.Items[i], want[0]) {
			t.Errorf("item %d is %q, want %q first", i, during.Items[i], want[0])
		}
		for _, w := range want[1:] {
			if !strings.Contains(during.Items[i], w) {
				t.Errorf("item %d %q lacks %q", i, during.Items[i], w)
			}
		}
	}
	if !strings.HasPrefix(during.Text, "trouble · 1 open breaker, 1 pause, 1 full bulkhead\n") {
		t.Errorf("the head of the page reads %q", during.Text)
	}
	if strings.Contains(during.Page, "Nothing to report") {
		t.Errorf("the page says %q during the outage:\n%s", "Nothing to report", during.Page)
	}
	if !strings.Contains(during.Page, "opened on 3 / 3") {
		t.Errorf("the breakers table does not say what opened the breaker:\n%s", during.Page)
	}
	b.screenshot(t, screenshotDir(t), "status-trouble.png")

	// Both upstreams recover: the pause ends, a probe closes the breaker.
	failing.bad.Store(false)
	throttled.bad.Store(false)
	slot.Release()
	deadline = time.Now().Add(15 * time.Second)
	for tr.Breakers().Get(failing.key).State() != bw.StateClosed || paused(tr, throttled.key) {
		if time.Now().After(deadline) {
			t.Fatalf("not recovered after 15s: %+v", tr.Snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
	after := b.readAfter(t, time.Now(), 2*refresh+time.Second)
	if !strings.HasPrefix(after.Text, "Nothing to report: no breaker open or half-open, no pause, no retry budget spent, no bulkhead full") || len(after.Items) != 0 {
		t.Fatalf("after the outage, the page heads with %q, items %q", after.Text, after.Items)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}

	// A page that can no longer poll says so at its head, above what it
	// last knew.
	admin.Close()
	b.waitFor(t, `document.querySelector('#trouble .stale')?.innerText.startsWith('Not updating: what this page shows is from ') === true`, 2*refresh+time.Second)
}

// paused reports whether tr holds a pause for key.
func paused(tr *bw.Transport, key string) bool {
	for _, p := range tr.Snapshot().Pauses {
		if p.Key == key && p.Paused {
			return true
		}
	}
	return false
}
