package breakwater

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/breakwater-go/breakwater/internal/forwarded"
	"github.com/go-chi/chi/v5"
)

// KeyFunc names what a request is counted under. Outbound, it is the
// upstream the request goes to: breakers, retry budgets, limits and pause
// gates are kept per key ([HostKey] by default). Inbound, it is the client
// a rate limit counts ([RemoteAddrKey], [ForwardedForKey], [HeaderKey]) or
// the route a route breaker guards ([RouteKey]).
//
// Keys are compared as strings. The key functions of this package never
// return a key that grows with attacker-chosen input, except [HeaderKey],
// whose values the client chooses; every registry bounds the keys it keeps
// (see [WithKeyLimits]) without refusing a key for lack of room. Those that
// take configuration data ([ForwardedForKey]'s proxy list, typically read
// from a flag or the environment) return an error; those whose argument is
// a literal in the program ([HeaderKey]) panic on a malformed one, like
// regexp.MustCompile.
type KeyFunc func(*http.Request) string

// HostKey is the default [KeyFunc]: the request URL's host[:port] for https
// and scheme://host[:port] for every other scheme, so plain and TLS traffic
// to one host never share state. It does not allocate for https.
func HostKey(req *http.Request) string {
	if req.URL.Scheme == "https" {
		return req.URL.Host
	}
	return req.URL.Scheme + "://" + req.URL.Host
}

// RemoteAddrKey keys a request by its immediate peer, the host part of
// [http.Request.RemoteAddr]: an IPv4 address as is, an IPv6 address
// collapsed to its /64 prefix (one subscriber usually holds a whole /64, so
// per-address keys would let one client use 2^64 keys), an IPv4-mapped IPv6
// address as the IPv4 address. A RemoteAddr that is not an IP address
// (a Unix socket, an in-memory pipe) is the key as is. It does not
// allocate for IPv4 peers.
//
// Clients seen through a NAT64 translator share a key: the translator's
// IPv4 address when it sits in front of an IPv4 server, and the one /64 of
// its prefix (64:ff9b::/96, or the network's own) when an IPv6 server
// sees IPv4 clients embedded in it. Key such deployments with a
// [KeyFunc] of your own, for example by an API key ([HeaderKey]).
//
// Behind a reverse proxy every request comes from the proxy; use
// [ForwardedForKey] there.
func RemoteAddrKey(r *http.Request) string {
	return remoteKey(r.RemoteAddr)
}

func remoteKey(remote string) string {
	// The usual RemoteAddr, IPv4 with a port, in one pass: an address
	// followed by nothing, or by a colon and no other (what forwarded.SplitHost
	// strips).
	if n := ipv4Len(remote); n == len(remote) {
		return remote
	} else if n > 0 && remote[n] == ':' {
		i := n + 1 // a port is a few bytes: a loop costs less than a call
		for i < len(remote) && remote[i] != ':' {
			i++
		}
		if i == len(remote) {
			return remote[:n]
		}
	}
	host := forwarded.SplitHost(remote)
	if isIPv4(host) {
		return host // the canonical form, the only one ParseAddr accepts
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return remote
	}
	if ip.Is4() {
		return host // ParseAddr accepts only the canonical IPv4 form
	}
	return ipKey(ip)
}

// isIPv4 reports whether s is an IPv4 address as [netip.ParseAddr]
// accepts one: four decimal fields of 0 to 255, without leading zeros,
// separated by dots. It is ParseAddr's answer for IPv4 without building
// the address.
func isIPv4(s string) bool { return ipv4Len(s) == len(s) }

// ipv4Len is the length of the IPv4 address (as isIPv4 accepts one) that
// s starts with and that ends s or is followed by a byte other than a
// digit or a dot, or -1 if there is none.
func ipv4Len(s string) int {
	i := 0
	for field := range 4 { // a field at a time, its digits unrolled
		if field > 0 {
			if i == len(s) || s[i] != '.' {
				return -1
			}
			i++
		}
		if i == len(s) || s[i]-'0' > 9 { // bytes below '0' wrap round
			return -1
		}
		d0 := s[i] - '0'
		i++
		if i == len(s) || s[i]-'0' > 9 {
			continue
		}
		if d0 == 0 {
			return -1 // a leading zero
		}
		d1 := s[i] - '0'
		i++
		if i == len(s) || s[i]-'0' > 9 {
			continue
		}
		v := int(d0)*100 + int(d1)*10 + int(s[i]-'0')
		i++
		if v > 255 || i < len(s) && s[i]-'0' <= 9 {
			return -1
		}
	}
	if i < len(s) && s[i] == '.' {
		return -1
	}
	return i
}

// ipKey renders ip as a key: IPv4 as is, IPv6 as its /64 prefix.
func ipKey(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// ForwardedForKey returns a [KeyFunc] that keys a request by its client's
// address, read from header when, and only when, the immediate peer
// (RemoteAddr) is a trusted proxy. Addresses are keyed like
// [RemoteAddrKey] (IPv6 by /64).
//
// header is "Forwarded" (RFC 7239: the for= parameters) or a header
// holding a comma-separated list of addresses in X-Forwarded-For's syntax
// ("X-Forwarded-For", or a single-address header such as "X-Real-IP");
// multiple header lines form one list. Name the header your proxies
// write: a header they pass through untouched is the client's to forge.
//
// trustedProxies are CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or
// single addresses ("192.0.2.7"); at least one is required, and a
// malformed one is an error.
//
// The list is walked from the right, the entry the nearest proxy appended,
// skipping entries inside trusted prefixes; the first untrusted address is
// the client. Entries left of it are the client's own and are never read,
// so a client cannot choose its key by sending the header itself. When
// every entry is trusted, the leftmost is the client. When the peer is not
// trusted, the header is absent, or the entry to use is not an address
// ("unknown", an obfuscated identifier, garbage), the peer is the key.
//
// Forwarded lines are parsed from their end, element by element, so the
// element a proxy appended to a line the client started (RFC 7239 §4
// allows it) is always read whole, whatever the client wrote before it: an
// unterminated quoted string cannot swallow it. An element that does not
// parse (a stray quote, a bare token, for= given twice) is garbage: if the
// walk reaches it, the peer is the key.
func ForwardedForKey(header string, trustedProxies ...string) (KeyFunc, error) {
	var errs []error
	if !validHeaderName(header) {
		errs = append(errs, fmt.Errorf("breakwater: ForwardedForKey: invalid header name %q", header))
	}
	if len(trustedProxies) == 0 {
		errs = append(errs, errors.New("breakwater: ForwardedForKey needs at least one trusted proxy prefix"))
	}
	prefixes := make([]netip.Prefix, 0, len(trustedProxies))
	for _, s := range trustedProxies {
		p, err := parseTrusted(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("breakwater: ForwardedForKey: trusted proxy %q: %w", s, err))
			continue
		}
		prefixes = append(prefixes, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	fk := &forwardedKey{header: http.CanonicalHeaderKey(header), trusted: prefixes}
	fk.rfc7239 = fk.header == "Forwarded"
	return fk.key, nil
}

func parseTrusted(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
	} else {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		if ip.Zone() != "" {
			return p, errors.New("zones are not allowed")
		}
		p = netip.PrefixFrom(ip, ip.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96) // addresses are matched unmapped
	}
	return p.Masked(), nil
}

type forwardedKey struct {
	header  string
	rfc7239 bool
	trusted []netip.Prefix
}

func (fk *forwardedKey) isTrusted(ip netip.Addr) bool { return trusted(fk.trusted, ip) }

// trusted reports whether ip is inside one of prefixes.
func trusted(prefixes []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (fk *forwardedKey) key(r *http.Request) string {
	peer, err := netip.ParseAddr(forwarded.SplitHost(r.RemoteAddr))
	if err != nil || !fk.isTrusted(peer) {
		return remoteKey(r.RemoteAddr)
	}
	lines := r.Header[fk.header]
	if len(lines) == 0 {
		return remoteKey(r.RemoteAddr)
	}
	var (
		client     netip.Addr
		clientHost string
		found      bool
		bad        bool
	)
	visit := func(entry string) bool { // reports whether to go on left
		ip, host, ok := forwarded.ParseAddr(entry)
		if !ok {
			bad = true
			return false
		}
		client, clientHost, found = ip, host, true
		return fk.isTrusted(ip)
	}
	if fk.rfc7239 {
		if !forwarded.WalkForwarded(lines, visit) {
			bad = true
		}
	} else {
		forwarded.WalkXFF(lines, visit)
	}
	if bad || !found {
		return remoteKey(r.RemoteAddr)
	}
	if client.Is4() {
		return clientHost // canonical, as ParseAddr accepted it
	}
	return ipKey(client)
}

// HeaderKey returns a [KeyFunc] that keys a request by the first value of
// the named header (an API key, a tenant ID), or "" when the header is
// absent; a KeyFunc of your own can fall back to [RemoteAddrKey].
// Header values are chosen by the client: use it behind authentication,
// or accept that a client can spread its requests over many keys.
//
// HeaderKey panics if name is not a valid header field name.
func HeaderKey(name string) KeyFunc {
	if !validHeaderName(name) {
		panic(fmt.Sprintf("breakwater: HeaderKey: invalid header name %q", name))
	}
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) string {
		if v := r.Header[canon]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// RouteKey keys a request by the pattern of the route it matches, never by
// its raw path, so keys stay as few as the routes.
//
// Under chi it is the full chi route pattern ("/api/users/{id}") wherever
// the middleware is mounted: after routing (r.With, an endpoint) it reads
// the route context; before routing (r.Use on the root router or on a
// sub-router) it looks the pattern up in the router's tree without running
// any handler. A request that matches no route has the key "".
//
// Without chi it is [http.Request.Pattern], which [http.ServeMux] sets
// before calling the handler it matched: wrap the handlers you register on
// a ServeMux (mux.Handle("GET /x", mw(h))), or, to wrap the whole mux,
// give the middleware a [WithKeyFunc] that asks the mux first:
//
//	func(r *http.Request) string { _, p := mux.Handler(r); return p }
func RouteKey(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		return chiRoute(rctx, r)
	}
	return r.Pattern
}

// chiScratch holds routing contexts for looking patterns up ahead of
// routing.
var chiScratch = sync.Pool{New: func() any { return chi.NewRouteContext() }}

func chiRoute(rctx *chi.Context, r *http.Request) string {
	if n := len(rctx.RoutePatterns); n > 0 && !strings.HasSuffix(rctx.RoutePatterns[n-1], "/*") {
		return rctx.RoutePattern() // routing is over: an endpoint matched
	}
	if rctx.Routes == nil {
		return ""
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if len(rctx.RoutePatterns) == 0 && rctx.RoutePath != "" {
		path = rctx.RoutePath // set by a middleware ahead of the root router
	}
	if path == "" {
		path = "/"
	}
	x := chiScratch.Get().(*chi.Context)
	x.Reset()
	p := rctx.Routes.Find(x, r.Method, path)
	x.Reset()
	chiScratch.Put(x)
	return p
}

// validHeaderName reports whether s is a header field name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !forwarded.IsTokenChar(s[i]) {
			return false
		}
	}
	return true
}
