package status_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// A DNS-rebinding attack: the operator's browser opened a page of
// evil.example, whose name now resolves to the admin listener. Its fetch
// is same-origin for the browser, so it carries Sec-Fetch-Site:
// same-origin, its own Origin, the custom header and a JSON body; only
// its Host tells it apart. The page, served over loopback as the README
// and the package documentation mount it, refuses it.
func TestControlsRefuseDNSRebinding(t *testing.T) {
	reg := newRegistry(t, 1)
	const key = "host-00000"
	page := newPage(t, status.Source("r", reg), status.WithControls())
	srv := httptest.NewServer(page)
	defer srv.Close()
	post := func(host, origin, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/control", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-Breakwater-Control", "1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	trip := `{"source":"r","action":"trip","key":"` + key + `"}`
	if code, body := post("evil.example", "http://evil.example", trip); code != http.StatusForbidden {
		t.Fatalf("rebound control: %d %s, want 403", code, body)
	}
	if reg.bs.Get(key).State() != bw.StateClosed {
		t.Fatal("a rebound control tripped the breaker")
	}
	// The same request under the listener's own address, and under
	// localhost, is the operator's.
	listener := strings.TrimPrefix(srv.URL, "http://")
	if code, body := post("", srv.URL, trip); code != http.StatusOK {
		t.Fatalf("control under %s: %d %s", listener, code, body)
	}
	if reg.bs.Get(key).State() != bw.StateOpen {
		t.Fatal("the operator's trip did not open the breaker")
	}
	_, port, _ := net.SplitHostPort(listener)
	if code, body := post("localhost:"+port, "http://localhost:"+port, `{"source":"r","action":"reset","key":"`+key+`"}`); code != http.StatusOK {
		t.Fatalf("control under localhost: %d %s", code, body)
	}
	if reg.bs.Get(key).State() != bw.StateClosed {
		t.Fatal("the operator's reset did not close the breaker")
	}
}

func TestControlHosts(t *testing.T) {
	reg := newRegistry(t, 1)
	page := newPage(t, status.Source("r", reg), status.WithControls(), status.WithAllowedHosts("Admin.Internal.", "[2001:db8::1]", "192.0.2.7"))
	local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 6060}
	for host, want := range map[string]int{
		"localhost":                 http.StatusOK,
		"LOCALHOST.:6060":           http.StatusOK,
		"app.localhost:6060":        http.StatusOK,
		"127.0.0.2:1":               http.StatusOK,
		"[::1]:6060":                http.StatusOK,
		"[::ffff:127.0.0.1]":        http.StatusOK,
		"10.1.2.3:6060":             http.StatusOK, // the connection's local address
		"admin.internal:443":        http.StatusOK,
		"admin.internal.":           http.StatusOK,
		"[2001:db8:0::1]:6060":      http.StatusOK,
		"192.0.2.7":                 http.StatusOK,
		"10.1.2.4:6060":             http.StatusForbidden,
		"evil.example":              http.StatusForbidden,
		"localhost.evil.example":    http.StatusForbidden,
		"evil.example:6060":         http.StatusForbidden,
		"internal":                  http.StatusForbidden,
		"":                          http.StatusForbidden,
		"[::1":                      http.StatusForbidden,
		"sub.admin.internal":        http.StatusForbidden,
		"0.0.0.0:6060":              http.StatusForbidden,
		"admin.internal.evil.test":  http.StatusForbidden,
		"localhost@evil.example":    http.StatusForbidden,
		"evil.example#.localhost.x": http.StatusForbidden,
	} {
		t.Run(host, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "http://placeholder/control", strings.NewReader(`{"source":"r","action":"resume","key":"k"}`))
			req.Host = host
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(status.ControlHeader, "1")
			w := httptest.NewRecorder()
			page.ServeHTTP(w, req)
			if w.Code != want {
				t.Fatalf("Host %q: %d %s, want %d", host, w.Code, strings.TrimSpace(w.Body.String()), want)
			}
		})
	}
}

func TestAllowedHostsAreChecked(t *testing.T) {
	for _, h := range []string{"", "admin.internal:6060", "*.internal", "http://admin.internal", "a..b", "admin internal"} {
		if _, err := status.New(status.WithAllowedHosts(h)); err == nil || !strings.Contains(err.Error(), "allowed host") {
			t.Errorf("WithAllowedHosts(%q): %v", h, err)
		}
	}
}
