package breakwatertest

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is one kind of failure a [FaultTransport] injects.
//
// A fault that applies to a request first waits Latency, then answers with a
// synthetic response (Status), fails with Err, or, when it sets neither,
// passes the request on to the next transport (a pure latency fault). Status
// and Err are mutually exclusive, and a fault must set at least one of
// Status, Err and Latency.
type Fault struct {
	// Probability is the chance, from 0 to 1, that this fault applies to a
	// request. At most one fault applies to a request; see
	// [NewFaultTransport].
	Probability float64

	// Status, if not 0, answers with a synthetic response of this status
	// (200 to 599) instead of calling the next transport.
	Status int

	// Header holds the synthetic response's headers, such as Retry-After.
	Header http.Header

	// Err, if not nil, is returned as is instead of calling the next
	// transport.
	Err error

	// Latency is a wait before the fault proceeds. If the request's context
	// ends first, RoundTrip returns the context's error.
	Latency time.Duration
}

// FaultTransport is an http.RoundTripper that injects faults into the
// requests it forwards to another RoundTripper, at random but reproducibly.
// It is safe for concurrent use.
type FaultTransport struct {
	next     http.RoundTripper
	faults   []Fault
	injected atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand // guarded by mu
}

var _ http.RoundTripper = (*FaultTransport)(nil)

// NewFaultTransport returns a transport that forwards requests to next
// (http.DefaultTransport if nil) and injects faults on the way.
//
// For each request it draws one number u uniformly from [0, 1) and applies
// the first fault whose cumulative probability (the sum of the
// Probabilities up to and including it) exceeds u. So fault i applies with
// exactly its Probability, at most one fault applies, and with probability
// 1 − ΣProbability none does. The draws come from a PCG generator seeded
// with seed, so a sequence of requests sent one after the other meets the
// same faults on every run with the same seed; under concurrency the
// requests take the draws in the order they reach RoundTrip.
//
// NewFaultTransport panics if a probability is outside [0, 1] or they sum
// to more than 1, a status is outside 200–599, a fault sets both Status and
// Err, or a fault sets none of Status, Err and Latency.
func NewFaultTransport(next http.RoundTripper, seed uint64, faults ...Fault) *FaultTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	sum := 0.0
	fs := make([]Fault, len(faults))
	for i, f := range faults {
		switch {
		case math.IsNaN(f.Probability) || f.Probability < 0 || f.Probability > 1:
			panic(fmt.Sprintf("breakwatertest: fault %d: probability %v outside [0, 1]", i, f.Probability))
		case !validStatus(f.Status):
			panic(fmt.Sprintf("breakwatertest: fault %d: status %d outside 200-599", i, f.Status))
		case f.Status != 0 && f.Err != nil:
			panic(fmt.Sprintf("breakwatertest: fault %d sets both Status and Err", i))
		case f.Status == 0 && f.Err == nil && f.Latency <= 0:
			panic(fmt.Sprintf("breakwatertest: fault %d sets none of Status, Err and Latency", i))
		}
		sum += f.Probability
		f.Header = f.Header.Clone()
		fs[i] = f
	}
	if sum > 1+1e-9 {
		panic(fmt.Sprintf("breakwatertest: fault probabilities sum to %v, more than 1", sum))
	}
	return &FaultTransport{
		next:   next,
		faults: fs,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// RoundTrip injects the fault drawn for req, if any, and otherwise forwards
// req to the next transport unchanged. It never modifies req. When it does
// not call the next transport it closes req.Body. A synthetic response has
// the fault's status and headers (plus Content-Type when it has a body),
// protocol HTTP/1.1, Request set to req, and a non-nil Body: the status
// text and a newline, or http.NoBody for HEAD requests and statuses without
// a body.
func (f *FaultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	fault, ok := f.pick()
	if !ok {
		return f.next.RoundTrip(req)
	}
	f.injected.Add(1)
	if fault.Latency > 0 {
		t := time.NewTimer(fault.Latency)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			closeBody(req)
			return nil, req.Context().Err()
		}
	}
	switch {
	case fault.Err != nil:
		closeBody(req)
		return nil, fault.Err
	case fault.Status != 0:
		closeBody(req)
		return synthetic(req, fault), nil
	default:
		return f.next.RoundTrip(req)
	}
}

// Injected returns how many requests a fault has applied to so far.
func (f *FaultTransport) Injected() int { return int(f.injected.Load()) }

// pick draws the fault for one request.
func (f *FaultTransport) pick() (Fault, bool) {
	f.mu.Lock()
	u := f.rng.Float64()
	f.mu.Unlock()
	acc := 0.0
	for _, fault := range f.faults {
		acc += fault.Probability
		if u < acc {
			return fault, true
		}
	}
	return Fault{}, false
}

// synthetic builds the response of a Status fault.
func synthetic(req *http.Request, fault Fault) *http.Response {
	text := statusText(fault.Status)
	resp := &http.Response{
		Status:     strconv.Itoa(fault.Status) + " " + text,
		StatusCode: fault.Status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     fault.Header.Clone(),
		Body:       http.NoBody,
		Request:    req,
	}
	if resp.Header == nil {
		resp.Header = make(http.Header)
	}
	if bodyAllowed(fault.Status) && req.Method != http.MethodHead {
		body := text + "\n"
		resp.Body = io.NopCloser(strings.NewReader(body))
		resp.ContentLength = int64(len(body))
		if resp.Header.Get("Content-Type") == "" {
			resp.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	return resp
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
