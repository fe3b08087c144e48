package breakwater_test

import (
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

func benchBreaker(b *testing.B, p bw.Policy) *bw.Breaker {
	bs, err := bw.NewBreakers(bw.WithPolicy(p))
	if err != nil {
		b.Fatal(err)
	}
	return bs.Get("api.example.com:443")
}

// BenchmarkBreakerClosedSuccess measures admit + record success on a closed
// breaker, the hot path of every healthy call.
func BenchmarkBreakerClosedSuccess(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    bw.Policy
	}{
		{"window", bw.Window(10, time.Minute)},
		{"consecutive", bw.Consecutive(5)},
		{"failure_rate", bw.FailureRate(0.5, 20, 10*time.Second)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			br := benchBreaker(b, tc.p)
			b.ReportAllocs()
			for b.Loop() {
				p, err := br.Allow()
				if err != nil {
					b.Fatal(err)
				}
				p.Done(ok)
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			br := benchBreaker(b, tc.p)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, _ := br.Allow()
					p.Done(ok)
				}
			})
		})
	}
}

// BenchmarkBreakerRegistryClosedSuccess adds the per-key lookup.
func BenchmarkBreakerRegistryClosedSuccess(b *testing.B) {
	bs, _ := bw.NewBreakers()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := bs.Get("api.example.com:443").Allow()
			p.Done(ok)
		}
	})
}

// BenchmarkBreakerOpenRejection measures rejecting an attempt while open.
func BenchmarkBreakerOpenRejection(b *testing.B) {
	br := benchBreaker(b, bw.Consecutive(1))
	br.Trip(time.Hour)
	b.ReportAllocs()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := br.Allow(); err == nil {
				b.Fatal("admitted")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				br.Allow()
			}
		})
	})
}
