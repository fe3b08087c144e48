// Package labels turns breakwater's events into bounded label values: the
// cleaning of keys, routes and endpoints, the capped tables that map them to
// their series, the value lists of categories, mechanisms, methods, breaker
// states and reasons, and the aggregation of breaker transitions. The
// Prometheus collector (prom) and the OpenTelemetry observer (otelbw) both
// build on it, so that their label values agree.
//
// otelbw is a module of its own: a program may build it against a newer
// root module than the one it was released with. Change this package's API
// by adding to it only.
package labels

import (
	"strings"
	"unicode/utf8"
)

// Values produced on their own, and the longest key, route or endpoint
// value.
const (
	// Other is the value of a key, route or endpoint once its cap is
	// reached, and of a value outside its known set.
	Other = "other"
	// None is the value of an empty key, route or endpoint.
	None = "none"
	// MaxLen is the longest key, route or endpoint value, in bytes; longer
	// values are cut at a rune boundary.
	MaxLen = 128
)

// Clean makes s a usable value: None when empty, valid UTF-8, at most
// MaxLen bytes. The result may share s's memory.
func Clean(s string) string {
	if s == "" {
		return None
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) > MaxLen {
		n := MaxLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// Key maps key through fn (nil: the key itself) and cleans the result; a
// panic in fn gives Other. It never panics.
func Key(fn func(key string) string, key string) (value string) {
	if fn != nil {
		defer func() {
			if recover() != nil {
				value = Other
			}
		}()
		key = fn(key)
	}
	return Clean(key)
}
