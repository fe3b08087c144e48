package hints

import (
	"net/http"
	"time"

	"github.com/breakwater-go/breakwater/internal/sat"
	"github.com/breakwater-go/breakwater/internal/sf"
)

// Canonical keys of the rate limit fields read by QuotaReset.
const (
	RateLimitField           = "Ratelimit"             // RateLimit
	RateLimitPolicyField     = "Ratelimit-Policy"      // RateLimit-Policy
	RateLimitRemainingField  = "Ratelimit-Remaining"   // RateLimit-Remaining
	XRateLimitRemainingField = "X-Ratelimit-Remaining" // X-RateLimit-Remaining
)

// QuotaReset reports whether h says that the client's quota is spent
// and, if so, how long until it resets. It reads, and takes the longest of:
//
//   - the IETF RateLimit field (draft-ietf-httpapi-ratelimit-headers), a
//     structured-field list such as `"default";r=0;t=5`: a policy with no
//     requests remaining (r=0) resets after t seconds, or, without t, after
//     the window (w) of the RateLimit-Policy member of the same name
//     (`"default";q=100;w=60`); the earlier dictionary form
//     `limit=100, remaining=0, reset=5` is read too;
//   - RateLimit-Remaining: 0 with RateLimit-Reset, and
//     X-RateLimit-Remaining: 0 with X-RateLimit-Reset: delta-seconds, or a
//     Unix time in seconds when the number is above 1e9 (measured against
//     h's Date field when present, as a Retry-After date is).
//
// Malformed members and values are ignored, never an error or a panic; a
// reset longer than 100 years is ignored. When ok is true, d is never
// negative.
func QuotaReset(h http.Header, now time.Time) (d time.Duration, ok bool) {
	take := func(v time.Duration, found bool) {
		if found && (!ok || v > d) {
			d, ok = v, true
		}
	}
	if vs := h[RateLimitField]; len(vs) > 0 {
		take(StructuredQuota(vs, h[RateLimitPolicyField]))
	}
	take(fieldQuota(h, RateLimitRemainingField, headerRateLimitReset, now))
	take(fieldQuota(h, XRateLimitRemainingField, headerXRateLimitReset, now))
	return d, ok
}

// fieldQuota reads a pair of remaining and reset fields.
func fieldQuota(h http.Header, remaining, reset string, now time.Time) (time.Duration, bool) {
	v, ok := firstValue(h, remaining)
	if !ok {
		return 0, false
	}
	if n, digits := parseDigits(v); !digits || n != 0 {
		return 0, false
	}
	v, ok = firstValue(h, reset)
	if !ok {
		return 0, false
	}
	n, digits := parseDigits(v)
	if !digits || n > MaxSeconds {
		return 0, false
	}
	if n > epochThreshold {
		return untilTime(time.Unix(n, 0), h, now)
	}
	return time.Duration(n) * time.Second, true
}

// StructuredQuota reads the RateLimit field lines (and RateLimit-Policy for
// windows).
func StructuredQuota(lines, policies []string) (d time.Duration, ok bool) {
	take := func(sec float64) {
		if v, valid := hintSeconds(sec); valid && (!ok || v > d) {
			d, ok = v, true
		}
	}
	var dictRemaining, dictReset float64
	var hasRemaining, hasReset bool
	sf.Each(lines, func(m sf.Member) {
		if m.HasValue { // dictionary form: limit=100, remaining=0, reset=5
			switch m.Name {
			case "remaining":
				dictRemaining, hasRemaining = m.Value, true
			case "reset":
				dictReset, hasReset = m.Value, true
			}
			return
		}
		if !m.Has(sf.R) || m.Num[sf.R] != 0 {
			return
		}
		if m.Has(sf.T) {
			take(m.Num[sf.T])
			return
		}
		name := m.Name
		sf.Each(policies, func(p sf.Member) {
			if !p.HasValue && p.Name == name && p.Has(sf.W) {
				take(p.Num[sf.W])
			}
		})
	})
	if hasRemaining && dictRemaining == 0 && hasReset {
		take(dictReset)
	}
	return d, ok
}

// hintSeconds converts a non-negative number of seconds to a Duration,
// rounding up; negative, NaN or over-long values are invalid.
func hintSeconds(s float64) (time.Duration, bool) {
	if !(s >= 0 && s <= float64(MaxSeconds)) {
		return 0, false
	}
	return sat.SecondsCeil(s), true
}
