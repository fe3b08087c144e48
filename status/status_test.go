package status_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/status"
)

// registry is a source made of bare registries, as a custom component
// would offer them.
type registry struct {
	bs    *bw.Breakers
	gates *bw.PauseGates
}

func (r registry) Snapshot() bw.Snapshot {
	return bw.Snapshot{At: time.Now(), Breakers: r.bs.Snapshot().Breakers, Pauses: r.gates.Snapshot().Pauses}
}
func (r registry) Breakers() *bw.Breakers     { return r.bs }
func (r registry) PauseGates() *bw.PauseGates { return r.gates }

func newRegistry(t testing.TB, keys int) registry {
	t.Helper()
	bs, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(5)))
	if err != nil {
		t.Fatal(err)
	}
	gates, err := bw.NewPauseGates()
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		bs.Get(fmt.Sprintf("host-%05d", i))
	}
	return registry{bs, gates}
}

func newPage(t testing.TB, opts ...status.Option) http.Handler {
	t.Helper()
	p, err := status.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t testing.TB, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

// stateOf is the part of the state JSON these tests read.
type stateOf struct {
	Controls bool `json:"controls"`
	Limit    int  `json:"limit"`
	Sources  []struct {
		Name     string `json:"name"`
		Explain  string `json:"explain"`
		CanTrip  bool   `json:"can_trip"`
		Breakers struct {
			Total, Matched, Offset int
			Counts                 map[string]int
			Rows                   []struct {
				Key   string `json:"key"`
				State string `json:"state"`
			}
		} `json:"breakers"`
		Pauses struct {
			Total int
			Rows  []struct {
				Key    string `json:"key"`
				Paused bool   `json:"paused"`
			}
		} `json:"pauses"`
	} `json:"sources"`
}

func readState(t testing.TB, h http.Handler, target string) (stateOf, int) {
	t.Helper()
	w := get(t, h, target)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", target, ct)
	}
	var s stateOf
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	return s, w.Body.Len()
}

// The page, its script and its style come from the handler itself and
// refer to nothing outside it.
func TestPageIsSelfContained(t *testing.T) {
	h := newPage(t)
	external := regexp.MustCompile(`(?i)(src|href|url)\s*[=(]\s*["']?\s*(https?:)?//|@import|https?://`)
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/app.css": "text/css"} {
		w := get(t, h, path)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) {
			t.Fatalf("GET %s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
		if m := external.FindString(w.Body.String()); m != "" {
			t.Errorf("%s refers to something outside the page: %q", path, m)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	if w := get(t, h, "/nothing"); w.Code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d", w.Code)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/state", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /state: %d", w.Code)
	}
}

// Mounted under a prefix without its slash, the page redirects to the
// slashed path its relative links need.
func TestPageUnderPrefix(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/debug/breakwater/", http.StripPrefix("/debug/breakwater", newPage(t)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(srv.URL + "/debug/breakwater")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// ServeMux itself redirects the unslashed path of a subtree.
	if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/debug/breakwater/" {
		t.Fatalf("%d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Mounted on the prefix itself, the page redirects by itself.
	mux2 := http.NewServeMux()
	mux2.Handle("/admin", http.StripPrefix("/admin", newPage(t)))
	w := get(t, mux2, "/admin?x=1")
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/admin/?x=1" {
		t.Fatalf("%d to %q", w.Code, w.Header().Get("Location"))
	}
	for _, path := range []string{"/debug/breakwater/", "/debug/breakwater/state", "/debug/breakwater/app.js"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}

func TestStateOfATransport(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithPolicy(bw.Consecutive(3)))
	if err != nil {
		t.Fatal(err)
	}
	tr.Breakers().Get("api.example:443")
	tr.Breakers().Get("pay.example:443").Trip(time.Minute)
	h := newPage(t, status.Source("outbound", tr), status.WithTitle("shop"))
	s, _ := readState(t, h, "/state")
	if len(s.Sources) != 1 || s.Sources[0].Name != "outbound" {
		t.Fatalf("sources %+v", s.Sources)
	}
	src := s.Sources[0]
	if !strings.Contains(src.Explain, "consecutive") {
		t.Errorf("explain %q does not state the policy", src.Explain)
	}
	if src.Breakers.Total != 2 || src.Breakers.Rows[0].Key != "pay.example:443" || src.Breakers.Rows[0].State != "open" {
		t.Errorf("breakers %+v: want the open one first", src.Breakers)
	}
	if src.Breakers.Counts["open"] != 1 || !src.CanTrip || s.Controls {
		t.Errorf("counts %v, can trip %v, controls %v", src.Breakers.Counts, src.CanTrip, s.Controls)
	}
}

// With 10,000 keys the state holds one page of them, the ones in trouble
// first, and pages through the rest.
func TestStateIsBounded(t *testing.T) {
	reg := newRegistry(t, 10_000)
	reg.bs.Get("host-07777").Trip(time.Minute)
	for range 3 {
		reg.bs.Get("host-04242").RecordFailure(bw.ServerError)
	}
	h := newPage(t, status.Source("many", reg))
	s, size := readState(t, h, "/state")
	b := s.Sources[0].Breakers
	if b.Total != 10_000 || len(b.Rows) != status.DefaultRows || s.Limit != status.DefaultRows {
		t.Fatalf("total %d, rows %d, limit %d", b.Total, len(b.Rows), s.Limit)
	}
	if b.Rows[0].Key != "host-07777" || b.Rows[1].Key != "host-04242" || b.Rows[2].Key != "host-00000" {
		t.Errorf("first rows %v", b.Rows[:3])
	}
	if size > 32<<10 {
		t.Errorf("state of 10,000 keys is %d bytes", size)
	}
	s, _ = readState(t, h, "/state?o=0.breakers.9990&limit=1000")
	if b := s.Sources[0].Breakers; b.Offset != 9500 || len(b.Rows) != status.MaxRows || b.Rows[len(b.Rows)-1].Key != "host-09999" {
		t.Errorf("last page: offset %d, %d rows", b.Offset, len(b.Rows))
	}
	s, _ = readState(t, h, "/state?q=host-0999")
	if b := s.Sources[0].Breakers; b.Matched != 10 || len(b.Rows) != 10 || b.Total != 10_000 {
		t.Errorf("filtered: matched %d, rows %d, total %d", b.Matched, len(b.Rows), b.Total)
	}
	s, _ = readState(t, h, "/state?source=none")
	if len(s.Sources) != 0 {
		t.Errorf("source=none: %d sources", len(s.Sources))
	}
}

func control(h http.Handler, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "http://admin.test/control", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(status.ControlHeader, "1")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestControlsAreOffByDefault(t *testing.T) {
	reg := newRegistry(t, 1)
	h := newPage(t, status.Source("r", reg))
	if w := control(h, `{"source":"r","action":"trip","key":"host-00000"}`, nil); w.Code != http.StatusNotFound {
		t.Fatalf("control without WithControls: %d", w.Code)
	}
	if reg.bs.Get("host-00000").State() != bw.StateClosed {
		t.Fatal("the breaker was tripped")
	}
}

func TestControls(t *testing.T) {
	reg := newRegistry(t, 1)
	const key = "host-00000"
	h := newPage(t, status.Source("r", reg), status.WithControls(), status.WithAllowedHosts("admin.test"))
	trip := `{"source":"r","action":"trip","key":"` + key + `"}`
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		code   int
	}{
		{"no custom header", trip, map[string]string{status.ControlHeader: ""}, http.StatusForbidden},
		{"a form's content type", trip, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"text/plain", trip, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"another site (fetch metadata)", trip, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"another site (origin)", trip, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"unknown source", `{"source":"x","action":"trip","key":"k"}`, nil, http.StatusBadRequest},
		{"unknown key", `{"source":"r","action":"trip","key":"nope"}`, nil, http.StatusBadRequest},
		{"unknown action", `{"source":"r","action":"melt","key":"` + key + `"}`, nil, http.StatusBadRequest},
		{"unknown field", `{"source":"r","action":"trip","key":"` + key + `","for":"1h"}`, nil, http.StatusBadRequest},
		{"a second object after it", trip + `{"source":"r","action":"reset","key":"` + key + `"}`, nil, http.StatusBadRequest},
		{"garbage after it", trip + ` x`, nil, http.StatusBadRequest},
		{"a host the page was not mounted for", trip, map[string]string{"Host": "evil.example"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := control(h, tc.body, tc.header); w.Code != tc.code {
				t.Fatalf("%d %s, want %d", w.Code, strings.TrimSpace(w.Body.String()), tc.code)
			}
			if reg.bs.Get(key).State() != bw.StateClosed {
				t.Fatal("a refused control tripped the breaker")
			}
		})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/control", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /control: %d", w.Code)
	}

	if w := control(h, trip+"\n", map[string]string{"Sec-Fetch-Site": "same-origin"}); w.Code != http.StatusOK {
		t.Fatalf("trip: %d %s", w.Code, w.Body)
	}
	if reg.bs.Get(key).State() != bw.StateOpen {
		t.Fatal("trip did not open the breaker")
	}
	if w := control(h, `{"source":"r","action":"reset","key":"`+key+`"}`, map[string]string{"Origin": "http://admin.test"}); w.Code != http.StatusOK {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if reg.bs.Get(key).State() != bw.StateClosed {
		t.Fatal("reset did not close the breaker")
	}
	reg.gates.Pause(key, time.Minute)
	if w := control(h, `{"source":"r","action":"resume","key":"`+key+`"}`, nil); w.Code != http.StatusOK {
		t.Fatalf("resume: %d %s", w.Code, w.Body)
	}
	if paused(reg.gates, key) {
		t.Fatal("resume did not end the pause")
	}
}

// paused reports whether g holds a pause for key.
func paused(g *bw.PauseGates, key string) bool {
	for _, p := range g.Snapshot().Pauses {
		if p.Key == key && p.Paused {
			return true
		}
	}
	return false
}

func TestNewReportsEveryError(t *testing.T) {
	reg := newRegistry(t, 0)
	_, err := status.New(status.Source("", reg), status.Source("a", nil), status.Source("b", reg), status.Source("b", reg), status.WithRefresh(time.Millisecond))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"needs a name", `"a" is nil`, `two sources named "b"`, "refresh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// BenchmarkState10k measures one poll of a page over 10,000 breakers.
func BenchmarkState10k(b *testing.B) {
	reg := newRegistry(b, 10_000)
	reg.bs.Get("host-07777").Trip(time.Minute)
	h := newPage(b, status.Source("many", reg))
	req := httptest.NewRequest(http.MethodGet, "/state", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}

// staticSource is a source whose snapshot is fixed.
type staticSource bw.Snapshot

func (s staticSource) Snapshot() bw.Snapshot { return bw.Snapshot(s) }

// The state shows a paced key's learned rate and a half-open breaker's
// ramp, counts paced keys, and ranks them after the paused ones, slowest
// first; the script draws both.
func TestStateShowsLearnedRateAndRamp(t *testing.T) {
	src := staticSource{At: time.Now(),
		Breakers: []bw.BreakerSnapshot{{Key: "b.test", State: bw.StateHalfOpen, StateName: "half_open", ProbesInFlight: 1, ProbesAllowed: 2, ProbeSuccesses: 1}},
		Pauses: []bw.PauseSnapshot{
			{Key: "fast.test", Paced: true, PaceRate: 9.7, PacePhase: bw.PaceCeiling, PaceCeiling: 10},
			{Key: "idle.test"},
			{Key: "slow.test", Paced: true, PaceRate: 2, PacePhase: bw.PaceSlowStart},
			{Key: "held.test", Paused: true, Remaining: time.Second, RemainingSeconds: 1},
		},
	}
	h := newPage(t, status.Source("api", src))
	w := get(t, h, "/state")
	var st struct {
		Sources []struct {
			Breakers struct {
				Rows []struct {
					Key           string `json:"key"`
					ProbesAllowed int    `json:"probes_allowed"`
				}
			} `json:"breakers"`
			Pauses struct {
				Counts map[string]int
				Rows   []struct {
					Key       string  `json:"key"`
					Paced     bool    `json:"paced"`
					PaceRate  float64 `json:"pace_rate"`
					PacePhase string  `json:"pace_phase"`
				}
			} `json:"pauses"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Sources) != 1 {
		t.Fatalf("state %s", w.Body)
	}
	s := st.Sources[0]
	if len(s.Breakers.Rows) != 1 || s.Breakers.Rows[0].ProbesAllowed != 2 {
		t.Errorf("breakers %+v, want b.test allowing 2 probes", s.Breakers.Rows)
	}
	var keys []string
	for _, r := range s.Pauses.Rows {
		keys = append(keys, r.Key)
	}
	if got := strings.Join(keys, " "); got != "held.test slow.test fast.test idle.test" {
		t.Errorf("pauses ranked %q, want held.test slow.test fast.test idle.test", got)
	}
	if r := s.Pauses.Rows[2]; !r.Paced || r.PaceRate != 9.7 || r.PacePhase != "ceiling" {
		t.Errorf("fast.test %+v, want paced at 9.7/s at its ceiling", r)
	}
	if s.Pauses.Counts["paced"] != 2 || s.Pauses.Counts["paused"] != 1 {
		t.Errorf("pause counts %v, want 1 paused and 2 paced", s.Pauses.Counts)
	}
	js := get(t, h, "/app.js").Body.String()
	for _, field := range []string{"probes_allowed", "pace_rate", "pace_phase", "pace_ceiling"} {
		if !strings.Contains(js, field) {
			t.Errorf("the script does not draw %s", field)
		}
	}
}
