// Package status serves a live status page for breakwater. Its head says
// what is wrong now, worst first, over every key of every source: open
// breakers, half-open ones, pauses under way, spent retry budgets and
// full bulkheads, each in plain words (see the Trouble kinds), or
// "Nothing to report" when none is and no insight has a finding. Below
// it, per source, the tables of what the source holds: every breaker
// (its state, since when and why, its failures against the threshold or
// the count that opened it, the time left before it lets a probe
// through), every pause, token bucket and bulkhead, per key, refreshed
// while you look, with each configuration's Explain beside it and, for a
// Transport, the insights of [breakwater.WithInsights] below. A [Counts]
// source shows, per route and upstream, what a fleet of breakwater
// services told each other: requests shed by criticality (and for their
// caller's deadline), pushback sent and pushback honoured.
//
// The page is one self-contained HTML document with its script and style
// served by the same handler: nothing is loaded from anywhere else, so it
// works offline and behind the strictest egress rules. It polls its own
// JSON (the state endpoint), which is also there for scripts and curl.
//
// Mount it on an admin listener, never on the public one:
//
//	page, err := status.New(status.Source("payments", tr))
//	admin := http.NewServeMux()
//	admin.Handle("/debug/breakwater/", http.StripPrefix("/debug/breakwater", page))
//	go http.ListenAndServe("127.0.0.1:6060", admin)
//
// The page only reads unless [WithControls] is given; its controls (trip,
// reset, clear a pause) are POST requests that must carry a custom header
// and one JSON object, pass net/http's [http.CrossOriginProtection], and
// name in their Host header a host the page was mounted for, so another
// site open in the operator's browser cannot press them, not even by DNS
// rebinding (a name of the attacker's that resolves to the admin
// listener, which makes the attacker's page same-origin with it). The
// hosts accepted are loopback names and addresses, the address the
// request's connection arrived on, and those given to [WithAllowedHosts].
// The state is read with GET under any Host, as before: a rebinding page
// can read the keys it shows, but can press nothing.
//
// The controls do not authenticate anyone: put the admin listener behind
// your own authentication when more than trusted people can reach it.
//
// Output is bounded: the head lists at most [TroubleRows] keys and
// counts the rest; each table shows at most a page of rows (50 by
// default, 500 at most), ranked by trouble (open breakers first, then
// half-open ones, then the most failures; active pauses; limited buckets;
// saturated bulkheads), with counts of the rest, a filter and paging, so
// that a registry of 10,000 keys costs one page to render.
package status

import (
	"embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

//go:embed assets
var assets embed.FS

// DefaultRefresh is how often the page polls its state.
const DefaultRefresh = time.Second

// An Option configures [New].
type Option func(*config)

type config struct {
	title    string
	refresh  time.Duration
	controls bool
	hosts    map[string]bool // WithAllowedHosts, lower-cased, no port
	sources  []source
	errs     []error
}

type source struct {
	name    string
	snap    Snapshotter
	explain string
}

// A Snapshotter is a component the page shows: a [breakwater.Transport],
// or a registry the inbound middleware share ([breakwater.Breakers] of a
// RouteBreaker, [breakwater.RateLimiters] of a ClientRateLimit,
// [breakwater.Bulkheads] of a Shedder, [breakwater.PauseGates]).
type Snapshotter interface {
	Snapshot() breakwater.Snapshot
}

// Source adds a component to the page under name. A source with an
// Explain() string method (a Transport) has its explanation shown beside
// its state. Sources are shown in the order given; names must be unique
// and not empty.
func Source(name string, s Snapshotter) Option {
	return func(c *config) {
		switch {
		case name == "":
			c.errs = append(c.errs, errors.New("status: a source needs a name"))
		case s == nil:
			c.errs = append(c.errs, fmt.Errorf("status: source %q is nil", name))
		default:
			src := source{name: name, snap: s}
			if e, ok := s.(interface{ Explain() string }); ok {
				src.explain = e.Explain()
			}
			c.sources = append(c.sources, src)
		}
	}
}

// WithTitle sets the page's title. Default: "breakwater".
func WithTitle(title string) Option { return func(c *config) { c.title = title } }

// WithRefresh sets how often the page polls its state; at least 100 ms.
// Default: [DefaultRefresh].
func WithRefresh(d time.Duration) Option { return func(c *config) { c.refresh = d } }

// WithControls shows buttons that trip or reset a breaker and clear a
// pause, and accepts them on the control endpoint. Off by default. See the
// package documentation for how they are guarded.
func WithControls() Option { return func(c *config) { c.controls = true } }

// WithAllowedHosts adds host names or IP addresses (without a port; any
// port matches) under which the controls are accepted, for an admin
// listener reached by a name, or by an address other than the one its
// connections arrive on (through NAT or a proxy that keeps the Host).
// Without it the controls accept only a Host that is a loopback name
// ("localhost", a name under ".localhost") or address, or the local
// address of the request's connection. A control under any other Host is
// refused with 403: that is what a page on a DNS-rebound name sends.
// Names are matched without regard to case and to a final dot; "*" is
// not a wildcard. Only list names you own: a name the page accepts is one
// a rebinding attack could use if its owner were hostile.
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) {
		if c.hosts == nil {
			c.hosts = map[string]bool{}
		}
		for _, h := range hosts {
			n, err := allowedHost(h)
			if err != nil {
				c.errs = append(c.errs, err)
				continue
			}
			c.hosts[n] = true
		}
	}
}

// Page is the status page's [http.Handler]. It serves, relative to where it
// is mounted:
//
//	GET  /         the page
//	GET  /app.js   its script, /app.css its style
//	GET  /state    the state as JSON (query: source, q, offset, limit)
//	POST /control  a control, with WithControls only
//
// It is safe for concurrent use.
type Page struct {
	cfg     config
	control http.Handler
}

// New returns a status page for the given sources, or an error describing
// every invalid option.
func New(opts ...Option) (*Page, error) {
	c := config{title: "breakwater", refresh: DefaultRefresh}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.refresh < 100*time.Millisecond {
		c.errs = append(c.errs, fmt.Errorf("status: refresh must be at least 100ms, got %s", c.refresh))
	}
	seen := map[string]bool{}
	for _, s := range c.sources {
		if seen[s.name] {
			c.errs = append(c.errs, fmt.Errorf("status: two sources named %q", s.name))
		}
		seen[s.name] = true
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	p := &Page{cfg: c}
	p.control = http.NewCrossOriginProtection().Handler(http.HandlerFunc(p.serveControl))
	return p, nil
}

// securityHeaders are set on every response: the page loads nothing from
// elsewhere, cannot be framed, and sends no referrer.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// ServeHTTP serves the page, its assets, its state and its controls.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if r.URL.Path == "" {
		// Mounted with http.StripPrefix and asked for the prefix itself:
		// the page's relative links need the trailing slash.
		redirectSlash(w, r)
		return
	}
	switch path := strings.TrimPrefix(r.URL.Path, "/"); path {
	case "", "index.html":
		p.serveAsset(w, r, "assets/index.html", "text/html; charset=utf-8")
	case "app.js":
		p.serveAsset(w, r, "assets/app.js", "text/javascript; charset=utf-8")
	case "app.css":
		p.serveAsset(w, r, "assets/app.css", "text/css; charset=utf-8")
	case "state":
		if !readOnly(w, r) {
			return
		}
		p.serveState(w, r)
	case "control":
		if !p.cfg.controls {
			http.NotFound(w, r)
			return
		}
		p.control.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// redirectSlash sends the client to the requested path with a slash
// appended, the query kept.
func redirectSlash(w http.ResponseWriter, r *http.Request) {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || r.RequestURI == "" {
		http.NotFound(w, r)
		return
	}
	loc := "/" + strings.TrimLeft(u.EscapedPath(), "/") + "/" // never "//host"
	if u.RawQuery != "" {
		loc += "?" + u.RawQuery
	}
	http.Redirect(w, r, loc, http.StatusMovedPermanently)
}

// readOnly answers a method other than GET and HEAD with 405.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	return false
}

func (p *Page) serveAsset(w http.ResponseWriter, r *http.Request, name, contentType string) {
	if !readOnly(w, r) {
		return
	}
	b, err := assets.ReadFile(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
