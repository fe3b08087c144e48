package breakwater

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/breakwater-go/breakwater/internal/forwarded"
)

// isIPv4 must give netip.ParseAddr's answer for IPv4, on every string.
func checkIPv4(t *testing.T, s string) {
	t.Helper()
	ip, err := netip.ParseAddr(s)
	if want := err == nil && ip.Is4(); isIPv4(s) != want {
		t.Errorf("isIPv4(%q) = %v, ParseAddr says %v (%v)", s, !want, want, err)
	}
}

func TestIsIPv4MatchesParseAddr(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "1.2.3.4", "192.0.2.255", "255.255.255.255", "10.0.0.1",
		"", "1.2.3", "1.2.3.4.5", "1.2.3.", ".1.2.3", "1..2.3", "256.1.1.1", "1.2.3.256",
		"01.2.3.4", "1.2.3.04", "1.2.3.00", "0.0.0.00", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4%eth0",
		"1.2.3.4:80", "::ffff:1.2.3.4", "::1", "a.b.c.d", "1.2.3.-4", "1.2.3.+4", "999.1.1.1",
		"1.2.3.4/8", "0x1.2.3.4", "1.2.3.1234", "1111.2.3.4",
	} {
		checkIPv4(t, s)
	}
	// Random strings over the characters that matter.
	r := rand.New(rand.NewPCG(1, 2))
	const chars = "0123456789.....:%a"
	b := make([]byte, 0, 20)
	for range 200_000 {
		b = b[:0]
		for range r.IntN(18) {
			b = append(b, chars[r.IntN(len(chars))])
		}
		checkIPv4(t, string(b))
		if t.Failed() {
			return
		}
	}
	// Random addresses, some with their fields padded.
	for range 50_000 {
		s := ""
		for i := range 4 {
			if i > 0 {
				s += "."
			}
			v := r.IntN(300)
			switch r.IntN(4) {
			case 0:
				s += "0"
			}
			s += itoa(int64(v))
		}
		checkIPv4(t, s)
	}
}

func FuzzIsIPv4(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "01.2.3.4", "256.0.0.0", "1.2.3", "::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkIPv4(t, s) })
}

// remoteKeyRef is remoteKey without its one-pass IPv4 path.
func remoteKeyRef(remote string) string {
	host := forwarded.SplitHost(remote)
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return remote
	case ip.Is4():
		return host
	}
	return ipKey(ip)
}

func checkRemoteKey(t *testing.T, s string) {
	t.Helper()
	if got, want := remoteKey(s), remoteKeyRef(s); got != want {
		t.Errorf("remoteKey(%q) = %q, want %q", s, got, want)
	}
}

// remoteKey's one-pass path for IPv4 gives the key of splitting the port
// off and parsing the address, on every string.
func TestRemoteKeyMatchesParseAddr(t *testing.T) {
	for _, s := range []string{
		"192.0.2.1:4000", "192.0.2.1", "192.0.2.1:", "192.0.2.1:80:90", "192.0.2.1::", "01.2.3.4:80",
		"1.2.3.4.5:80", "1.2.3:80", "256.1.1.1:80", "1.2.3.4%eth0:80", "[::ffff:1.2.3.4]:80", "::ffff:1.2.3.4",
		"[2001:db8::1]:443", "2001:db8::1", "@", "", ":80", "1.2.3.4a:80", "1.2.3.4 :80",
	} {
		checkRemoteKey(t, s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const chars = "0123456789.....::::[]%af"
	b := make([]byte, 0, 24)
	for range 200_000 {
		b = b[:0]
		for range r.IntN(22) {
			b = append(b, chars[r.IntN(len(chars))])
		}
		checkRemoteKey(t, string(b))
		if t.Failed() {
			return
		}
	}
}

func FuzzRemoteKey(f *testing.F) {
	for _, s := range []string{"192.0.2.1:4000", "1.2.3.4", "1.2.3.4:1:2", "[::1]:80", "01.2.3.4:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkRemoteKey(t, s) })
}

// TestTransportHostKey: the Transport's HostKey, which keeps the key of
// the first plain-http host it called, answers HostKey's key for every
// host (TestDefaultChainAllocations checks it builds none for that first
// host again).
func TestTransportHostKey(t *testing.T) {
	tr, err := NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://a.example", "http://b.example:8080", "http://a.example", "https://a.example", "ws://a.example", "http://a.example:80", "http://b.example:8080"} {
		req := httptest.NewRequest(http.MethodGet, u, nil)
		if got, want := tr.hostKey(req), HostKey(req); got != want {
			t.Errorf("%s: key %q, want %q", u, got, want)
		}
	}
}
