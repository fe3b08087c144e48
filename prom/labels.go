package prom

import (
	"slices"
	"strings"

	"github.com/breakwater-go/breakwater/internal/labels"
)

// Label values the collector produces on its own.
const (
	// OtherLabel is the value of a key or route label once the cap is
	// reached, and of a method, status class, mechanism or reason outside
	// the known set.
	OtherLabel = labels.Other
	// NoneLabel is the value of a key or route label for an empty key or
	// route (an inbound request no route pattern matched, for example).
	NoneLabel = labels.None
	// MaxLabelLen is the longest key or route label value, in bytes; longer
	// values are cut at a rune boundary.
	MaxLabelLen = labels.MaxLen
)

// methodNames holds the method label values; the last one is OtherLabel.
var methodNames = append(slices.Clone(labels.Methods), OtherLabel)

// methodIndex maps a request method to its label: one of the nine methods
// of RFC 9110 and RFC 5789 (case-insensitively, "" being GET as in
// net/http), else OtherLabel.
func methodIndex(m string) int {
	if i := labels.MethodIndex(m); i < len(labels.Methods) {
		return i
	}
	for i, name := range labels.Methods {
		if strings.EqualFold(m, name) {
			return i
		}
	}
	return len(labels.Methods)
}

// statusClassNames holds the status class label values; the last one is
// OtherLabel (a status outside 100–599).
var statusClassNames = []string{"1xx", "2xx", "3xx", "4xx", "5xx", OtherLabel}

func statusClassIndex(status int) int {
	if status >= 100 && status <= 599 {
		return status/100 - 1
	}
	return len(statusClassNames) - 1
}
