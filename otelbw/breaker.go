package otelbw

import (
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
)

// breakerAgg follows the breakers behind one key value from their
// transitions (see [labels.Breakers]), under a lock.
type breakerAgg struct {
	mu       sync.Mutex
	breakers labels.Breakers
}

// record applies one transition.
func (b *breakerAgg) record(t breakwater.Transition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.breakers.Record(t)
}

// read returns the state to report at now and the seconds since the
// value's breakers left closed.
func (b *breakerAgg) read(now time.Time) (state breakwater.State, openSeconds float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.breakers.Read(now)
}
