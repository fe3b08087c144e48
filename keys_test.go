package breakwater_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

func reqFrom(remote string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

func TestRemoteAddrKey(t *testing.T) {
	for _, tc := range []struct{ name, remote, want string }{
		{"ipv4 with port", "192.0.2.7:5123", "192.0.2.7"},
		{"ipv4 without port", "192.0.2.7", "192.0.2.7"},
		{"ipv6 collapsed to /64", "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::/64"},
		{"ipv6 same /64", "[2001:db8:1:2::1]:80", "2001:db8:1:2::/64"},
		{"ipv6 other /64", "[2001:db8:1:3::1]:80", "2001:db8:1:3::/64"},
		{"ipv6 without port", "2001:db8:1:2::9", "2001:db8:1:2::/64"},
		{"ipv6 zone dropped", "[fe80::1%eth0]:80", "fe80::/64"},
		{"ipv4-mapped ipv6", "[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"not an address", "@", "@"},
		{"pipe", "pipe", "pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bw.RemoteAddrKey(reqFrom(tc.remote)); got != tc.want {
				t.Fatalf("RemoteAddrKey(%q) = %q, want %q", tc.remote, got, tc.want)
			}
		})
	}
}

func TestIPv4KeysDoNotAllocate(t *testing.T) {
	r := reqFrom("192.0.2.7:5123")
	if n := testing.AllocsPerRun(100, func() { bw.RemoteAddrKey(r) }); n != 0 {
		t.Errorf("RemoteAddrKey allocates %v times for IPv4", n)
	}
	xff, _ := bw.ForwardedForKey("X-Forwarded-For", "10.0.0.0/8")
	fwd, _ := bw.ForwardedForKey("Forwarded", "10.0.0.0/8")
	rx := reqFrom("10.1.1.1:1", "X-Forwarded-For", "198.51.100.1, 10.2.2.2")
	rf := reqFrom("10.1.1.1:1", "Forwarded", "for=198.51.100.1, for=10.2.2.2")
	if n := testing.AllocsPerRun(100, func() { xff(rx) }); n != 0 {
		t.Errorf("ForwardedForKey(X-Forwarded-For) allocates %v times for IPv4", n)
	}
	if n := testing.AllocsPerRun(100, func() { fwd(rf) }); n != 0 {
		t.Errorf("ForwardedForKey(Forwarded) allocates %v times for IPv4", n)
	}
}

func TestForwardedForKey(t *testing.T) {
	xff, err := bw.ForwardedForKey("X-Forwarded-For", "10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := bw.ForwardedForKey("forwarded", "10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		key    bw.KeyFunc
		remote string
		header []string
		want   string
	}{
		{"untrusted peer: spoofed header ignored", xff, "203.0.113.9:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.9"},
		{"trusted peer: header honoured", xff, "10.1.2.3:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"trusted single address", xff, "192.0.2.1:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"trusted peer, no header", xff, "10.1.2.3:1000", nil, "10.1.2.3"},
		{"client-sent entries left of the client are ignored", xff, "10.1.2.3:1000",
			[]string{"X-Forwarded-For", "1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped from the right", xff, "10.1.2.3:1000",
			[]string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.9.9.9 , 10.8.8.8"}, "198.51.100.1"},
		{"several header lines form one list", xff, "10.1.2.3:1000",
			[]string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1", "X-Forwarded-For", "10.9.9.9"}, "198.51.100.1"},
		{"all trusted: leftmost", xff, "10.1.2.3:1000", []string{"X-Forwarded-For", "10.7.7.7, 10.9.9.9"}, "10.7.7.7"},
		{"garbage where the client should be: peer", xff, "10.1.2.3:1000", []string{"X-Forwarded-For", "1.1.1.1, nonsense"}, "10.1.2.3"},
		{"entries with ports", xff, "10.1.2.3:1000", []string{"X-Forwarded-For", "198.51.100.1:4711"}, "198.51.100.1"},
		{"ipv6 client by /64", xff, "10.1.2.3:1000", []string{"X-Forwarded-For", "2001:db8:5:6::1"}, "2001:db8:5:6::/64"},
		{"ipv6 trusted proxy peer", xff, "[2001:db8:ffff:1::2]:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"ipv4-mapped peer matches ipv4 prefix", xff, "[::ffff:10.1.2.3]:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"other header not read", xff, "10.1.2.3:1000", []string{"Forwarded", "for=198.51.100.1"}, "10.1.2.3"},

		{"forwarded: untrusted peer", fwd, "203.0.113.9:1000", []string{"Forwarded", "for=198.51.100.1"}, "203.0.113.9"},
		{"forwarded: trusted peer", fwd, "10.0.0.1:1000", []string{"Forwarded", "for=198.51.100.1;proto=https;by=10.0.0.1"}, "198.51.100.1"},
		{"forwarded: quoted ipv6 with port", fwd, "10.0.0.1:1000", []string{"Forwarded", `for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::/64"},
		{"forwarded: walk from the right", fwd, "10.0.0.1:1000",
			[]string{"Forwarded", `for=6.6.6.6, for=198.51.100.1;host="a,b", For=10.2.2.2`}, "198.51.100.1"},
		{"forwarded: element without for stops the walk", fwd, "10.0.0.1:1000",
			[]string{"Forwarded", "for=6.6.6.6, proto=https"}, "10.0.0.1"},
		{"forwarded: unknown", fwd, "10.0.0.1:1000", []string{"Forwarded", "for=unknown"}, "10.0.0.1"},
		{"forwarded: obfuscated", fwd, "10.0.0.1:1000", []string{"Forwarded", "for=_hidden"}, "10.0.0.1"},
		{"forwarded: empty elements skipped", fwd, "10.0.0.1:1000", []string{"Forwarded", "for=198.51.100.1, , "}, "198.51.100.1"},
		{"forwarded: X-Forwarded-For not read", fwd, "10.0.0.1:1000", []string{"X-Forwarded-For", "198.51.100.1"}, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.key(reqFrom(tc.remote, tc.header...)); got != tc.want {
				t.Fatalf("key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestForwardedForKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  string
		proxies []string
		want    []string
	}{
		{"no proxies", "X-Forwarded-For", nil, []string{"at least one trusted proxy"}},
		{"bad cidr", "X-Forwarded-For", []string{"10.0.0.0/8", "10.0.0.0/33", "nope"}, []string{`"10.0.0.0/33"`, `"nope"`}},
		{"zone", "X-Forwarded-For", []string{"fe80::1%eth0"}, []string{"zones"}},
		{"bad header", "X Forwarded", []string{"10.0.0.0/8"}, []string{"invalid header name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := bw.ForwardedForKey(tc.header, tc.proxies...)
			if err == nil || fn != nil {
				t.Fatalf("ForwardedForKey(%q, %q) = %v, %v; want an error", tc.header, tc.proxies, fn != nil, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestHeaderKeyAndComposition(t *testing.T) {
	api := bw.HeaderKey("x-api-key")
	r := reqFrom("192.0.2.7:1", "X-Api-Key", "k1")
	anon := reqFrom("192.0.2.7:1")
	if got := api(r); got != "k1" {
		t.Fatalf("HeaderKey = %q", got)
	}
	if got := api(anon); got != "" {
		t.Fatalf("HeaderKey without the header = %q", got)
	}
	for name, f := range map[string]func(){
		"HeaderKey empty":   func() { bw.HeaderKey("") },
		"HeaderKey invalid": func() { bw.HeaderKey("a b") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// routeSeen records RouteKey as each middleware layer sees it.
type routeSeen map[string]string

func (s routeSeen) mw(layer string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s[layer+" "+r.URL.Path] = bw.RouteKey(r)
			next.ServeHTTP(w, r)
		})
	}
}

func TestRouteKeyChi(t *testing.T) {
	seen := routeSeen{}
	ok := func(w http.ResponseWriter, r *http.Request) {}
	r := chi.NewRouter()
	r.Use(seen.mw("root"))
	r.With(seen.mw("with")).Get("/users/{id}", ok)
	r.Group(func(r chi.Router) {
		r.Use(seen.mw("group"))
		r.Get("/items/{id}", ok)
	})
	r.Route("/api", func(r chi.Router) {
		r.Use(seen.mw("sub"))
		r.Get("/orders/{id}", ok)
		r.Route("/v2", func(r chi.Router) {
			r.Use(seen.mw("subsub"))
			r.Get("/*", ok)
		})
	})
	for _, p := range []string{"/users/7", "/items/9", "/api/orders/3", "/api/v2/x/y", "/nowhere"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	want := routeSeen{
		"root /users/7":      "/users/{id}",
		"with /users/7":      "/users/{id}",
		"root /items/9":      "/items/{id}",
		"group /items/9":     "/items/{id}",
		"root /api/orders/3": "/api/orders/{id}",
		"sub /api/orders/3":  "/api/orders/{id}",
		"root /api/v2/x/y":   "/api/v2/*",
		"sub /api/v2/x/y":    "/api/v2/*",
		"subsub /api/v2/x/y": "/api/v2/*",
		"root /nowhere":      "",
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("%s: RouteKey = %q, want %q", k, seen[k], v)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("seen %v", seen)
	}
}

func TestRouteKeyServeMux(t *testing.T) {
	seen := routeSeen{}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", seen.mw("handler")(http.NotFoundHandler()))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r) // the key of a middleware outside the mux
		seen["outer "+r.URL.Path] = pattern
		seen["outer-plain "+r.URL.Path] = bw.RouteKey(r)
		mux.ServeHTTP(w, r)
	})
	outer.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/items/4", nil))
	outer.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/else", nil))
	want := routeSeen{
		"handler /items/4":     "GET /items/{id}",
		"outer /items/4":       "GET /items/{id}",
		"outer-plain /items/4": "",
		"outer /else":          "",
		"outer-plain /else":    "",
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("%s: key = %q, want %q", k, seen[k], v)
		}
	}
}
