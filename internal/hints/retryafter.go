// Package hints reads what a server's answer asks of its client: how long
// to wait (Retry-After), and when a spent quota resets (the IETF RateLimit
// fields and their X-RateLimit forebears). Every parser is lenient: a
// malformed value is absent, never an error or a panic.
package hints

import (
	"net/http"
	"time"

	"github.com/breakwater-go/breakwater/internal/sf"
)

// maxHint bounds every server hint. No upstream means a wait of more than a
// century; a longer delta, or one that overflows, is treated as garbage
// (absent) rather than clamped, so a hint never wraps into a negative
// [time.Duration].
const (
	maxHint    = 100 * 365 * 24 * time.Hour
	MaxSeconds = int64(maxHint / time.Second)
)

// epochThreshold separates the two readings of a rate-limit reset value: a
// number above it (2001-09-09 as a Unix time, or 31 years as a delta) is a
// Unix timestamp in seconds, anything up to it a delta in seconds.
const epochThreshold = 1_000_000_000

// Canonical header keys, spelled as [http.CanonicalHeaderKey] returns them so
// that lookups index the map directly and never allocate.
const (
	headerRetryAfter      = "Retry-After"
	headerDate            = "Date"
	headerRateLimitReset  = "Ratelimit-Reset"   // RateLimit-Reset
	headerXRateLimitReset = "X-Ratelimit-Reset" // X-RateLimit-Reset
)

// RetryAfter returns the delay a Retry-After field in h asks for, as
// RFC 9110 section 10.2.3 defines it, and whether h holds a usable one.
//
// The value is either delta-seconds (one or more ASCII digits; spaces and
// tabs around them are ignored) or an HTTP-date in any of the three forms
// [http.ParseTime] accepts. A date is measured against h's own Date field
// when that parses, so a server whose clock is off still gets the wait it
// meant; otherwise against now. A date in the past is a delay of zero.
//
// When h holds several Retry-After field lines, only the first one counts.
// Negative, fractional, empty and malformed values are absent (ok is false),
// and so is any delay longer than 100 years, including values that would
// overflow a [time.Duration]. When ok is true, d is never negative; when it
// is false, d is zero.
//
// It never panics and does not allocate for delta-seconds.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v, present := firstValue(h, headerRetryAfter)
	if !present {
		return 0, false
	}
	if n, digits := parseDigits(v); digits {
		if n > MaxSeconds {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return untilTime(t, h, now)
}

// RateLimitReset returns the delay that RateLimit-Reset, or failing that
// X-RateLimit-Reset, asks for. Both are read as delta-seconds, except that
// a value above epochThreshold is a Unix timestamp in seconds (GitHub and
// others send X-RateLimit-Reset that way), measured like a Retry-After
// date. The same bounds as RetryAfter's apply.
func RateLimitReset(h http.Header, now time.Time) (time.Duration, bool) {
	for _, key := range [...]string{headerRateLimitReset, headerXRateLimitReset} {
		v, present := firstValue(h, key)
		if !present {
			continue
		}
		n, digits := parseDigits(v)
		if !digits || n > MaxSeconds {
			continue
		}
		if n > epochThreshold {
			return untilTime(time.Unix(n, 0), h, now)
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// firstValue returns the first field line of key in h with optional
// whitespace trimmed, and whether there was one. key must be canonical.
func firstValue(h http.Header, key string) (string, bool) {
	vs := h[key]
	if len(vs) == 0 {
		return "", false
	}
	return sf.TrimOWS(vs[0]), true
}

// parseDigits reports whether s is 1*DIGIT and returns its value, saturated
// at MaxSeconds+1 so that long inputs cannot overflow.
func parseDigits(s string) (n int64, digits bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= MaxSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	if n > MaxSeconds {
		n = MaxSeconds + 1
	}
	return n, true
}

// untilTime measures t against h's Date field when it parses, else now.
func untilTime(t time.Time, h http.Header, now time.Time) (time.Duration, bool) {
	base := now
	if v, ok := firstValue(h, headerDate); ok {
		if dt, err := http.ParseTime(v); err == nil {
			base = dt
		}
	}
	d := t.Sub(base) // saturates instead of overflowing
	if d < 0 {
		d = 0
	}
	if d > maxHint {
		return 0, false
	}
	return d, true
}
