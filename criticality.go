package breakwater

import "context"

// Criticality is how much a request matters when there is not room for
// all: a bulkhead's queue (a [Shedder]'s, a Transport's concurrency limit)
// grants its slots to the most critical waiter first and, full, turns the
// least critical away first. The zero value is the default criticality,
// between [Sheddable] and [Critical]. Within one criticality, a retry
// (a breakwater caller's attempt after its first, see [CallerHeaders])
// comes after first attempts: it has had its chance.
//
// A request's criticality is its context's ([ContextWithCriticality]). A
// propagating Transport ([WithPropagation]) sends it as
// Breakwater-Criticality (critical, sheddable), and [CallerHeaders] puts a
// trusted caller's into the request's context, so that it follows a
// user's request through the services it reaches. To set it from the
// request instead (a route, a header of your own), put middleware before
// the Shedder that calls ContextWithCriticality.
type Criticality int8

const (
	// Sheddable is work nobody waits on: prefetches, batch jobs, retries
	// of background tasks. It is shed first.
	Sheddable Criticality = -1
	// Critical is work a user waits on: a checkout, a login. It is shed
	// last.
	Critical Criticality = 1
)

type criticalityKey struct{}

// ContextWithCriticality returns ctx carrying criticality c.
func ContextWithCriticality(ctx context.Context, c Criticality) context.Context {
	return context.WithValue(ctx, criticalityKey{}, c)
}

// criticalityOf returns ctx's criticality; the default when it has none.
func criticalityOf(ctx context.Context) Criticality {
	c, _ := ctx.Value(criticalityKey{}).(Criticality)
	return max(Sheddable, min(c, Critical))
}

// headerCriticality carries a request's criticality between services.
const headerCriticality = "Breakwater-Criticality"

// criticalityHeader returns c's header value; "" for the default.
func criticalityHeader(c Criticality) string {
	switch {
	case c >= Critical:
		return "critical"
	case c <= Sheddable:
		return "sheddable"
	}
	return ""
}

// parseCriticality parses a Breakwater-Criticality value; anything else is
// the default.
func parseCriticality(v string) (Criticality, bool) {
	switch v {
	case "critical":
		return Critical, true
	case "sheddable":
		return Sheddable, true
	}
	return 0, false
}
