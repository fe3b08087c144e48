package forwarded

import (
	"slices"
	"testing"
)

func TestWalks(t *testing.T) {
	var got []string
	collect := func(e string) bool { got = append(got, e); return true }
	WalkXFF([]string{"203.0.113.7, 10.0.0.1", ",10.0.0.2 ,"}, collect)
	if want := []string{"10.0.0.2", "10.0.0.1", "203.0.113.7"}; !slices.Equal(got, want) {
		t.Errorf("X-Forwarded-For from the right: %q, want %q", got, want)
	}
	got = nil
	ok := WalkForwarded([]string{`for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`}, collect)
	if want := []string{"[2001:db8::1]:4711", "192.0.2.60"}; !ok || !slices.Equal(got, want) {
		t.Errorf("Forwarded from the right: %q (ok %v), want %q", got, ok, want)
	}
	got = nil
	// A client's unterminated quote cannot swallow the element a proxy
	// appended after it.
	if WalkForwarded([]string{`for="garbage, for=198.51.100.9`}, func(e string) bool { got = append(got, e); return false }); len(got) != 1 || got[0] != "198.51.100.9" {
		t.Errorf("the appended element read %q, want 198.51.100.9 first", got)
	}
}

func TestParseAddrAndSplitHost(t *testing.T) {
	for _, tc := range []struct{ in, host string }{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:80", "192.0.2.1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"2001:db8::1", "2001:db8::1"},
	} {
		if _, host, ok := ParseAddr(tc.in); !ok || host != tc.host {
			t.Errorf("ParseAddr(%q) = %q, %v; want %q", tc.in, host, ok, tc.host)
		}
	}
	if _, _, ok := ParseAddr("unknown"); ok {
		t.Error(`ParseAddr("unknown") parsed`)
	}
	if h := SplitHost("example.com:8080"); h != "example.com" {
		t.Errorf("SplitHost = %q", h)
	}
}
