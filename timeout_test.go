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

// TestTimeoutStagesKeepTheInnerName: when an inner timeout stage ended the
// request and the outer one's deadline has passed too by the time the
// error comes up (a base that answers its cancellation late), the error
// keeps the name of the timeout that ended the request.
func TestTimeoutStagesKeepTheInnerName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			time.Sleep(time.Second) // past the outer deadline
			return nil, req.Context().Err()
		})
		rt := bw.Chain(late, bw.CallTimeout(time.Second), bw.AttemptTimeout(500*time.Millisecond))
		r := get(rt)
		if !errors.Is(r.err, bw.ErrAttemptTimeout) || errors.Is(r.err, bw.ErrCallTimeout) {
			t.Fatalf("%v: want the attempt timeout's error alone", r.err)
		}
	})
}
