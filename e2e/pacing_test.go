package e2e

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// staticSource is a source whose snapshot is fixed.
type staticSource bw.Snapshot

func (s staticSource) Snapshot() bw.Snapshot { s.At = time.Now(); return bw.Snapshot(s) }

// The page draws a half-open breaker's ramp (probes in flight of those
// allowed) and a paced key's learned rate, in slow start or at its
// ceiling, without a console error.
func TestStatusPageDrawsRampAndLearnedRate(t *testing.T) {
	b := newBrowser(t)
	src := staticSource{
		Breakers: []bw.BreakerSnapshot{{Key: "b.test", State: bw.StateHalfOpen, StateName: "half_open", Since: time.Now(), ProbesInFlight: 1, ProbesAllowed: 2, ProbeSuccesses: 1}},
		Pauses: []bw.PauseSnapshot{
			{Key: "fast.test", Paced: true, PaceRate: 9.7, PacePhase: bw.PaceCeiling, PaceCeiling: 10},
			{Key: "slow.test", Paced: true, PaceRate: 2, PacePhase: bw.PaceSlowStart},
		},
	}
	page, err := status.New(status.Source("api", src), status.WithRefresh(refresh))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)
	b.do(t, chromedp.Navigate(srv.URL+"/"))
	row := func(table, key string) string {
		return `(document.querySelector('[data-table=` + table + `] tr[data-key="` + key + `"]')?.textContent || '')`
	}
	b.waitFor(t, row("breakers", "b.test")+`.includes('1 of 2 probing, 1 ok')`, 5*time.Second)
	b.waitFor(t, row("pauses", "fast.test")+`.includes('9.7/s, at its ceiling (10/s)')`, 2*time.Second)
	b.waitFor(t, row("pauses", "slow.test")+`.includes('2.0/s, slow start')`, 2*time.Second)
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
