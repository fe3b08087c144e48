package bench_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	bw "github.com/breakwater-go/breakwater"
	"github.com/eapache/go-resiliency/breaker"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"
)

// The work: ask a breaker to admit one call and report its outcome. Each
// library is used the way its documentation shows (gobreaker's Execute and
// its two-step Allow; failsafe-go's permit API and its executor; hystrix-go's
// Do; go-resiliency's Run), with its default or documented settings.

var okOutcome = bw.Outcome{Category: bw.Success, Status: 200}

func bwBreaker(b *testing.B) *bw.Breaker {
	bs, err := bw.NewBreakers() // Window(10, auto), the default
	if err != nil {
		b.Fatal(err)
	}
	return bs.Get("api.example.com:443")
}

func failsafeAnyBreaker(delay time.Duration) circuitbreaker.CircuitBreaker[any] {
	return circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).WithDelay(delay).WithSuccessThreshold(2).Build()
}

// hystrixCommand configures a fresh hystrix-go command, which lives in
// hystrix-go's process-wide registry.
var hystrixSeq atomic.Int64

func hystrixCommand(cfg hystrix.CommandConfig) string {
	name := fmt.Sprintf("bench-%d", hystrixSeq.Add(1))
	cfg.MaxConcurrentRequests = 1 << 16 // never the limit here
	hystrix.ConfigureCommand(name, cfg)
	return name
}

func nop() error                  { return nil }
func nopAny() (any, error)        { return nil, nil }
func nopUnit() (struct{}, error)  { return struct{}{}, nil }
func failUnit() (struct{}, error) { return struct{}{}, errFailure }
func wantOpen(err error, target error) error {
	if err == nil {
		return errAdmitted
	}
	if err != target {
		return err
	}
	return nil
}

// BenchmarkBreakerClosed: admit and record a success on a closed breaker,
// the cost every healthy call pays.
func BenchmarkBreakerClosed(b *testing.B) {
	compare(b, []lib{
		{"breakwater", func(b *testing.B) func() func() error {
			br := bwBreaker(b)
			return same(func() error {
				p, err := br.Allow()
				if err != nil {
					return err
				}
				p.Done(okOutcome)
				return nil
			})
		}},
		{"gobreaker", func(b *testing.B) func() func() error {
			cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
			return same(func() error {
				_, err := cb.Execute(nopUnit)
				return err
			})
		}},
		{"gobreaker-twostep", func(b *testing.B) func() func() error {
			cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
			return same(func() error {
				done, err := cb.Allow()
				if err != nil {
					return err
				}
				done(nil)
				return nil
			})
		}},
		{"failsafe-go", func(b *testing.B) func() func() error {
			cb := failsafeAnyBreaker(time.Minute)
			return same(func() error {
				if !cb.TryAcquirePermit() {
					return errRejected
				}
				cb.RecordSuccess()
				return nil
			})
		}},
		{"failsafe-go-executor", func(b *testing.B) func() func() error {
			ex := failsafe.With[any](failsafeAnyBreaker(time.Minute))
			return same(func() error {
				_, err := ex.Get(nopAny)
				return err
			})
		}},
		{"hystrix-go", func(b *testing.B) func() func() error {
			name := hystrixCommand(hystrix.CommandConfig{})
			return same(func() error { return hystrix.Do(name, nop, nil) })
		}},
		{"go-resiliency", func(b *testing.B) func() func() error {
			br := breaker.New(3, 1, 5*time.Second)
			return same(func() error { return br.Run(nop) })
		}},
	})
}

// BenchmarkBreakerOpen: reject a call on an open breaker, the cost of
// failing fast during an outage.
func BenchmarkBreakerOpen(b *testing.B) {
	compare(b, []lib{
		{"breakwater", func(b *testing.B) func() func() error {
			br := bwBreaker(b)
			br.Trip(time.Hour)
			return same(func() error {
				_, err := br.Allow()
				if err == nil {
					return errAdmitted
				}
				return nil
			})
		}},
		{"gobreaker", func(b *testing.B) func() func() error {
			cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench", Timeout: time.Hour})
			for cb.State() != gobreaker.StateOpen {
				_, _ = cb.Execute(failUnit)
			}
			return same(func() error {
				_, err := cb.Execute(nopUnit)
				return wantOpen(err, gobreaker.ErrOpenState)
			})
		}},
		{"gobreaker-twostep", func(b *testing.B) func() func() error {
			cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench", Timeout: time.Hour})
			for cb.State() != gobreaker.StateOpen {
				done, _ := cb.Allow()
				done(errFailure)
			}
			return same(func() error {
				_, err := cb.Allow()
				return wantOpen(err, gobreaker.ErrOpenState)
			})
		}},
		{"failsafe-go", func(b *testing.B) func() func() error {
			cb := failsafeAnyBreaker(time.Hour)
			cb.Open()
			return same(func() error {
				if cb.TryAcquirePermit() {
					return errAdmitted
				}
				return nil
			})
		}},
		{"failsafe-go-executor", func(b *testing.B) func() func() error {
			cb := failsafeAnyBreaker(time.Hour)
			cb.Open()
			ex := failsafe.With[any](cb)
			return same(func() error {
				_, err := ex.Get(nopAny)
				return wantOpen(err, circuitbreaker.ErrOpen)
			})
		}},
		{"hystrix-go", func(b *testing.B) func() func() error {
			name := hystrixCommand(hystrix.CommandConfig{RequestVolumeThreshold: 1, ErrorPercentThreshold: 1, SleepWindow: int(time.Hour / time.Millisecond)})
			c, _, _ := hystrix.GetCircuit(name)
			// hystrix-go counts outcomes asynchronously: fail until it opens.
			for deadline := time.Now().Add(5 * time.Second); !c.IsOpen(); {
				if time.Now().After(deadline) {
					b.Fatal("hystrix-go circuit did not open")
				}
				_ = hystrix.Do(name, func() error { return errFailure }, nil)
				time.Sleep(time.Millisecond)
			}
			return same(func() error {
				return wantOpen(hystrix.Do(name, nop, nil), hystrix.ErrCircuitOpen)
			})
		}},
		{"go-resiliency", func(b *testing.B) func() func() error {
			br := breaker.New(1, 1, time.Hour)
			_ = br.Run(func() error { return errFailure })
			return same(func() error { return wantOpen(br.Run(nop), breaker.ErrBreakerOpen) })
		}},
	})
}
