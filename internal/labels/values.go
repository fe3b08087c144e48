package labels

import (
	"net/http"

	"github.com/breakwater-go/breakwater"
)

// The value lists below are indexed by the matching Index function; each
// ends with the value of anything outside the known set ("unknown" for
// categories and states, Other for the rest). Methods is the exception: it
// holds the known methods only, since prom and otelbw name the others
// differently.

// Categories holds the category values by breakwater.Category, then
// "unknown".
var Categories = func() []string {
	cs := breakwater.Categories()
	names := make([]string, len(cs)+1)
	for i, c := range cs {
		names[i] = c.String()
	}
	names[len(cs)] = breakwater.Category(len(cs)).String()
	return names
}()

// CategoryIndex is c's index in Categories.
func CategoryIndex(c breakwater.Category) int {
	if i := int(c); i < len(Categories)-1 {
		return i
	}
	return len(Categories) - 1
}

// Mechanisms holds the mechanism values in the order of
// breakwater.Mechanisms, then Other.
var Mechanisms = func() []string {
	var names []string
	for _, m := range breakwater.Mechanisms() {
		names = append(names, string(m))
	}
	return append(names, Other)
}()

// MechanismIndex is m's index in Mechanisms; the list is short, so a scan
// beats a map.
func MechanismIndex(m breakwater.Mechanism) int {
	for i, name := range Mechanisms[:len(Mechanisms)-1] {
		if string(m) == name {
			return i
		}
	}
	return len(Mechanisms) - 1
}

// Methods holds the nine request methods of RFC 9110 and RFC 5789.
var Methods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace,
}

// MethodIndex is m's index in Methods, matched case-sensitively ("" is
// GET, as in net/http), or len(Methods) for any other method.
func MethodIndex(m string) int {
	switch m {
	case http.MethodGet, "":
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodPatch:
		return 4
	case http.MethodDelete:
		return 5
	case http.MethodConnect:
		return 6
	case http.MethodOptions:
		return 7
	case http.MethodTrace:
		return 8
	}
	return len(Methods)
}

// States holds the breaker state values by breakwater.State, then
// "unknown".
var States = [...]string{
	breakwater.StateClosed:   breakwater.StateClosed.String(),
	breakwater.StateHalfOpen: breakwater.StateHalfOpen.String(),
	breakwater.StateOpen:     breakwater.StateOpen.String(),
	breakwater.StateOpen + 1: (breakwater.StateOpen + 1).String(),
}

// StateIndex is s's index in States.
func StateIndex(s breakwater.State) int {
	if int(s) < len(States)-1 {
		return int(s)
	}
	return len(States) - 1
}

// Reasons holds the breaker transition reasons, then Other.
var Reasons = []string{
	string(breakwater.ReasonFailures), string(breakwater.ReasonProbeFailed), string(breakwater.ReasonOpenElapsed),
	string(breakwater.ReasonProbesSucceeded), string(breakwater.ReasonTrip), string(breakwater.ReasonReset),
	string(breakwater.ReasonRecovery), Other,
}

// ReasonIndex is r's index in Reasons.
func ReasonIndex(r breakwater.Reason) int { return index(Reasons, string(r)) }

// EjectionReasons holds the reasons a failover endpoint is ejected for,
// then Other.
var EjectionReasons = []string{
	string(breakwater.ReasonFailures), string(breakwater.ReasonOutlier), string(breakwater.ReasonProbeFailed), Other,
}

// EjectionIndex is r's index in EjectionReasons.
func EjectionIndex(r breakwater.Reason) int { return index(EjectionReasons, string(r)) }

// index finds v among the known values of list, or gives the last index.
func index(list []string, v string) int {
	for i, name := range list[:len(list)-1] {
		if v == name {
			return i
		}
	}
	return len(list) - 1
}
