package breakwater_test

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
)

// The trusted proxies of the tests below, and the peer every request comes
// from (the nearest of them).
const (
	trustedPrefix = "10.0.0.0/8"
	proxyPeer     = "10.0.0.1:4000"
)

// A client that sends an unterminated quoted string must not swallow the
// element its proxy appends to the same line (RFC 7239 §4 lets a proxy
// append to an existing Forwarded line), and so must not choose its key.
func TestForwardedUnterminatedQuoteCannotChooseKey(t *testing.T) {
	fwd, err := bw.ForwardedForKey("Forwarded", trustedPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"unterminated quote", `for=1.1.1.1;x=", for=203.0.113.7`, "203.0.113.7"},
		{"unterminated quote, no space", `for=1.1.1.1;x=",for=203.0.113.7`, "203.0.113.7"},
		{"escaped closing quote", `for=1.1.1.1;x="a\", for=203.0.113.7`, "203.0.113.7"},
		{"trailing backslash", `for=1.1.1.1;x="a\, for=203.0.113.7`, "203.0.113.7"},
		{"quoted ipv6 appended", `for=1.1.1.1;x=", for="[2001:db8:cafe::17]:4711"`, "2001:db8:cafe::/64"},
		{"two for parameters", `for=1.1.1.1;for=2.2.2.2, for=203.0.113.7`, "203.0.113.7"},
		{"behind a second trusted proxy", `for=1.1.1.1;x=", for=203.0.113.7, for=10.9.9.9`, "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fwd(reqFrom(proxyPeer, "Forwarded", tc.line)); got != tc.want {
				t.Fatalf("Forwarded: %s\nkey %q, want %q (the element the proxy appended)", tc.line, got, tc.want)
			}
		})
	}
}

// forwardedCase is one request as a chain of proxies builds it: whatever
// the client sent (several lines, any bytes), then the element the first
// trusted proxy appended for the client's real address, then the elements
// of further trusted proxies, each appended to the last line or on a line
// of its own.
type forwardedCase struct {
	xff     bool     // X-Forwarded-For, else Forwarded
	client  []string // the lines the client sent
	real    netip.AddrPort
	port    bool // the proxy wrote the client's port
	extra   int  // trusted proxies after the first
	newLine uint8
	params  bool // the proxy adds proto= and by= parameters
}

// lines returns the header lines the upstream receives.
func (c forwardedCase) lines() []string {
	lines := append([]string(nil), c.client...)
	add := func(i int, elem string) {
		if len(lines) == 0 || c.newLine&(1<<i) != 0 {
			lines = append(lines, elem)
			return
		}
		lines[len(lines)-1] += ", " + elem
	}
	add(0, c.element(c.real, c.port, c.params))
	for i := range c.extra {
		hop := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i), 9}), 4000)
		add(i+1, c.element(hop, false, false))
	}
	return lines
}

// element is what a proxy writes for a peer.
func (c forwardedCase) element(a netip.AddrPort, port, params bool) string {
	var node string
	switch {
	case port:
		node = a.String() // 1.2.3.4:5 or [2001:db8::1]:5
	case a.Addr().Is6():
		node = "[" + a.Addr().String() + "]"
	default:
		node = a.Addr().String()
	}
	if c.xff {
		if a.Addr().Is6() && !port {
			return a.Addr().String()
		}
		return node
	}
	if strings.ContainsAny(node, ":[") {
		node = `"` + node + `"`
	}
	elem := "for=" + node
	if params {
		elem += `;proto=https;by="[2001:db8::53]"`
	}
	return elem
}

// want is the key the client must get: its real address, keyed like
// RemoteAddrKey.
func (c forwardedCase) want() string {
	return bw.RemoteAddrKey(&http.Request{RemoteAddr: c.real.String()})
}

// check runs c through ForwardedForKey and reports a key other than the
// client's own.
func (c forwardedCase) check(t *testing.T, xff, fwd bw.KeyFunc) {
	t.Helper()
	name, key := "Forwarded", fwd
	if c.xff {
		name, key = "X-Forwarded-For", xff
	}
	r := &http.Request{RemoteAddr: proxyPeer, Header: http.Header{name: c.lines()}}
	if got, want := key(r), c.want(); got != want {
		t.Fatalf("a client chose its key:\n%s: %q\nkey %q, want %q (the address its proxy saw)", name, c.lines(), got, want)
	}
}

// Fragments hostile clients are made of: syntax, addresses in every form,
// obfuscated identifiers and garbage.
var forwardedFragments = []string{
	`for=`, `For=`, `FOR =`, `by=`, `proto=https`, `host="a,b"`, `x=`,
	`"`, `\`, `\"`, `"\"`, `,`, `;`, `=`, ` `, "\t", `, ,`,
	`1.1.1.1`, `10.0.0.7`, `10.9.9.9`, `203.0.113.99`, `1.1.1.1:80`, `"1.1.1.1:80"`,
	`[2001:db8::1]`, `"[2001:db8::1]:443"`, `2001:db8::1`, `::ffff:1.1.1.1`, `::ffff:10.0.0.9`,
	`fe80::1%eth0`, `"[fe80::1%25eth0]"`, `unknown`, `_hidden`, `_x.Y-z`, `[`, `]`, `:`,
	`%`, `é`, "\x00", "\x7f", `for="`, `for=1.1.1.1;x="`, `for=10.0.0.7,`,
}

func randomClientLines(rng *rand.Rand) []string {
	lines := make([]string, rng.IntN(3))
	for i := range lines {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(forwardedFragments[rng.IntN(len(forwardedFragments))])
		}
		lines[i] = b.String()
	}
	return lines
}

func randomClientAddr(rng *rand.Rand) netip.AddrPort {
	var a netip.Addr
	switch rng.IntN(3) {
	case 0:
		a = netip.AddrFrom4([4]byte{203, 0, 113, byte(rng.IntN(256))})
	case 1:
		a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xca, 0xfe, 15: byte(rng.IntN(256))})
	default:
		a = netip.AddrFrom4([4]byte{198, 51, byte(rng.IntN(256)), byte(rng.IntN(256))})
	}
	return netip.AddrPortFrom(a, uint16(1+rng.IntN(65535)))
}

// Whatever a client behind a trusted proxy sends in X-Forwarded-For or
// Forwarded (several lines, same-line appends, quoted strings, obfuscated
// identifiers, ports, IPv6 zones, mapped IPv4, garbage), its key is the
// address its proxy saw.
func TestForwardedForKeyClientCannotChooseKey(t *testing.T) {
	xff, fwd := forwardedKeys(t)
	rng := rand.New(rand.NewPCG(7, 11))
	n := 50_000
	if raceEnabled || testing.Short() {
		n = 5_000
	}
	for range n {
		forwardedCase{
			xff:     rng.IntN(2) == 0,
			client:  randomClientLines(rng),
			real:    randomClientAddr(rng),
			port:    rng.IntN(2) == 0,
			extra:   rng.IntN(3),
			newLine: uint8(rng.IntN(8)),
			params:  rng.IntN(2) == 0,
		}.check(t, xff, fwd)
	}
}

func forwardedKeys(t testing.TB) (xff, fwd bw.KeyFunc) {
	var err error
	if xff, err = bw.ForwardedForKey("X-Forwarded-For", trustedPrefix); err != nil {
		t.Fatal(err)
	}
	if fwd, err = bw.ForwardedForKey("Forwarded", trustedPrefix); err != nil {
		t.Fatal(err)
	}
	return xff, fwd
}

// FuzzForwardedForKey: the property of
// TestForwardedForKeyClientCannotChooseKey over client lines the fuzzer
// chooses. client holds the client's lines separated by "\n".
func FuzzForwardedForKey(f *testing.F) {
	f.Add(`for=1.1.1.1;x="`, false, uint16(0), uint8(0), uint8(0))
	f.Add(`for=1.1.1.1;x="a\`, false, uint16(7), uint8(1), uint8(2))
	f.Add("for=1.1.1.1\nfor=\"", false, uint16(300), uint8(2), uint8(1))
	f.Add(`1.1.1.1, 10.0.0.9`, true, uint16(0), uint8(0), uint8(0))
	f.Add(`for="[2001:db8::1]:443";by=_hidden, for=unknown`, false, uint16(4711), uint8(1), uint8(0))
	f.Add("::ffff:10.0.0.9, fe80::1%eth0", true, uint16(1), uint8(0), uint8(3))
	xff, fwd := forwardedKeys(f)
	f.Fuzz(func(t *testing.T, client string, isXFF bool, addr uint16, extra, flags uint8) {
		var lines []string
		if client != "" {
			lines = strings.Split(client, "\n")
		}
		a := netip.AddrFrom4([4]byte{203, 0, 113, byte(addr)})
		if addr&0x100 != 0 {
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(addr >> 9), 15: byte(addr)})
		}
		forwardedCase{
			xff:     isXFF,
			client:  lines,
			real:    netip.AddrPortFrom(a, 1+addr),
			port:    flags&1 != 0,
			params:  flags&2 != 0,
			extra:   int(extra % 4),
			newLine: flags >> 2,
		}.check(t, xff, fwd)
	})
}
