package status

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hostAllowed reports whether a control request's Host is one the page
// accepts: a loopback name or address, the local address of the
// request's connection, or one of WithAllowedHosts.
//
// A browser sends the Host of the URL it was told to load, so a page that
// a DNS-rebinding attack serves from the attacker's name (resolving, later,
// to the admin listener) sends that name: same-origin for the browser, so
// Sec-Fetch-Site and Origin cannot tell it apart, but never a loopback
// name (browsers resolve "localhost" and names under ".localhost"
// themselves, RFC 6761; no public DNS serves them), never an IP address
// (an IP literal is not rebound), and never a name the operator listed.
// Of IP addresses, only the loopback ones and the connection's own local
// address are accepted unlisted: another one (a NAT's public address)
// reaches the page only through something the operator set up, and is
// listed with WithAllowedHosts as a name is.
func (p *Page) hostAllowed(r *http.Request) bool {
	name := requestHost(r.Host)
	if name == "" {
		return false
	}
	ip, err := netip.ParseAddr(name)
	if err != nil {
		return name == "localhost" || strings.HasSuffix(name, ".localhost") || p.cfg.hosts[name]
	}
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || p.cfg.hosts[ip.String()] {
		return true
	}
	local, ok := localAddr(r)
	return ok && local == ip
}

// requestHost is the host of a Host header without its port or brackets,
// lower-cased and without a final dot; "" when there is none.
func requestHost(host string) string {
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return ""
		}
		host = host[1:end]
	} else if strings.Count(host, ":") == 1 {
		host, _, _ = strings.Cut(host, ":")
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// localAddr is the IP address the request's connection arrived on, when
// the server recorded it.
func localAddr(r *http.Request) (netip.Addr, bool) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return netip.Addr{}, false
	}
	if t, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(t.IP)
		return ip.Unmap().WithZone(""), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// allowedHost checks and normalises one WithAllowedHosts entry: a host
// name or an IP address, without a port.
func allowedHost(h string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if strings.HasPrefix(n, "[") && strings.HasSuffix(n, "]") {
		n = n[1 : len(n)-1]
	}
	if ip, err := netip.ParseAddr(n); err == nil {
		return ip.Unmap().WithZone("").String(), nil
	}
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("status: allowed host %q is not a host name or an IP address", h)
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return "", fmt.Errorf("status: allowed host %q is not a host name or an IP address (without a port, no wildcard)", h)
		}
	}
	return n, nil
}
