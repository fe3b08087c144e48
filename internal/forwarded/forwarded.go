// Package forwarded walks the client addresses proxies record in a
// request: RFC 7239 Forwarded elements and X-Forwarded-For's list, from the
// entry the nearest proxy appended leftwards, parsing each address without
// trusting what a client may have written before it.
package forwarded

import (
	"net/netip"
	"strings"
)

// WalkXFF calls visit on the comma-separated entries of lines, from the
// last entry of the last line leftwards, until it returns false. Empty
// entries (",,") are skipped.
func WalkXFF(lines []string, visit func(string) bool) {
	for l := len(lines) - 1; l >= 0; l-- {
		s := lines[l]
		for s != "" {
			var e string
			if i := strings.LastIndexByte(s, ','); i >= 0 {
				e, s = s[i+1:], s[:i]
			} else {
				e, s = s, ""
			}
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			if !visit(e) {
				return
			}
		}
	}
}

// WalkForwarded calls visit with the for= value of each element of RFC
// 7239 Forwarded lines, from the last element of the last line leftwards,
// until visit returns false; an element without for= is visited as "".
// Empty elements are skipped. It reports false when it met an element that
// does not parse, which ends the walk.
//
// Each line is parsed from its end: an element that a proxy appended to a
// line the client started is read whole whatever the client wrote before
// it, so an unterminated quoted string or a stray backslash cannot swallow
// it (RFC 7239 §4 lets proxies append to an existing line).
func WalkForwarded(lines []string, visit func(string) bool) bool {
	for l := len(lines) - 1; l >= 0; l-- {
		s := lines[l]
		for {
			forVal, rest, empty, ok := lastForwardedElement(s)
			if !ok {
				return false
			}
			if !empty && !visit(forVal) {
				return true
			}
			if rest == "" {
				break
			}
			s = rest
		}
	}
	return true
}

// lastForwardedElement parses the element at the end of s, a
// comma-separated list of forwarded-elements (pairs separated by ";", each
// a token, "=" and a token or a quoted string). It returns the element's
// for= value ("" without one), the part of s before the element's comma
// ("" when none), whether the element was empty, and ok == false when the
// element does not parse (a stray quote, a bare token, an empty value, for=
// given twice).
func lastForwardedElement(s string) (forVal, rest string, empty, ok bool) {
	i := trimOWSRight(s, len(s))
	if i == 0 {
		return "", "", true, true
	}
	if s[i-1] == ',' {
		return "", s[:i-1], true, true
	}
	hasFor := false
	for {
		i = trimOWSRight(s, i)
		for i > 0 && s[i-1] == ';' { // empty pairs are allowed
			i = trimOWSRight(s, i-1)
		}
		var val string
		if val, i, ok = forwardedValueBefore(s, i); !ok {
			return "", "", false, false
		}
		i = trimOWSRight(s, i)
		if i == 0 || s[i-1] != '=' {
			return "", "", false, false
		}
		i = trimOWSRight(s, i-1)
		j := i
		for j > 0 && IsTokenChar(s[j-1]) {
			j--
		}
		if j == i {
			return "", "", false, false
		}
		if strings.EqualFold(s[j:i], "for") {
			if hasFor {
				return "", "", false, false
			}
			forVal, hasFor = val, true
		}
		i = trimOWSRight(s, j)
		switch {
		case i == 0:
			return forVal, "", false, true
		case s[i-1] == ',':
			return forVal, s[:i-1], false, true
		case s[i-1] == ';':
			i--
		default:
			return "", "", false, false
		}
	}
}

// forwardedValueBefore reads the token or quoted string that ends at s[i]
// and returns it (unquoted) and where it starts.
func forwardedValueBefore(s string, i int) (val string, start int, ok bool) {
	if i == 0 {
		return "", 0, false
	}
	if s[i-1] != '"' {
		j := i
		for j > 0 && isValueChar(s[j-1]) {
			j--
		}
		return s[j:i], j, j < i
	}
	if backslashesBefore(s, i-1)%2 == 1 {
		return "", 0, false // an escaped quote cannot close a string
	}
	for j := i - 2; j >= 0; j-- {
		if s[j] == '"' && backslashesBefore(s, j)%2 == 0 {
			v := s[j+1 : i-1]
			if strings.IndexByte(v, '\\') >= 0 {
				v = unescapeQuoted(v)
			}
			return v, j, true
		}
	}
	return "", 0, false // unterminated
}

// backslashesBefore counts the backslashes right before s[i].
func backslashesBefore(s string, i int) int {
	n := 0
	for i > 0 && s[i-1] == '\\' {
		n++
		i--
	}
	return n
}

// unescapeQuoted removes the quoting backslashes of a quoted string's
// content.
func unescapeQuoted(v string) string {
	b := make([]byte, 0, len(v))
	for k := 0; k < len(v); k++ {
		if v[k] == '\\' && k+1 < len(v) {
			k++
		}
		b = append(b, v[k])
	}
	return string(b)
}

// trimOWSRight returns i moved left past spaces and tabs.
func trimOWSRight(s string, i int) int {
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	return i
}

// IsTokenChar reports whether c may appear in an RFC 9110 token.
func IsTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isValueChar reports whether c may appear in an unquoted Forwarded value:
// a token character, or ':', '[' or ']', which some proxies leave unquoted
// around an address and port.
func isValueChar(c byte) bool {
	return IsTokenChar(c) || c == ':' || c == '[' || c == ']'
}

// ParseAddr reads one list entry: an address, with or without a
// port, IPv6 with or without brackets. It returns the address and the part
// of e that spells it.
func ParseAddr(e string) (netip.Addr, string, bool) {
	if ip, err := netip.ParseAddr(e); err == nil {
		return ip, e, true
	}
	host := SplitHost(e)
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, host, true
	}
	return netip.Addr{}, "", false
}

// SplitHost strips a port and IPv6 brackets without allocating.
func SplitHost(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.IndexByte(hostport, ']'); i > 0 {
			return hostport[1:i]
		}
		return hostport
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.IndexByte(hostport, ':') == i {
		return hostport[:i] // exactly one colon: IPv4 or a name, with a port
	}
	return hostport // no port, or a bare IPv6 address
}
