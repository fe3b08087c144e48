package redisstore_test

// A replica of a service in cluster mode, as the shared-limits claim runs
// it: a full stack with its own go-redis client, Store, inbound per-client
// limit and outbound quota, serving HTTP on a loopback port.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
)

// The policies the replicas share: an inbound limit per client and an
// outbound quota per upstream.
const (
	inLimit, inBurst   = 40, 10
	outLimit, outBurst = 20, 5
)

// Faults that make a replica over-admit, to show that the claim's
// measurement catches them.
const (
	// faultStoreOverAdmits asks the store for half as much again as the
	// policy's rate: the store admits more than the limit.
	faultStoreOverAdmits = "store-over-admits"
	// faultAdmitsOutside makes every third admission fail as if Redis had,
	// so that the replica admits by its local share: admissions that the
	// store never saw.
	faultAdmitsOutside = "admits-outside-the-store"
)

type replicaConfig struct {
	Index    int
	Redis    string
	Upstream string
	Fault    string
}

// replica is one running stack.
type replica struct {
	client *redis.Client
	store  *redisstore.Store
	tr     *bw.Transport
	srv    *httptest.Server
}

// startReplica starts a replica. Its handler calls the upstream once
// (marking the call with the replica's index and the wall-clock time it
// started, in X-Replica and X-Started) and answers 200 whatever the
// upstream call did, so that any other status is the inbound limit's.
func startReplica(cfg replicaConfig) (*replica, error) {
	r := &replica{}
	// The client settings the package doc recommends, and a wide budget:
	// this claim is about shared mode, not the fallback.
	r.client = redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true, DialTimeout: time.Second, MaxRetries: -1, DialerRetries: 1})
	store, err := redisstore.New(r.client, redisstore.WithBudget(time.Second))
	if err != nil {
		r.client.Close()
		return nil, err
	}
	r.store = store
	inbound, upstream := bw.SharedLimiter(store.Limiter("inbound")), bw.SharedLimiter(store.Limiter("upstream"))
	if cfg.Fault != "" {
		inbound, upstream = &faultyLimiter{SharedLimiter: inbound, fault: cfg.Fault}, &faultyLimiter{SharedLimiter: upstream, fault: cfg.Fault}
	}
	rl, err := bw.NewRateLimiters(inLimit, inBurst, bw.WithSharedLimiter(inbound))
	if err != nil {
		r.close()
		return nil, err
	}
	crl, err := bw.NewClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		r.close()
		return nil, err
	}
	r.tr, err = bw.NewTransport(bw.WithRateLimit(outLimit, outBurst, bw.WithSharedLimiter(upstream), bw.WithRateLimitWait(0)), bw.WithMaxAttempts(1))
	if err != nil {
		r.close()
		return nil, err
	}
	client := &http.Client{Transport: r.tr}
	index := strconv.Itoa(cfg.Index)
	r.srv = httptest.NewServer(crl.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		out, _ := http.NewRequestWithContext(req.Context(), http.MethodGet, cfg.Upstream, nil)
		out.Header.Set("X-Replica", index)
		out.Header.Set("X-Started", strconv.FormatInt(time.Now().UnixNano(), 10))
		if resp, err := client.Do(out); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})))
	return r, nil
}

func (r *replica) URL() string { return r.srv.URL }

func (r *replica) close() {
	if r.srv != nil {
		r.srv.Close()
	}
	if r.tr != nil {
		r.tr.CloseIdleConnections()
	}
	r.store.Close()
	r.client.Close()
}

// faultyLimiter makes a shared limiter over-admit on purpose.
type faultyLimiter struct {
	bw.SharedLimiter
	fault string
	n     atomic.Int64
}

func (f *faultyLimiter) Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (bw.RateStatus, time.Duration, error) {
	switch f.fault {
	case faultStoreOverAdmits:
		limit *= 1.5
	case faultAdmitsOutside:
		if f.n.Add(1)%3 == 0 {
			return bw.RateStatus{}, 0, errors.New("fault: the store was not asked")
		}
	}
	return f.SharedLimiter.Take(ctx, key, limit, burst, maxWait)
}
