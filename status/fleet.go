package status

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
)

// maxCountKeys bounds the keys a Counts keeps; the events of further keys
// are counted under "other".
const maxCountKeys = 1000

// Counts is a [breakwater.Observer] that counts what a service's breakwater
// components say to the services around it, for the page to show: the
// requests a Shedder shed, by criticality and whether their caller's
// deadline could not be met; the answers that carried Breakwater-Pushback
// (elsewhere or none); and the retries its Transports did not make because
// the server asked (honoured pushback). Pass it to the observer options of
// the Shedder, the other middleware and the Transports with
// [breakwater.WithObserver], and to the page as a [Source]: the page shows
// a "fleet" table of its counts per route or upstream, the most shed
// first.
//
// It keeps the counts since it was made, of up to 1000 keys (the routes
// and upstreams of the events, never client addresses), further keys
// being counted as "other". It is safe for concurrent use; events other
// than these cost it nothing.
type Counts struct {
	mu   sync.Mutex
	keys map[string]*countRow
}

// NewCounts returns a Counts with nothing counted.
func NewCounts() *Counts { return &Counts{keys: map[string]*countRow{}} }

// countRow is one key's counts, as the page's state has them.
type countRow struct {
	Key string `json:"key"`
	// Shed counts the requests a Shedder refused, by criticality; Late
	// those of them refused because their caller's deadline could not be
	// met.
	Shed criticalities `json:"shed"`
	Late criticalities `json:"late"`
	// Elsewhere and None count the answers that carried
	// Breakwater-Pushback with that value.
	Elsewhere uint64 `json:"pushback_elsewhere"`
	None      uint64 `json:"pushback_none"`
	// Honoured counts the retries a Transport did not make because the
	// server asked (Breakwater-Pushback).
	Honoured uint64 `json:"pushback_honoured"`
}

// criticalities counts by criticality.
type criticalities struct {
	Sheddable uint64 `json:"sheddable"`
	Default   uint64 `json:"default"`
	Critical  uint64 `json:"critical"`
}

func (c *criticalities) add(cr breakwater.Criticality) {
	switch {
	case cr <= breakwater.Sheddable:
		c.Sheddable++
	case cr >= breakwater.Critical:
		c.Critical++
	default:
		c.Default++
	}
}

func (c criticalities) total() uint64 { return c.Sheddable + c.Default + c.Critical }

// Observe counts e. It implements [breakwater.Observer].
func (c *Counts) Observe(_ context.Context, e breakwater.Event) {
	switch {
	case e.Kind == breakwater.EventReject && e.Mechanism == breakwater.MechShed:
		c.count(e.Route, func(r *countRow) {
			r.Shed.add(e.Criticality)
			if e.Err != nil && errors.Is(e.Err, breakwater.ErrCallerDeadline) {
				r.Late.add(e.Criticality)
			}
		})
	case e.Kind == breakwater.EventRequest && e.Reason == breakwater.ReasonPushback:
		c.count(e.Route, func(r *countRow) {
			if e.Category == breakwater.Rejected {
				r.Elsewhere++
			} else {
				r.None++
			}
		})
	case e.Kind == breakwater.EventRetrySkipped && e.Reason == breakwater.ReasonPushback:
		c.count(e.Key, func(r *countRow) { r.Honoured++ })
	}
}

func (c *Counts) count(key string, fn func(*countRow)) {
	if key == "" {
		key = "none"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.keys[key]
	if r == nil {
		if len(c.keys) >= maxCountKeys {
			key = "other"
			r = c.keys[key]
		}
		if r == nil {
			r = &countRow{Key: key}
			c.keys[key] = r
		}
	}
	fn(r)
}

// rows returns a copy of every key's counts.
func (c *Counts) rows() []countRow {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]countRow, 0, len(c.keys))
	for _, r := range c.keys {
		out = append(out, *r)
	}
	return out
}

// Snapshot implements [Snapshotter]: it holds nothing a breakwater
// component holds; the page reads the counts themselves.
func (c *Counts) Snapshot() breakwater.Snapshot { return breakwater.Snapshot{At: time.Now()} }

// compareCounts puts the most shed first, then the most pushback.
func compareCounts(a, b countRow) int {
	return cmp.Or(
		cmp.Compare(b.Shed.Critical, a.Shed.Critical),
		cmp.Compare(b.Shed.total(), a.Shed.total()),
		cmp.Compare(b.Elsewhere+b.None+b.Honoured, a.Elsewhere+a.None+a.Honoured),
	)
}

// shedClass is a row's class in the table's counts.
func shedClass(r countRow) string {
	switch {
	case r.Shed.Critical > 0:
		return "critical_shed"
	case r.Late.total() > 0:
		return "deadline_shed"
	}
	return ""
}
