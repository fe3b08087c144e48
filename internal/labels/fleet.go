package labels

import (
	"errors"

	"github.com/breakwater-go/breakwater"
)

// The values of the fleet's metrics: how a Shedder sheds, the pushback
// middleware send, and the safety rules that skip retries and hedges.

// Criticalities holds the criticality values, least critical first, by
// CriticalityIndex.
var Criticalities = []string{"sheddable", "default", "critical"}

// CriticalityIndex is c's index in Criticalities.
func CriticalityIndex(c breakwater.Criticality) int {
	switch {
	case c <= breakwater.Sheddable:
		return 0
	case c >= breakwater.Critical:
		return 2
	}
	return 1
}

// ShedReasons holds why a Shedder shed a request: its caller's deadline
// could not be met, or there was no room (the queue full, its wait over).
var ShedReasons = []string{"caller_deadline", "capacity"}

// ShedReasonIndex is the index in ShedReasons of a shed whose error is
// err: caller_deadline when it matches breakwater.ErrCallerDeadline.
func ShedReasonIndex(err error) int {
	if err != nil && errors.Is(err, breakwater.ErrCallerDeadline) {
		return 0
	}
	return 1
}

// Pushbacks holds the Breakwater-Pushback values middleware send.
var Pushbacks = []string{"elsewhere", "none"}

// PushbackIndex is the index in Pushbacks of the pushback an inbound
// request's answer carried (an EventRequest with ReasonPushback): elsewhere
// on a rejection, none on the handler's own answer.
func PushbackIndex(c breakwater.Category) int {
	if c == breakwater.Rejected {
		return 0
	}
	return 1
}

// SkipReasons holds the reasons a retry or a hedge is skipped, then Other.
var SkipReasons = []string{
	string(breakwater.ReasonNotIdempotent), string(breakwater.ReasonBodyNotReplayable),
	string(breakwater.ReasonBodyTooLarge), string(breakwater.ReasonPushback), Other,
}

// SkipReasonIndex is r's index in SkipReasons.
func SkipReasonIndex(r breakwater.Reason) int { return index(SkipReasons, string(r)) }
