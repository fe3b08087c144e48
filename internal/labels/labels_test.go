package labels

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	long := strings.Repeat("a", MaxLen-1) + "é" // the é straddles the cut
	for _, tc := range []struct{ in, want string }{
		{"", None},
		{"api.example.com", "api.example.com"},
		{"a\xffb", "a\uFFFDb"},
		{strings.Repeat("x", MaxLen), strings.Repeat("x", MaxLen)},
		{strings.Repeat("x", MaxLen+1), strings.Repeat("x", MaxLen)},
		{long, strings.Repeat("a", MaxLen-1)},
	} {
		got := Clean(tc.in)
		if got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > MaxLen {
			t.Errorf("Clean(%q) = %q: invalid or longer than %d bytes", tc.in, got, MaxLen)
		}
	}
}

func TestKey(t *testing.T) {
	upper := func(k string) string { return strings.ToUpper(k) }
	for _, tc := range []struct {
		name string
		fn   func(string) string
		key  string
		want string
	}{
		{"nil fn", nil, "a.example", "a.example"},
		{"nil fn, empty", nil, "", None},
		{"mapped", upper, "a.example", "A.EXAMPLE"},
		{"mapped to empty", func(string) string { return "" }, "a.example", None},
		{"mapped and cleaned", func(string) string { return "\xff" }, "a.example", "\uFFFD"},
		{"panics", func(string) string { panic("boom") }, "a.example", Other},
	} {
		if got := Key(tc.fn, tc.key); got != tc.want {
			t.Errorf("%s: Key(%q) = %q, want %q", tc.name, tc.key, got, tc.want)
		}
	}
}
