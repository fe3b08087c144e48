package breakwater

import (
	"net/http"
	"time"
)

// Canonical keys of the rate limit fields read by ParseQuotaReset.
const (
	headerRateLimit           = "Ratelimit"             // RateLimit
	headerRateLimitPolicy     = "Ratelimit-Policy"      // RateLimit-Policy
	headerRateLimitRemaining  = "Ratelimit-Remaining"   // RateLimit-Remaining
	headerXRateLimitRemaining = "X-Ratelimit-Remaining" // X-RateLimit-Remaining
)

// ParseQuotaReset reports whether h says that the client's quota is spent
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
//     h's Date field when present, as [ParseRetryAfter] does).
//
// Malformed members and values are ignored, never an error or a panic; a
// reset longer than 100 years is ignored. When ok is true, d is never
// negative.
func ParseQuotaReset(h http.Header, now time.Time) (d time.Duration, ok bool) {
	take := func(v time.Duration, found bool) {
		if found && (!ok || v > d) {
			d, ok = v, true
		}
	}
	if vs := h[headerRateLimit]; len(vs) > 0 {
		take(structuredQuota(vs, h[headerRateLimitPolicy]))
	}
	take(fieldQuota(h, headerRateLimitRemaining, headerRateLimitReset, now))
	take(fieldQuota(h, headerXRateLimitRemaining, headerXRateLimitReset, now))
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
	if !digits || n > maxHintSeconds {
		return 0, false
	}
	if n > epochThreshold {
		return untilTime(time.Unix(n, 0), h, now)
	}
	return time.Duration(n) * time.Second, true
}

// structuredQuota reads the RateLimit field lines (and RateLimit-Policy for
// windows).
func structuredQuota(lines, policies []string) (d time.Duration, ok bool) {
	take := func(sec float64) {
		if v, valid := hintSeconds(sec); valid && (!ok || v > d) {
			d, ok = v, true
		}
	}
	var dictRemaining, dictReset float64
	var hasRemaining, hasReset bool
	sfEach(lines, func(m sfMember) {
		if m.hasValue { // dictionary form: limit=100, remaining=0, reset=5
			switch m.name {
			case "remaining":
				dictRemaining, hasRemaining = m.value, true
			case "reset":
				dictReset, hasReset = m.value, true
			}
			return
		}
		if !m.has(paramR) || m.num[paramR] != 0 {
			return
		}
		if m.has(paramT) {
			take(m.num[paramT])
			return
		}
		name := m.name
		sfEach(policies, func(p sfMember) {
			if !p.hasValue && p.name == name && p.has(paramW) {
				take(p.num[paramW])
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
	if !(s >= 0 && s <= float64(maxHintSeconds)) {
		return 0, false
	}
	return secondsCeil(s), true
}

// Parameters of a structured-field member that rate limit fields use.
const (
	paramR = iota // RateLimit: remaining requests
	paramT        // RateLimit: seconds until reset
	paramQ        // RateLimit-Policy: quota
	paramW        // RateLimit-Policy: window in seconds
	numParams
)

// sfMember is one member of a structured-field list or dictionary (RFC
// 8941), reduced to what rate limit fields need: its name (a string or
// token item, or a dictionary key), a dictionary member's numeric value,
// and the numeric parameters r, t, q and w.
type sfMember struct {
	name     string
	value    float64
	hasValue bool
	num      [numParams]float64
	present  uint8
}

func (m sfMember) has(p int) bool { return m.present&(1<<p) != 0 }

// sfEach calls fn for every member of the field lines that parses; it
// skips the rest (inner lists, malformed members).
func sfEach(lines []string, fn func(sfMember)) {
	for _, line := range lines {
		for len(line) > 0 {
			member, rest := sfCut(line)
			line = rest
			var m sfMember
			if m.parse(member) {
				fn(m)
			}
		}
	}
}

// sfCut splits off the first list member of s, at a comma outside quoted
// strings.
func sfCut(s string) (member, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// parse reads one member; it reports false for anything it does not
// understand.
func (m *sfMember) parse(s string) bool {
	s = trimOWS(s)
	if s == "" {
		return false
	}
	var ok bool
	if s[0] == '"' {
		if m.name, s, ok = sfString(s); !ok {
			return false
		}
	} else {
		if m.name, s = sfToken(s); m.name == "" {
			return false
		}
		if len(s) > 0 && s[0] == '=' {
			var v string
			v, s = sfValue(s[1:])
			if m.value, ok = sfNumber(v); !ok {
				return false
			}
			m.hasValue = true
		}
	}
	for len(s) > 0 {
		if s[0] != ';' {
			return false
		}
		var key, v string
		key, s = sfToken(trimOWS(s[1:]))
		if key == "" {
			return false
		}
		if len(s) == 0 || s[0] != '=' {
			continue // a boolean parameter
		}
		v, s = sfValue(s[1:])
		p := -1
		switch key {
		case "r":
			p = paramR
		case "t":
			p = paramT
		case "q":
			p = paramQ
		case "w":
			p = paramW
		}
		if p < 0 {
			continue
		}
		n, ok := sfNumber(v)
		if !ok {
			return false
		}
		m.num[p] = n
		m.present |= 1 << p
	}
	return true
}

// sfString reads the quoted string at the start of s (s[0] is '"').
func sfString(s string) (str, rest string, ok bool) {
	escaped := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 == len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", "", false
			}
			escaped = true
			i++
		case c == '"':
			if !escaped {
				return s[1:i], s[i+1:], true
			}
			b := make([]byte, 0, i-1)
			for j := 1; j < i; j++ {
				if s[j] == '\\' {
					j++
				}
				b = append(b, s[j])
			}
			return string(b), s[i+1:], true
		case c < 0x20 || c > 0x7e:
			return "", "", false
		}
	}
	return "", "", false
}

// sfToken reads a token (or key) at the start of s.
func sfToken(s string) (tok, rest string) {
	i := 0
	for i < len(s) && sfTokenChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func sfTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}

// sfValue reads a bare value up to the next parameter or the end.
func sfValue(s string) (v, rest string) {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' {
			return trimOWS(s[:i]), s[i:]
		}
	}
	return trimOWS(s), ""
}

// sfNumber parses an sf-integer or sf-decimal (digits, optionally a point
// and more digits, optionally a leading minus); long inputs saturate.
func sfNumber(s string) (float64, bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	var n, scale float64 = 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if n < 1e18 {
				n = n*10 + float64(c-'0')
				if scale > 0 {
					scale *= 10
				}
			}
		case c == '.' && scale == 0 && i+1 < len(s):
			scale = 1
		default:
			return 0, false
		}
	}
	if scale > 0 {
		n /= scale
	}
	if neg {
		n = -n
	}
	return n, true
}
