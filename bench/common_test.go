package bench_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A lib is one library's way of doing a group's work. setup runs once per
// benchmark and returns a factory of workers: one worker per goroutine (a
// worker may keep per-goroutine state), each doing the work once per call.
type lib struct {
	name  string
	setup func(b *testing.B) func() func() error
}

// compare runs every lib serially (b.Loop) and in parallel (b.RunParallel),
// as Group/run=serial/lib=name and Group/run=parallel/lib=name. run.sh runs
// the serial ones at -cpu 1 and the parallel ones at -cpu 1,2. Besides
// ns/op, each reports the process's CPU time per operation (cpu-ns/op),
// which a busy, shared machine inflates far less than the wall clock.
func compare(b *testing.B, libs []lib) {
	b.Run("run=serial", func(b *testing.B) {
		for _, l := range libs {
			b.Run("lib="+l.name, func(b *testing.B) {
				work := l.setup(b)()
				b.ReportAllocs()
				cpu0, _ := cpuTime()
				for b.Loop() {
					if err := work(); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu0)
			})
		}
	})
	b.Run("run=parallel", func(b *testing.B) {
		for _, l := range libs {
			b.Run("lib="+l.name, func(b *testing.B) {
				newWorker := l.setup(b)
				var failed atomic.Pointer[error]
				fail := func(err error) { failed.CompareAndSwap(nil, &err) }
				b.ReportAllocs()
				b.ResetTimer()
				cpu0, _ := cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					work := newWorker()
					for pb.Next() {
						if err := work(); err != nil {
							fail(err)
						}
					}
				})
				reportCPU(b, cpu0)
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
			})
		}
	})
}

// reportCPU reports the process's CPU time since cpu0 per operation of b.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu, ok := cpuTime(); ok && b.N > 0 {
		b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// same returns a factory that hands every goroutine the same worker, for
// work that keeps no per-goroutine state.
func same(work func() error) func() func() error {
	return func() func() error { return work }
}

// cannedOK is an in-memory base transport that answers 200 with an empty
// body and allocates nothing beyond the response it must return.
type cannedOK struct{}

func (cannedOK) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{Status: "200 OK", StatusCode: 200, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// roundTrip sends req through rt, reads and closes the body, and checks the
// status: the work of one outbound call.
func roundTrip(rt http.RoundTripper, req *http.Request) error {
	return finish(rt.RoundTrip(req))
}

// finish reads and closes a call's response body and checks its status.
func finish(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

var (
	errAdmitted = errors.New("admitted while open")
	errRejected = errors.New("rejected while closed")
	errFailure  = errors.New("failure")
)

// comparePaired runs each of libs against base in pairs, serially (b.Loop)
// and in parallel (b.RunParallel), as Group/run=serial/lib=name and
// Group/run=parallel/lib=name: each worker makes one call of base and one
// of the lib in turn, the order swapped every pair, and times each call,
// so that whatever slows the machine for a moment slows both alike. It
// reports the lib's overhead over base as a share of base's time
// (overhead-%), which the noise common to a pair cancels out of; ns/op is
// a pair of calls.
func comparePaired(b *testing.B, base lib, libs ...lib) {
	for _, l := range libs {
		pair := func(b *testing.B) func() func(*pairTimes) error {
			newBase, newLib := base.setup(b), l.setup(b)
			return func() func(*pairTimes) error {
				baseWork, libWork := newBase(), newLib()
				return func(t *pairTimes) error { return t.pair(baseWork, libWork) }
			}
		}
		b.Run("run=serial/lib="+l.name, func(b *testing.B) {
			work := pair(b)()
			var t pairTimes
			b.ReportAllocs()
			for b.Loop() {
				if err := work(&t); err != nil {
					b.Fatal(err)
				}
			}
			t.report(b)
		})
		b.Run("run=parallel/lib="+l.name, func(b *testing.B) {
			newWorker := pair(b)
			var mu sync.Mutex
			var total pairTimes
			var failed atomic.Pointer[error]
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				work := newWorker()
				var t pairTimes
				for pb.Next() {
					if err := work(&t); err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				}
				mu.Lock()
				total.add(t)
				mu.Unlock()
			})
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			total.report(b)
		})
	}
}

// pick returns the lib of libs named name.
func pick(b *testing.B, libs []lib, name string) lib {
	for _, l := range libs {
		if l.name == name {
			return l
		}
	}
	b.Fatalf("no lib %s", name)
	return lib{}
}

// pairTimes sums the time of the base's calls and of the lib's calls of
// comparePaired.
type pairTimes struct {
	bare, lib time.Duration
	n         int
}

// pair makes one call of bare, the base, and one of lib, the base's first
// every other pair.
func (t *pairTimes) pair(bare, lib func() error) error {
	first, second, firstT, secondT := bare, lib, &t.bare, &t.lib
	if t.n%2 == 1 {
		first, second, firstT, secondT = lib, bare, &t.lib, &t.bare
	}
	t.n++
	start := time.Now()
	if err := first(); err != nil {
		return err
	}
	mid := time.Now()
	if err := second(); err != nil {
		return err
	}
	*firstT += mid.Sub(start)
	*secondT += time.Since(mid)
	return nil
}

func (t *pairTimes) add(u pairTimes) { t.bare, t.lib, t.n = t.bare+u.bare, t.lib+u.lib, t.n+u.n }

// report gives the lib's overhead over the base's calls, in per cent of
// their time.
func (t *pairTimes) report(b *testing.B) {
	if t.bare > 0 {
		b.ReportMetric(100*float64(t.lib-t.bare)/float64(t.bare), "overhead-%")
	}
}
