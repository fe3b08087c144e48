package breakwater_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// TestHedgeEventsSayWhenAndWhichAnswered: each hedge sent is reported as
// it is sent, before its attempt ends, with its number and how long after
// the round's first attempt it went; the call's end names the attempt
// whose response it returned, hedge or not.
func TestHedgeEventsSayWhenAndWhichAnswered(t *testing.T) {
	hang := breakwatertest.Step{Hang: true}
	for _, tc := range []struct {
		name   string
		steps  []breakwatertest.Step
		events string // hedges and attempts in order: hedge:n:delay, attempt:n[h]
		winner int
		hedge  bool
	}{
		{"second hedge answers", []breakwatertest.Step{hang, hang, {Body: []byte("3")}},
			"hedge:2:10ms hedge:3:20ms attempt:3h", 3, true},
		{"first attempt answers", []breakwatertest.Step{{Delay: 25 * time.Millisecond, Body: []byte("1")}, hang, hang},
			"hedge:2:10ms hedge:3:20ms attempt:1", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Three quick calls first leave the hedge budget room for
				// two hedges of the fourth.
				quick := breakwatertest.Step{Body: []byte("q")}
				u := breakwatertest.NewPipeUpstream(t, append([]breakwatertest.Step{quick, quick, quick}, tc.steps...)...)
				var (
					mu     sync.Mutex
					events []string
					end    bw.Event
				)
				obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
					mu.Lock()
					defer mu.Unlock()
					switch e.Kind {
					case bw.EventHedge:
						if !e.Hedge || e.Key != upstreamKey {
							t.Errorf("hedge event %+v", e)
						}
						events = append(events, fmt.Sprintf("hedge:%d:%s", e.Attempt, e.Delay))
					case bw.EventAttempt:
						if e.Category == bw.Canceled {
							return // the losers, reported as they end
						}
						h := ""
						if e.Hedge {
							h = "h"
						}
						events = append(events, fmt.Sprintf("attempt:%d%s", e.Attempt, h))
					case bw.EventCallEnd:
						end = e
					}
				})
				tr := newTransport(t, u.Transport(), bw.WithObserver(obs), bw.WithMaxAttempts(3),
					bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, MaxHedges: 2, Budget: 1}), bw.WithRetryBudget(1, 10, time.Second))
				for range 3 {
					if r := get(tr); r.err != nil || r.status != 200 {
						t.Fatalf("quick call: %+v", r)
					}
				}
				synctest.Wait()
				mu.Lock()
				events = nil
				mu.Unlock()
				if r := get(tr); r.err != nil || r.status != 200 {
					t.Fatalf("call: %+v", r)
				}
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if got := strings.Join(events, " "); got != tc.events {
					t.Errorf("events %q, want %q", got, tc.events)
				}
				if hedges := strings.Count(tc.events, "hedge:"); end.Attempts-end.Retries-1 != hedges {
					t.Errorf("call end: %d attempts, %d retries for %d hedges", end.Attempts, end.Retries, hedges)
				}
				if end.Attempt != tc.winner || end.Hedge != tc.hedge || end.Attempts != 3 || end.Retries != 0 {
					t.Errorf("call end: attempt %d hedge %v attempts %d retries %d, want attempt %d hedge %v, 3 attempts, no retry",
						end.Attempt, end.Hedge, end.Attempts, end.Retries, tc.winner, tc.hedge)
				}
			})
		})
	}
}

// TestCallEndNamesNoAttemptForAnError: a call that returns an error names
// no attempt as its answer.
func TestCallEndNamesNoAttemptForAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		var end bw.Event
		obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			if e.Kind == bw.EventCallEnd {
				end = e
			}
		})
		tr := newTransport(t, u.Transport(), bw.WithObserver(obs), bw.WithMaxAttempts(1), bw.WithCallTimeout(time.Second))
		if r := get(tr); r.err == nil {
			t.Fatalf("call: %+v", r)
		}
		if end.Kind != bw.EventCallEnd || end.Attempt != 0 || end.Attempts != 1 {
			t.Fatalf("call end %+v, want attempt 0 of 1", end)
		}
	})
}

// TestLogObserverLogsHedgesAtDebug: a hedge sent is logged at Debug with
// its number and delay, and not at all above Debug.
func TestLogObserverLogsHedgesAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf strings.Builder
		var mu sync.Mutex
		l := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{
			Level: level,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		bw.LogObserver(l, 0).Observe(context.Background(), bw.Event{Kind: bw.EventHedge, Key: "svc", Attempt: 2, Delay: 40 * time.Millisecond, Hedge: true})
		want := ""
		if level == slog.LevelDebug {
			want = "level=DEBUG msg=\"breakwater: hedging\" key=svc attempt=2 after=40ms\n"
		}
		if buf.String() != want {
			t.Errorf("at %s, logged %q, want %q", level, buf.String(), want)
		}
	}
}
