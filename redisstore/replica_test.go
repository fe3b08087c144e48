package redisstore_test

// A replica of a service in cluster mode, as the shared-limits claim runs
// it: a full stack with its own go-redis client, Store, inbound per-client
// limit and outbound quota, serving HTTP on a loopback port. The claim
// starts three of them as separate OS processes (this test binary run
// again with replicaEnv set); the checks of the claim's measurement run
// them in process.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
)

// limitsPolicy is what the replicas share: an inbound limit per client
// and an outbound quota per upstream, in requests per second and burst.
type limitsPolicy struct {
	InLimit, InBurst   int
	OutLimit, OutBurst int
}

// claimPolicy is the shared-limits claim's.
var claimPolicy = limitsPolicy{InLimit: 40, InBurst: 10, OutLimit: 20, OutBurst: 5}

// replicaEnv selects the replica role of this test binary; its value is
// the replica's configuration in JSON.
const replicaEnv = "BREAKWATER_TEST_REPLICA"

// Faults that make a replica over-admit, to show that the claim's
// measurement catches them.
const (
	// faultStoreOverAdmits asks the store for twice the policy's rate:
	// the store admits more than the limit.
	faultStoreOverAdmits = "store-over-admits"
	// faultAdmitsOutside admits every third request without asking
	// Redis: admissions that the store never saw.
	faultAdmitsOutside = "admits-outside-the-store"
)

type replicaConfig struct {
	Index    int
	Redis    string
	Upstream string
	Policy   limitsPolicy
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
	rl, err := bw.NewRateLimiters(rate.Limit(cfg.Policy.InLimit), cfg.Policy.InBurst, bw.WithSharedLimiter(inbound))
	if err != nil {
		r.close()
		return nil, err
	}
	crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		r.close()
		return nil, err
	}
	r.tr, err = bw.NewTransport(bw.WithRateLimit(rate.Limit(cfg.Policy.OutLimit), cfg.Policy.OutBurst, bw.WithSharedLimiter(upstream), bw.WithMaxWait(0)), bw.WithMaxAttempts(1))
	if err != nil {
		r.close()
		return nil, err
	}
	client := &http.Client{Transport: r.tr}
	index := strconv.Itoa(cfg.Index)
	r.srv = httptest.NewServer(crl(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
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

func (f *faultyLimiter) Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	switch f.fault {
	case faultStoreOverAdmits:
		limit *= 2
	case faultAdmitsOutside:
		if f.n.Add(1)%3 == 0 {
			return bw.RateLimitSnapshot{Limit: limit, Burst: burst, Remaining: burst}, 0, nil // admitted, the store not asked
		}
	}
	return f.SharedLimiter.Take(ctx, key, limit, burst, maxWait)
}

// TestReplicaProcess is the body of a replica process: it does nothing
// unless replicaEnv is set. It prints "replica-url <url>" once serving,
// runs until its standard input closes, then prints "replica-stats
// <json>" with its Store's counters and returns (and TestMain checks that
// it leaked no goroutine).
func TestReplicaProcess(t *testing.T) {
	conf := os.Getenv(replicaEnv)
	if conf == "" {
		return // not a replica process
	}
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
		t.Fatal(err)
	}
	r, err := startReplica(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("replica-url %s\n", r.URL())
	io.Copy(io.Discard, os.Stdin)
	st, _ := json.Marshal(r.store.Stats())
	r.close()
	fmt.Printf("replica-stats %s\n", st)
}

// replicaProcess is a replica running as a child process.
type replicaProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the child's standard output, closed at EOF
	stderr bytes.Buffer
	url    string
}

// startReplicaProcess starts this test binary again as replica cfg and
// waits until it serves. The process is killed when t ends if it still
// runs.
func startReplicaProcess(t *testing.T, cfg replicaConfig) *replicaProcess {
	t.Helper()
	conf, _ := json.Marshal(cfg)
	p := &replicaProcess{lines: make(chan string, 16)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestReplicaProcess$", "-test.timeout=2m")
	p.cmd.Env = append(os.Environ(), replicaEnv+"="+string(conf))
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			for range p.lines {
			}
			p.cmd.Wait()
		}
	})
	return p
}

// waitURL waits until the replica prints its URL.
func (p *replicaProcess) waitURL(timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return "", fmt.Errorf("replica exited before serving: %s", p.stderr.String())
			}
			if u, found := strings.CutPrefix(line, "replica-url "); found {
				p.url = u
				return u, nil
			}
		case <-deadline:
			return "", fmt.Errorf("replica not serving after %v", timeout)
		}
	}
}

// stop tells the replica to stop: it closes the replica's standard input.
func (p *replicaProcess) stop() { p.stdin.Close() }

// wait waits for the replica to exit after stop and returns its Store's
// counters; an error if it failed (a goroutine leak included) or did not
// exit within timeout.
func (p *replicaProcess) wait(timeout time.Duration) (redisstore.Stats, error) {
	var st redisstore.Stats
	var out []string
	deadline := time.After(timeout)
	for done := false; !done; {
		select {
		case line, ok := <-p.lines:
			if !ok {
				done = true
				break
			}
			out = append(out, line)
			if s, found := strings.CutPrefix(line, "replica-stats "); found {
				if err := json.Unmarshal([]byte(s), &st); err != nil {
					return st, err
				}
			}
		case <-deadline:
			p.cmd.Process.Kill()
			for range p.lines {
			}
			p.cmd.Wait()
			return st, fmt.Errorf("replica did not exit within %v", timeout)
		}
	}
	if err := p.cmd.Wait(); err != nil {
		return st, fmt.Errorf("replica: %v\n%s\n%s", err, strings.Join(out, "\n"), p.stderr.String())
	}
	return st, nil
}
