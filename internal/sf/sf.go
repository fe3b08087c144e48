// Package sf reads the members of Structured Field lists and dictionaries
// (RFC 8941) as rate limit fields use them: a member's name (a string or
// token item, or a dictionary key), a dictionary member's numeric value,
// and the numeric parameters r, t, q and w. It is lenient where RFC 8941
// is strict: a malformed member is skipped, never an error or a panic, so
// that one bad member does not hide the others.
package sf

// Parameters of a member that rate limit fields use.
const (
	R = iota // RateLimit: remaining requests
	T        // RateLimit: seconds until reset
	Q        // RateLimit-Policy: quota
	W        // RateLimit-Policy: window in seconds
	numParams
)

// Member is one member of a list or dictionary, reduced to what rate limit
// fields need.
type Member struct {
	// Name is the member's string or token item, or its dictionary key.
	Name string
	// Value is a dictionary member's numeric value, when HasValue.
	Value    float64
	HasValue bool
	// Num holds the numeric parameters R, T, Q and W; see Has.
	Num     [numParams]float64
	present uint8
}

// Has reports whether the member carries parameter p (R, T, Q or W).
func (m Member) Has(p int) bool { return m.present&(1<<p) != 0 }

// Each calls fn for every member of the field lines that parses; it skips
// the rest (inner lists, malformed members).
func Each(lines []string, fn func(Member)) {
	for _, line := range lines {
		for len(line) > 0 {
			member, rest := cut(line)
			line = rest
			var m Member
			if m.parse(member) {
				fn(m)
			}
		}
	}
}

// cut splits off the first list member of s, at a comma outside quoted
// strings.
func cut(s string) (member, rest string) {
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
func (m *Member) parse(s string) bool {
	s = TrimOWS(s)
	if s == "" {
		return false
	}
	var ok bool
	if s[0] == '"' {
		if m.Name, s, ok = quoted(s); !ok {
			return false
		}
	} else {
		if m.Name, s = token(s); m.Name == "" {
			return false
		}
		if len(s) > 0 && s[0] == '=' {
			var v string
			v, s = value(s[1:])
			if m.Value, ok = number(v); !ok {
				return false
			}
			m.HasValue = true
		}
	}
	for len(s) > 0 {
		if s[0] != ';' {
			return false
		}
		var key, v string
		key, s = token(TrimOWS(s[1:]))
		if key == "" {
			return false
		}
		if len(s) == 0 || s[0] != '=' {
			continue // a boolean parameter
		}
		v, s = value(s[1:])
		p := -1
		switch key {
		case "r":
			p = R
		case "t":
			p = T
		case "q":
			p = Q
		case "w":
			p = W
		}
		if p < 0 {
			continue
		}
		n, ok := number(v)
		if !ok {
			return false
		}
		m.Num[p] = n
		m.present |= 1 << p
	}
	return true
}

// quoted reads the quoted string at the start of s (s[0] is '"').
func quoted(s string) (str, rest string, ok bool) {
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

// token reads a token (or key) at the start of s.
func token(s string) (tok, rest string) {
	i := 0
	for i < len(s) && tokenChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func tokenChar(c byte) bool {
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

// value reads a bare value up to the next parameter or the end.
func value(s string) (v, rest string) {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' {
			return TrimOWS(s[:i]), s[i:]
		}
	}
	return TrimOWS(s), ""
}

// number parses an sf-integer or sf-decimal (digits, optionally a point
// and more digits, optionally a leading minus); long inputs saturate.
func number(s string) (float64, bool) {
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

// TrimOWS trims the optional whitespace of RFC 9110 (spaces and tabs).
func TrimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
