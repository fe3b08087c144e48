// Command cluster runs three replicas of a service against one local
// redis-server and shows what cluster mode shares: one client's inbound
// rate limit across all three, and a breaker trip on one replica reaching
// the others. It starts its own redis-server (on a free loopback port)
// when one is on PATH; scripts/deps.sh installs it.
//
//	go run ./examples/cluster -duration 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// Limits of the demo: one client may make 20 requests/s, burst 5, across
// all replicas together.
const (
	limit = 20
	burst = 5
)

type replica struct {
	name     string
	store    *redisstore.Store
	client   *redis.Client
	breakers *bw.Breakers
	srv      *httptest.Server
	admitted atomic.Int64
	refused  atomic.Int64
	tripped  atomic.Int64 // unix ns when a remote trip arrived
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	duration := fs.Duration("duration", 2*time.Second, "how long the client sends requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !redistest.Available() {
		fmt.Fprintln(out, "redis-server is not on PATH: scripts/deps.sh installs it (Debian package redis-server)")
		return nil
	}
	dir, err := os.MkdirTemp("", "breakwater-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(out, "redis-server pid %d on %s; 3 replicas; one client limited to %d/s, burst %d, across all of them\n", srv.PID(), srv.Addr, limit, burst)

	var reps []*replica
	for i := range 3 {
		r, err := newReplica(fmt.Sprintf("replica-%d", i+1), srv.Addr)
		if err != nil {
			return err
		}
		defer r.close()
		reps = append(reps, r)
	}

	// The client: two goroutines per replica, a request every 10 ms each.
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range reps {
		for range 2 {
			wg.Go(func() {
				c := &http.Client{}
				defer c.CloseIdleConnections()
				for time.Since(start) < *duration {
					if resp, err := c.Get(r.srv.URL); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	var total, refused int64
	for _, r := range reps {
		a, n := r.admitted.Load(), r.refused.Load()
		total, refused = total+a, refused+n
		fmt.Fprintf(out, "%s: admitted %d, refused %d (429)\n", r.name, a, n)
	}
	fmt.Fprintf(out, "total: admitted %d in %s (the shared limit allows at most %d: %d/s plus the burst of %d), refused %d\n",
		total, elapsed.Round(time.Millisecond), int(elapsed.Seconds()*limit)+burst, limit, burst, refused)

	// A trip on replica 1 reaches the others.
	tripAt := time.Now()
	reps[0].breakers.Get("payments").Trip(5 * time.Second)
	fmt.Fprintf(out, "%s tripped the payments breaker\n", reps[0].name)
	deadline := time.Now().Add(2 * time.Second)
	for _, r := range reps[1:] {
		for r.tripped.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if at := r.tripped.Load(); at != 0 {
			fmt.Fprintf(out, "%s: open %s later (state %v)\n", r.name, time.Unix(0, at).Sub(tripAt).Round(10*time.Microsecond), r.breakers.Get("payments").State())
		} else {
			fmt.Fprintf(out, "%s: the trip did not arrive within 2s\n", r.name)
		}
	}
	return nil
}

func newReplica(name, addr string) (*replica, error) {
	r := &replica{name: name}
	r.client = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	store, err := redisstore.New(r.client, redisstore.WithReplicaID(name), redisstore.WithBudget(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	r.store = store
	rl, err := bw.NewRateLimiters(limit, burst, bw.WithSharedLimiter(store.Limiter("inbound")))
	if err != nil {
		return nil, err
	}
	crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey, bw.WithDenyHandler(func(w http.ResponseWriter, req *http.Request, rej bw.Rejection) {
		r.refused.Add(1)
		bw.WriteProblem(w, req, rej)
	}))
	if err != nil {
		return nil, err
	}
	bus, err := store.Bus("trips")
	if err != nil {
		return nil, err
	}
	r.breakers, err = bw.NewBreakers(bw.WithClusterBus(bus), bw.WithObserver(bw.ObserverFunc(func(_ context.Context, e bw.Event) {
		if t := e.Transition; t != nil && t.Reason == bw.ReasonCluster && t.To == bw.StateOpen {
			r.tripped.CompareAndSwap(0, time.Now().UnixNano())
		}
	})))
	if err != nil {
		return nil, err
	}
	r.srv = httptest.NewServer(crl(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.admitted.Add(1)
	})))
	return r, nil
}

func (r *replica) close() {
	r.srv.Close()
	r.store.Close()
	r.client.Close()
}
