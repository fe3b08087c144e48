package status

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/breakwater-go/breakwater"
)

// ControlHeader must be present, with the value "1", on every control
// request. A page on another site cannot send a custom header without a
// CORS preflight, which the status page never grants.
const ControlHeader = "X-Breakwater-Control"

// Control actions, the "action" of a control request.
const (
	ActionTrip   = "trip"   // force the key's breaker open for its open timeout
	ActionReset  = "reset"  // close the key's breaker and forget its failures
	ActionResume = "resume" // end the key's pause
)

// controlRequest is the JSON body of a control request.
type controlRequest struct {
	Source string `json:"source"`
	Action string `json:"action"`
	Key    string `json:"key"`
}

// breakersOf is the breakers a source holds, nil when none.
func breakersOf(s Snapshotter) *breakwater.Breakers {
	switch s := s.(type) {
	case *breakwater.Breakers:
		return s
	case interface{ Breakers() *breakwater.Breakers }:
		return s.Breakers()
	}
	return nil
}

// pauseGatesOf is the pause gates a source holds, nil when none.
func pauseGatesOf(s Snapshotter) *breakwater.PauseGates {
	switch s := s.(type) {
	case *breakwater.PauseGates:
		return s
	case interface{ PauseGates() *breakwater.PauseGates }:
		return s.PauseGates()
	}
	return nil
}

// serveControl applies one control. It runs behind
// http.CrossOriginProtection, which refuses cross-site browser requests by
// their Sec-Fetch-Site and Origin headers; it also requires POST, a Host
// the page accepts (see hostAllowed), ControlHeader and a body of one JSON
// object, so that a request a browser would send without a preflight, or
// from a DNS-rebound name, is refused whatever headers the browser sets.
func (p *Page) serveControl(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	if !p.hostAllowed(r) {
		http.Error(w, fmt.Sprintf("status: a control request's Host %q is not one this page accepts (loopback, the listener's address, or status.WithAllowedHosts)", r.Host), http.StatusForbidden)
		return
	}
	if r.Header.Get(ControlHeader) != "1" {
		http.Error(w, "status: a control request needs the "+ControlHeader+": 1 header", http.StatusForbidden)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "status: a control request's body must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	var req controlRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		http.Error(w, "status: a control request's body must be one JSON object, with nothing after it", http.StatusBadRequest)
		return
	}
	if err := p.apply(req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]string{"done": req.Action, "source": req.Source, "key": req.Key})
}

func (p *Page) apply(req controlRequest) error {
	var src *source
	for i := range p.cfg.sources {
		if p.cfg.sources[i].name == req.Source {
			src = &p.cfg.sources[i]
		}
	}
	if src == nil {
		return fmt.Errorf("status: no source named %q", req.Source)
	}
	if req.Key == "" {
		return fmt.Errorf("status: a control needs a key")
	}
	switch req.Action {
	case ActionTrip, ActionReset:
		bs := breakersOf(src.snap)
		if bs == nil {
			return fmt.Errorf("status: source %q has no breakers", req.Source)
		}
		if _, ok := bs.Lookup(req.Key); !ok {
			return fmt.Errorf("status: source %q has no breaker for key %q", req.Source, req.Key)
		}
		if b := bs.Get(req.Key); b != nil && req.Action == ActionTrip {
			b.Trip(0)
		} else if b != nil {
			b.Reset()
		}
	case ActionResume:
		gs := pauseGatesOf(src.snap)
		if gs == nil {
			return fmt.Errorf("status: source %q has no pause gates", req.Source)
		}
		gs.Resume(req.Key)
	default:
		return fmt.Errorf("status: unknown action %q (want %s, %s or %s)", req.Action, ActionTrip, ActionReset, ActionResume)
	}
	return nil
}
