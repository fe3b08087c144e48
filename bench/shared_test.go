package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// sharedKeys is how many client keys the shared admissions cycle through.
const sharedKeys = 256

// sharedRate and sharedBurst are every key's policy: a bucket that a run
// never empties, whose TAT moves on by 100 ms at each admission.
const (
	sharedRate  = 10
	sharedBurst = 1_000_000
)

// sharedBudget bounds each of breakwater's admissions (redisstore's
// WithBudget): long enough that a busy machine never runs past it.
const sharedBudget = time.Second

// A sharedLib admits one request for key against Redis.
type sharedLib struct {
	name  string
	setup func(b *testing.B, c *redis.Client) func(ctx context.Context, key string) error
}

// BenchmarkSharedAdmission: one shared rate limit admission against a
// redis-server on loopback that the benchmark starts (skipped without one
// outside CI), at 1, 8 and 64 goroutines: breakwater's GCRA script
// (redisstore, through a RateLimiters registry), go-redis/redis_rate's GCRA
// script, and a bare PING as the floor every round trip pays. Each row
// reports the p50 and p99 latency of one admission, the throughput, and
// the CPU time per admission of this process (cpu-ns/op) and of the
// redis-server (redis-cpu-ns/op, from its INFO cpu), which a busy machine
// inflates far less than the wall clock. Its runs are named
// run=callers-N, which bench/run.sh runs in every round at its highest
// -cpu and reports in a table of their own.
//
// Both limiters run at 10/s with a burst of a million per key: no
// admission is ever refused, and every one reads the key and writes it
// back. At higher rates the two would not do the same work: breakwater's
// key expires as soon as its bucket is full (a few ms at 1e9/s), and
// redis_rate, which keeps the TAT as float seconds since 2017, rounds a
// nanosecond's increment away and never writes the key at all.
// httprate-redis is not in the table: the Go module proxy does not serve
// its module. The README gives its figures, from a run built beside its
// repository.
func BenchmarkSharedAdmission(b *testing.B) {
	srv := redistest.New(b)
	libs := sharedLibs()
	keys := sharedKeyNames()
	for _, g := range []int{1, 8, 64} {
		for _, l := range libs {
			b.Run(fmt.Sprintf("run=callers-%d/lib=%s", g, l.name), func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
				defer c.Close()
				op := l.setup(b, c)
				if err := op(context.Background(), keys[0]); err != nil { // warm: connection, script
					b.Fatal(err)
				}
				measureShared(b, g, keys, op, func() time.Duration { return serverCPU(b, c) })
			})
		}
	}
}

// sharedLibs returns a bare PING and the two limiters, in that order.
func sharedLibs() []sharedLib {
	return []sharedLib{
		{"ping", func(b *testing.B, c *redis.Client) func(context.Context, string) error {
			return func(ctx context.Context, _ string) error { return c.Ping(ctx).Err() }
		}},
		{"breakwater", func(b *testing.B, c *redis.Client) func(context.Context, string) error {
			store, err := redisstore.New(c, redisstore.WithReplicas(1), redisstore.WithBudget(sharedBudget))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if st := store.Stats(); st.Fails != 0 {
					b.Errorf("breakwater: %d calls failed or ran over budget", st.Fails)
				}
				store.Close()
			})
			rl, err := bw.NewRateLimiters(sharedRate, sharedBurst, bw.WithSharedLimiter(store.Limiter("bench")), bw.WithMaxWait(0))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context, key string) error {
				if rl.Take(key).Limited {
					return fmt.Errorf("refused %s", key)
				}
				return nil
			}
		}},
		{"redis_rate", func(b *testing.B, c *redis.Client) func(context.Context, string) error {
			lim := redis_rate.NewLimiter(c)
			limit := redis_rate.Limit{Rate: sharedRate, Burst: sharedBurst, Period: time.Second}
			return func(ctx context.Context, key string) error {
				res, err := lim.Allow(ctx, key, limit)
				if err == nil && res.Allowed == 0 {
					return fmt.Errorf("refused %s", key)
				}
				return err
			}
		}},
	}
}

// sharedKeyNames returns the client keys the admissions cycle through.
func sharedKeyNames() []string {
	keys := make([]string, sharedKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	return keys
}

// BenchmarkSharedAdmissionPaired: at one caller both limiters send the same
// single script call, and the rounds of SharedAdmission spread by more
// than the difference. Here one caller makes a redis_rate admission and a
// breakwater one in turn (see pairTimes), each on its own client, so the
// noise common to a pair cancels; it reports breakwater's throughput as a
// multiple of redis_rate's (x-redis_rate: above 1, breakwater admits
// more). "run=serial" in the name puts it in run.sh's serial rounds.
//
// breakwater bounds every admission by its budget (a context with a
// timeout, a timer), so that a slow Redis never slows a call; redis_rate
// has none. lib=breakwater-vs-budgeted compares like for like: each
// redis_rate admission under a timeout of breakwater's budget.
func BenchmarkSharedAdmissionPaired(b *testing.B) {
	srv := redistest.New(b)
	ops := map[string]func(context.Context, string) error{}
	ctx := context.Background()
	keys := sharedKeyNames()
	for _, l := range sharedLibs() {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
		b.Cleanup(func() { _ = c.Close() })
		op := l.setup(b, c)
		if err := op(ctx, keys[0]); err != nil { // warm: connection, script
			b.Fatal(err)
		}
		ops[l.name] = op
	}
	redisRate, breakwater := ops["redis_rate"], ops["breakwater"]
	budgeted := func(ctx context.Context, key string) error {
		ctx, cancel := context.WithTimeout(ctx, sharedBudget)
		defer cancel()
		return redisRate(ctx, key)
	}
	for _, peer := range []struct {
		name string
		op   func(context.Context, string) error
	}{{"breakwater", redisRate}, {"breakwater-vs-budgeted", budgeted}} {
		b.Run("run=serial/lib="+peer.name, func(b *testing.B) {
			var t pairTimes
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				key := keys[i%len(keys)]
				err := t.pair(func() error { return peer.op(ctx, key) }, func() error { return breakwater(ctx, key) })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(t.bare)/float64(t.lib), "x-redis_rate")
		})
	}
}

// BenchmarkSharedTailPaired: the tail of one caller's admissions against
// a bare PING's, in the same run. Unpaired, the p99s of SharedAdmission
// move by up to 3x from round to round with what else the machine runs.
// Here one caller makes a PING and an admission in turn, the PING first
// every other pair, each on its own client, and times each call: a burst
// of noise that lasts a pair hits both. It reports the admission's and the
// PING's p50 and p99, and the admission's as a multiple of the PING's
// (x-ping-p50, x-ping-p99: 1 is a bare round trip's). "run=serial" in the
// name puts it in run.sh's serial rounds.
func BenchmarkSharedTailPaired(b *testing.B) {
	srv := redistest.New(b)
	ctx := context.Background()
	keys := sharedKeyNames()
	libs := sharedLibs()
	newOp := func(b *testing.B, l sharedLib) func(context.Context, string) error {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
		b.Cleanup(func() { _ = c.Close() })
		op := l.setup(b, c)
		if err := op(ctx, keys[0]); err != nil { // warm: connection, script
			b.Fatal(err)
		}
		return op
	}
	for _, l := range libs[1:] {
		b.Run("run=serial/lib="+l.name, func(b *testing.B) {
			ops := [2]func(context.Context, string) error{newOp(b, libs[0]), newOp(b, l)}
			var lat [2][]time.Duration // the PING's, the admission's
			for i := 0; b.Loop(); i++ {
				key := keys[i%len(keys)]
				for j := range 2 {
					w := (i + j) % 2
					t0 := time.Now()
					if err := ops[w](ctx, key); err != nil {
						b.Fatal(err)
					}
					lat[w] = append(lat[w], time.Since(t0))
				}
			}
			ping, lib := quantiles(lat[0]), quantiles(lat[1])
			b.ReportMetric(float64(lib[0].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lib[1].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(ping[0].Nanoseconds()), "ping-p50-ns")
			b.ReportMetric(float64(ping[1].Nanoseconds()), "ping-p99-ns")
			b.ReportMetric(float64(lib[0])/float64(ping[0]), "x-ping-p50")
			b.ReportMetric(float64(lib[1])/float64(ping[1]), "x-ping-p99")
		})
	}
}

// quantiles sorts lat and returns its p50 and p99.
func quantiles(lat []time.Duration) [2]time.Duration {
	slices.Sort(lat)
	return [2]time.Duration{lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]}
}

// serverCPU returns the CPU time, user and system, the Redis server behind
// c has used.
func serverCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// measureShared runs b.N operations on g goroutines and reports the p50
// and p99 latency, the throughput, and the CPU time per operation of the
// process and, by serverCPU, of the server.
func measureShared(b *testing.B, g int, keys []string, op func(context.Context, string) error, serverCPU func() time.Duration) {
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ReportAllocs()
	srv0 := serverCPU()
	b.ResetTimer()
	cpu0, _ := cpuTime()
	start := time.Now()
	for w := range g {
		lat[w] = make([]time.Duration, 0, b.N/g+1)
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				t0 := time.Now()
				if err := op(ctx, keys[int(i)%len(keys)]); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	reportCPU(b, cpu0)
	b.StopTimer()
	b.ReportMetric(float64((serverCPU()-srv0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	q := quantiles(slices.Concat(lat...))
	b.ReportMetric(float64(q[0].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(q[1].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}
