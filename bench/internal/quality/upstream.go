package quality

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// callHeader carries the call number on every attempt of a call, so the
// upstream can tell a retry from a new call.
const callHeader = "X-Bench-Call"

// graceAny is how long after a 429 was answered other calls' requests still
// count as sent before the client could have seen it: one loopback round
// trip with room to spare.
const graceAny = 10 * time.Millisecond

// upstream is a loopback server that behaves as one scenario says and
// records what a client did to it.
type upstream struct {
	srv        *httptest.Server
	mode       Mode
	retryAfter time.Duration
	throttle   time.Duration
	closing    chan struct{}
	closeOnce  sync.Once
	requests   atomic.Int64

	mu         sync.Mutex
	first      time.Time            // the first request's arrival
	notBefore  map[string]time.Time // per call: when its last 429 allows a retry
	answered   []time.Time          // when each 429 was answered
	earlyRetry int                  // retries of a call before its Retry-After
	earlyAny   int                  // requests inside another call's Retry-After
	conns      map[net.Conn]http.ConnState
}

func newUpstream(mode Mode, retryAfter, throttle time.Duration) *upstream {
	u := &upstream{
		mode:       mode,
		retryAfter: retryAfter,
		throttle:   throttle,
		closing:    make(chan struct{}),
		notBefore:  map[string]time.Time{},
		conns:      map[net.Conn]http.ConnState{},
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = u.connState
	u.srv.Start()
	return u
}

func (u *upstream) connState(c net.Conn, s http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s == http.StateClosed || s == http.StateHijacked {
		delete(u.conns, c)
		return
	}
	u.conns[c] = s
}

// open returns the number of connections the server still holds.
func (u *upstream) open() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	u.requests.Add(1)
	call := r.Header.Get(callHeader)

	u.mu.Lock()
	if u.first.IsZero() {
		u.first = at
	}
	if nb, ok := u.notBefore[call]; ok && at.Before(nb) {
		u.earlyRetry++
	}
	for _, a := range u.answered {
		if !at.Before(a.Add(graceAny)) && at.Before(a.Add(u.retryAfter)) {
			u.earlyAny++
			break
		}
	}
	throttled := u.mode == Throttle && at.Sub(u.first) < u.throttle
	if throttled {
		now := time.Now()
		u.notBefore[call] = now.Add(u.retryAfter)
		u.answered = append(u.answered, now)
	}
	u.mu.Unlock()

	switch {
	case u.mode == Down:
		http.Error(w, "down", http.StatusInternalServerError)
	case u.mode == Hang:
		select {
		case <-r.Context().Done():
		case <-u.closing:
		}
	case throttled:
		w.Header().Set("Retry-After", strconv.Itoa(int(u.retryAfter/time.Second)))
		http.Error(w, "slow down", http.StatusTooManyRequests)
	default:
		_, _ = w.Write([]byte("ok"))
	}
}

// close releases hanging handlers, drops every connection and stops the
// server.
func (u *upstream) close() {
	u.closeOnce.Do(func() {
		close(u.closing)
		u.srv.CloseClientConnections()
		u.srv.Close()
	})
}
