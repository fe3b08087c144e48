package e2e

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// With 10,000 keys the page draws one page of rows, the open breaker
// first, pages forward, and filters, without a console error.
func TestStatusPagePagesAndFilters(t *testing.T) {
	b := newBrowser(t)
	bs, err := bw.NewBreakers()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		bs.Get(fmt.Sprintf("host-%05d.example:443", i))
	}
	bs.Get("host-07777.example:443").Trip(time.Minute)
	page, err := status.New(status.Source("many", bs), status.WithRefresh(refresh))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)

	rows := `document.querySelectorAll('[data-table=breakers] tbody tr')`
	pager := `document.querySelector('[data-table=breakers] .pager').textContent`
	b.do(t, chromedp.Navigate(srv.URL+"/"))
	b.waitFor(t, rows+`.length === 50`, 5*time.Second)
	first, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](rows+`[0].dataset.key`))
	if err != nil || first != "host-07777.example:443" {
		t.Fatalf("first row %q (%v), want the open breaker", first, err)
	}
	b.do(t, chromedp.Click(chromedp.CSS(`[data-table=breakers] .pager button:last-child`)))
	b.waitFor(t, pager+`.startsWith("51–100 of 10000 keys")`, 2*time.Second)

	// Type into the filter as a person would: set the value, fire input.
	b.waitFor(t, `(() => { const q = document.getElementById('q'); q.value = 'host-0999'; q.dispatchEvent(new Event('input')); return true })()`, time.Second)
	b.waitFor(t, rows+`.length === 10 && `+pager+`.startsWith("1–10 of 10 matching")`, 2*time.Second)
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
