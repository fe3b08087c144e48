package breakwater_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestTimeoutStages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		rt := bw.Chain(u.Transport(), bw.CallTimeout(3*time.Second))
		start := time.Now()
		r := get(rt)
		var te *bw.Error
		if !errors.Is(r.err, bw.ErrCallTimeout) || !errors.As(r.err, &te) || !te.Timeout() || time.Since(start) != 3*time.Second {
			t.Fatalf("%v after %s, want ErrCallTimeout after 3s", r.err, time.Since(start))
		}
	})
}
