package breakwater

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Failover spreads a [Transport]'s calls over several endpoints of one
// logical upstream (regions, replicas, providers), set with
// [WithFailover]. Each attempt goes to one endpoint, chosen before it is
// admitted: breakers, retry budgets, pause gates, rate and concurrency
// limits are kept per endpoint, and a retry or a hedge goes to an endpoint
// the call has not tried yet when a healthy one is left.
//
// Endpoints are sorted into health tiers, in the manner of Lasso:
// healthy; degraded (its breaker half-open, paused by the upstream, or
// just throttled); ejected (its breaker open, or taken out by outlier
// detection). Attempts go to the best tier, in turns or to the endpoint
// with the fewest attempts in flight. Outlier detection works in the manner
// of Envoy's: an endpoint is ejected after Consecutive failing attempts in
// a row, or when over the last 10 s (at least 20 attempts) its failure rate
// is at least twice the other endpoints' plus 10 points. An ejection lasts
// Ejection, doubling with each ejection that follows the endpoint's return
// within MaxEjection, plus up to 10 % jitter. When it ends, one attempt
// that can be repeated elsewhere probes the endpoint: a success brings it
// back, a failure ejects it again for longer. (An endpoint that only sees
// requests that cannot be repeated is probed by one of them once it has
// waited a second ejection period.) Never more than MaxEjected of the
// endpoints are ejected at once; a single endpoint is never ejected (its
// breaker is what protects it).
//
// With every endpoint out, an attempt goes to the least bad one: the
// ejected endpoint whose ejection ends soonest, where its breaker decides.
// Endpoints whose breaker is open refuse at once, so a call fails fast with
// a *[BreakerError] only when every endpoint's breaker is open.
//
// The zero value of every field but Endpoints is a sound default.
type Failover struct {
	// Endpoints are the base URLs, "http[s]://host[:port][/path]", at
	// least one and at most 64. An attempt replaces the request URL's
	// scheme and host with an endpoint's and puts the endpoint's path in
	// front of the request's. The Host header follows the endpoint unless
	// the caller set a Host different from the request URL's host.
	Endpoints []string
	// LeastInFlight sends each attempt to the endpoint of the best tier
	// with the fewest attempts in flight (a response counts until its body
	// is closed) instead of taking turns.
	LeastInFlight bool
	// Consecutive is the number of failing attempts in a row that eject an
	// endpoint. Zero means 5.
	Consecutive int
	// Ejection is how long the first ejection lasts; zero means 5 s.
	// MaxEjection caps it as it doubles; zero means 60 s.
	Ejection, MaxEjection time.Duration
	// MaxEjected is the largest share of the endpoints ejected at once,
	// in (0, 1]; zero means 0.5. With two or more endpoints one may always
	// be ejected.
	MaxEjected float64
}

// Defaults of failover. They are documented on [Failover].
const (
	defaultConsecutive = 5
	defaultEjection    = 5 * time.Second
	defaultMaxEjection = 60 * time.Second
	defaultMaxEjected  = 0.5
	maxEndpoints       = 64 // a call's tried endpoints fit in a uint64
)

// failover is a validated [Failover].
type failover struct {
	eps           []*url.URL
	leastInFlight bool
	consecutive   int
	ejection      time.Duration
	maxEjection   time.Duration
	maxEjected    float64
}

// resolve validates f and fills in its defaults.
func (f Failover) resolve() (failover, error) {
	var errs []error
	r := failover{
		leastInFlight: f.LeastInFlight,
		consecutive:   f.Consecutive,
		ejection:      orDefault(f.Ejection, defaultEjection),
		maxEjection:   orDefault(f.MaxEjection, defaultMaxEjection),
		maxEjected:    f.MaxEjected,
	}
	switch n := len(f.Endpoints); {
	case n == 0:
		errs = append(errs, errors.New("breakwater: failover needs at least one endpoint"))
	case n > maxEndpoints:
		errs = append(errs, fmt.Errorf("breakwater: failover takes at most %d endpoints, got %d", maxEndpoints, n))
	}
	seen := map[string]bool{}
	for _, s := range f.Endpoints {
		u, err := parseEndpoint(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[u.String()] {
			errs = append(errs, fmt.Errorf("breakwater: failover endpoint %q is listed twice", s))
		}
		seen[u.String()] = true
		r.eps = append(r.eps, u)
	}
	if r.consecutive == 0 {
		r.consecutive = defaultConsecutive
	}
	if r.maxEjected == 0 {
		r.maxEjected = defaultMaxEjected
	}
	if f.Consecutive < 0 {
		errs = append(errs, fmt.Errorf("breakwater: failover consecutive failures must be >= 0, got %d", f.Consecutive))
	}
	if f.Ejection < 0 || f.MaxEjection < 0 || r.maxEjection < r.ejection {
		errs = append(errs, fmt.Errorf("breakwater: failover ejection times need 0 <= Ejection <= MaxEjection, got %s and %s", r.ejection, r.maxEjection))
	}
	if !(f.MaxEjected >= 0 && f.MaxEjected <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: failover MaxEjected must be in [0, 1], got %v", f.MaxEjected))
	}
	return r, errors.Join(errs...)
}

// parseEndpoint parses a base URL: http or https, a host, an optional path,
// nothing else.
func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("breakwater: failover endpoint %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("breakwater: failover endpoint %q: scheme must be http or https", s)
	case u.Host == "":
		return nil, fmt.Errorf("breakwater: failover endpoint %q has no host", s)
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("breakwater: failover endpoint %q: only scheme, host and path are allowed", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}
