package breakwater_test

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// Only a request that names the protocol to switch to (an Upgrade field)
// escapes the timeouts; "Connection: Upgrade" alone does not.
func TestConnectionUpgradeAloneKeepsTheTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(1))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		req.Header.Set("Connection", "Upgrade")
		start := time.Now()
		if r := do(tr, req); !errors.Is(r.err, bw.ErrAttemptTimeout) || time.Since(start) != time.Second {
			t.Fatalf("%+v after %s, want ErrAttemptTimeout after 1s", r, time.Since(start))
		}
	})
}
