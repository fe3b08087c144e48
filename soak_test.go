//go:build soak

package breakwater_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	bw "github.com/breakwater-go/breakwater"
)

// The chaos soak runs only with -tags soak:
//
//	go test -tags soak -race -run TestChaosSoak -soak.duration 60s .
//
// scripts/soak.sh runs it for as long as asked.
var soakDuration = flag.Duration("soak.duration", 60*time.Second, "how long TestChaosSoak runs")

const soakWorkers = 32

// soakBehaviour is what the soak's upstream does with one request, chosen
// by the request's host (some hosts are worse than others) and chance.
func soakBehaviour(host string, rng *rand.Rand) string {
	bad := map[string]int{"h0.test": 0, "h1.test": 10, "h2.test": 30, "h3.test": 60, "h4.test": 90}[host]
	if host == "h5.test" {
		bad = 50 + rng.IntN(50) // flapping
	}
	if rng.IntN(100) >= bad {
		if rng.IntN(10) == 0 {
			return "slow body"
		}
		return "ok"
	}
	faults := []string{"500", "502", "503", "503 retry-after", "429 retry-after", "reset", "reset mid body", "hang", "slow headers", "slow body"}
	return faults[rng.IntN(len(faults))]
}

// soakServer is the soak's upstream, counting its open connections.
type soakServer struct {
	*httptest.Server
	open atomic.Int64
	mu   sync.Mutex
	rng  *rand.Rand
}

func newSoakServer(t *testing.T) *soakServer {
	s := &soakServer{rng: rand.New(rand.NewPCG(1, 2))}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.Start()
	return s
}

func (s *soakServer) intn(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(n)
}

func (s *soakServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b := soakBehaviour(r.Host, s.rng)
	s.mu.Unlock()
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	switch b {
	case "ok":
		io.WriteString(w, "ok\n")
	case "slow body":
		w.Header().Set("Content-Length", "8")
		for range 8 {
			if !sleep(time.Duration(s.intn(60)) * time.Millisecond) {
				return
			}
			io.WriteString(w, "x")
			http.NewResponseController(w).Flush()
		}
	case "500", "502", "503":
		code, _ := strconv.Atoi(b)
		w.WriteHeader(code)
	case "503 retry-after", "429 retry-after":
		w.Header().Set("Retry-After", strconv.Itoa(s.intn(3)))
		code, _ := strconv.Atoi(b[:3])
		w.WriteHeader(code)
	case "reset", "reset mid body":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if b == "reset mid body" {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	case "hang":
		<-r.Context().Done()
	case "slow headers":
		if sleep(time.Duration(s.intn(1500)) * time.Millisecond) {
			io.WriteString(w, "late\n")
		}
	}
}

// countingDialer counts the client's open connections.
type countingDialer struct {
	d    net.Dialer
	addr string
	open atomic.Int64
}

type countedConn struct {
	net.Conn
	once sync.Once
	n    *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.Conn.Close()
}

func (d *countingDialer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, d.addr)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	return &countedConn{Conn: c, n: &d.open}, nil
}

// documented reports whether err is one of the errors a Transport
// documents: its own rejections and timeouts (sentinels, *Error), the
// caller's context ending, and the network failing (net.Error, an
// unexpected EOF, a reset).
func documented(err error) bool {
	var (
		e  *bw.Error
		ne net.Error
	)
	for _, s := range []error{bw.ErrCircuitOpen, bw.ErrHalfOpenBusy, bw.ErrPaused, bw.ErrRateLimited,
		bw.ErrConcurrencyLimit, bw.ErrRetryBudget, bw.ErrAttemptTimeout, bw.ErrCallTimeout,
		context.Canceled, context.DeadlineExceeded, io.ErrUnexpectedEOF, io.EOF, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, s) {
			return true
		}
	}
	return errors.As(err, &e) || errors.As(err, &ne)
}

// The chaos soak: 32 goroutines call a hostile upstream (5xx, 429 and 503
// with Retry-After, resets, hangs, slow headers and bodies) through a
// Transport with every stage on, with random caller deadlines and
// cancellations, for -soak.duration. Every call ends with a response or a
// documented error no later than its deadline + 50 ms; afterwards no
// goroutine or connection is left, and the heap stayed flat.
func TestChaosSoak(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newSoakServer(t)
	dialer := &countingDialer{addr: srv.Listener.Addr().String()}
	base := &http.Transport{DialContext: dialer.dial, MaxIdleConnsPerHost: 8}
	const callTimeout = 2 * time.Second
	tr, err := bw.NewTransport(bw.WithBase(base),
		bw.WithCallTimeout(callTimeout),
		bw.WithAttemptTimeout(700*time.Millisecond),
		bw.WithRateLimit(2000, 200),
		bw.WithConcurrencyLimit(16, bw.WithMaxQueue(32), bw.WithMaxWait(200*time.Millisecond)),
	)
	if err != nil {
		t.Fatal(err)
	}
	lags := &timerLags{}
	type lateCall struct {
		start, end time.Time
		over       time.Duration
		what       string
	}
	var (
		calls     atomic.Int64
		lateCalls []lateCall
		mu        sync.Mutex
		outcomes  = map[string]int{}
		undoc     []string
		worstLate time.Duration
		heap      []uint64
	)
	record := func(outcome string, err error, over time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		outcomes[outcome]++
		if err != nil && !documented(err) && len(undoc) < 10 {
			undoc = append(undoc, fmt.Sprintf("%T: %v", err, err))
		}
		worstLate = max(worstLate, over)
	}
	stop := time.Now().Add(*soakDuration)
	var wg sync.WaitGroup
	for g := range soakWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for time.Now().Before(stop) {
				ctx, cancel := context.WithCancel(context.Background())
				deadline := callTimeout
				if rng.IntN(3) == 0 {
					d := time.Duration(50+rng.IntN(3000)) * time.Millisecond
					ctx, cancel = context.WithTimeout(context.Background(), d)
					deadline = min(deadline, d)
				}
				if rng.IntN(10) == 0 {
					time.AfterFunc(time.Duration(rng.IntN(1000))*time.Millisecond, cancel)
				}
				host := fmt.Sprintf("h%d.test", rng.IntN(6))
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				outcome := "error"
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					outcome = strconv.Itoa(resp.StatusCode)
					if err != nil {
						outcome = "body error"
					}
				}
				elapsed := time.Since(start)
				cancel()
				calls.Add(1)
				over := elapsed - deadline
				if over > deadlineSlack {
					mu.Lock()
					lateCalls = append(lateCalls, lateCall{start, time.Now(), over,
						fmt.Sprintf("a call to %s with a %s deadline took %s: %s %v", host, deadline, elapsed, outcome, err)})
					mu.Unlock()
				}
				if err != nil {
					outcome = mechanismOrKind(err)
				}
				record(outcome, err, over)
			}
		})
	}
	wg.Go(func() { lags.measure(stop) })
	wg.Go(func() { // heap samples every 5 s
		for time.Now().Add(5 * time.Second).Before(stop) {
			time.Sleep(5 * time.Second)
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			heap = append(heap, ms.HeapAlloc)
			mu.Unlock()
		}
	})
	wg.Wait()

	// A call is late by its own doing only beyond what the runtime's
	// timers lagged meanwhile: a loaded machine delays every goroutine, a
	// bare http.Client's as much.
	late, starved := 0, 0
	for _, c := range lateCalls {
		if lag := lags.max(c.start, c.end); c.over > deadlineSlack+lag {
			late++
			t.Errorf("%s (timers lagged up to %s meanwhile)", c.what, lag)
		} else {
			starved++
		}
	}

	tr.CloseIdleConnections()
	for i := 0; i < 100 && (dialer.open.Load() != 0 || srv.open.Load() != 0); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := dialer.open.Load(); n != 0 {
		t.Errorf("%d client connections left open", n)
	}
	if n := srv.open.Load(); n != 0 {
		t.Errorf("%d server connections left open", n)
	}
	srv.Close()

	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var summary string
	for _, k := range keys {
		summary += fmt.Sprintf(" %s=%d", k, outcomes[k])
	}
	t.Logf("%d calls in %s by %d goroutines, %d late, latest %s past its deadline (%d more late while the runtime's timers lagged as much, worst lag %s);%s",
		calls.Load(), *soakDuration, soakWorkers, late, max(0, worstLate), starved, lags.max(time.Time{}, time.Now()), summary)
	t.Logf("heap after GC every 5 s (MiB): %s", mib(heap))
	if len(undoc) > 0 {
		t.Errorf("undocumented errors: %q", undoc)
	}
	if len(heap) >= 3 {
		first, last := heap[1], heap[len(heap)-1] // the first sample is warm-up
		if last > first+first/2+4<<20 {
			t.Errorf("heap grew from %s to %s MiB", mib(heap[1:2]), mib(heap[len(heap)-1:]))
		}
	}
}

// timerLags records how late 5 ms sleeps wake up: how far the machine's
// load alone delays any goroutine.
type timerLags struct {
	mu      sync.Mutex
	samples []lagSample
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

func (l *timerLags) measure(stop time.Time) {
	for time.Now().Before(stop) {
		t0 := time.Now()
		time.Sleep(5 * time.Millisecond)
		lag := time.Since(t0) - 5*time.Millisecond
		l.mu.Lock()
		l.samples = append(l.samples, lagSample{time.Now(), lag})
		l.mu.Unlock()
	}
}

// max returns the largest lag of a sleep that ended between from and to
// (or shortly after).
func (l *timerLags) max(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m time.Duration
	for _, s := range l.samples {
		if !s.at.Before(from) && !s.at.After(to.Add(100*time.Millisecond)) {
			m = max(m, s.lag)
		}
	}
	return m
}

func mib(xs []uint64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.1f", float64(x)/(1<<20))
	}
	return s
}

// mechanismOrKind names an error for the summary.
func mechanismOrKind(err error) string {
	for _, s := range []error{bw.ErrCircuitOpen, bw.ErrHalfOpenBusy, bw.ErrPaused, bw.ErrRateLimited,
		bw.ErrConcurrencyLimit, bw.ErrRetryBudget, bw.ErrAttemptTimeout, bw.ErrCallTimeout, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return errorKind(err)
}
