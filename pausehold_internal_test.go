package breakwater

import (
	"math"
	"testing"
	"time"
)

// TestPauseHoldLineByDeadline: in the line of a maintenance release, a
// call takes the turn of the first waiter due after it, and those from
// there move back one space; a call due after all of them, or without a
// deadline, goes last. The retry of a throttled call does not count as an
// arrival again.
func TestPauseHoldLineByDeadline(t *testing.T) {
	var pg pauseGate
	ep := &pg.ep
	ep.id, ep.space, ep.line = 1, 10, true
	early := &waiter{ep: 1, dl: 100, at: 10, slot: true}
	gone := &waiter{ep: 1, dl: 150, at: 20, slot: true, gone: true}
	late := &waiter{ep: 1, dl: 300, at: 30, slot: true}
	ep.waiting, ep.next, ep.arrived, ep.live = []*waiter{early, gone, late}, 40, 3, 2

	mid := pg.enqueue(5, nil, 200, true)
	if mid.at != 30 || late.at != 40 || early.at != 10 || gone.at != 20 || ep.next != 50 {
		t.Errorf("turns early %d, gone %d, new %d, late %d, next %d; want 10, 20, 30, 40, 50", early.at, gone.at, mid.at, late.at, ep.next)
	}
	if got := []*waiter{early, gone, mid, late}; len(ep.waiting) != 4 || ep.waiting[2] != mid {
		t.Errorf("line %v, want %v", ep.waiting, got)
	}
	if ep.arrived != 3 || ep.live != 3 {
		t.Errorf("arrived %d, live %d after a retry joined; want 3, 3", ep.arrived, ep.live)
	}
	if again := pg.enqueue(6, mid, 200, true); again != mid || ep.next != 50 {
		t.Errorf("a call in line already was queued again: next %d", ep.next)
	}

	last := pg.enqueue(45, nil, math.MaxInt64, false)
	if last.at != 50 || ep.next != 60 || ep.waiting[len(ep.waiting)-1] != last || ep.arrived != 4 {
		t.Errorf("a call without a deadline: turn %d, next %d, arrived %d; want last, at 50, next 60, arrived 4", last.at, ep.next, ep.arrived)
	}
	idle := pg.enqueue(100, nil, math.MaxInt64, false)
	if idle.at != 100 || ep.next != 110 {
		t.Errorf("a call after the line's end: turn %d, next %d; want now (100) and 110", idle.at, ep.next)
	}
}

// TestPauseHoldReleaseSpacing: after a pause, the held calls leave one
// and a half arrival gaps apart from a random phase, one such space after
// the probe; after maintenance, in one line by deadline, eleven twentieths
// of a gap apart from one space after the probe, a waiter due by its turn
// getting none.
func TestPauseHoldReleaseSpacing(t *testing.T) {
	const ms = int64(time.Millisecond)
	g, err := NewPauseGates()
	if err != nil {
		t.Fatal(err)
	}
	held := func(dls ...int64) (*pauseGate, []*waiter) {
		pg := &pauseGate{}
		ep := &pg.ep
		ep.id, ep.arrived, ep.firstPark = 1, 11, 100*ms // 11 calls over 1 s: 100 ms apart
		var ws []*waiter
		for _, dl := range dls {
			w := &waiter{ep: 1, dl: dl}
			ws = append(ws, w)
		}
		ep.waiting, ep.live = ws, len(ws)
		return pg, ws
	}

	pg, ws := held(math.MaxInt64, math.MaxInt64)
	pg.releaseLocked(g, 1100*ms, 1090*ms, false)
	if pg.ep.space != 150*ms || ws[1].at-ws[0].at != 150*ms || ws[0].at < 1240*ms || ws[0].at >= 1390*ms || pg.ep.line {
		t.Errorf("after a pause: space %d ms, turns at %d and %d ms; want 150 ms apart from [1240, 1390) ms, no line",
			pg.ep.space/ms, ws[0].at/ms, ws[1].at/ms)
	}

	pg, ws = held(10_000*ms, 1145*ms, 1300*ms)
	late, due, soon := ws[0], ws[1], ws[2] // before the release sorts the line
	pg.releaseLocked(g, 1100*ms, 1090*ms, true)
	if pg.ep.space != 55*ms || !pg.ep.line {
		t.Fatalf("after maintenance: space %d ms, line %v; want 55 ms and a line", pg.ep.space/ms, pg.ep.line)
	}
	if due.slot || soon.at != 1145*ms || late.at != 1200*ms || pg.ep.next != 1255*ms {
		t.Errorf("after maintenance: the call due at its turn has one: %v; turns %d and %d ms, next %d ms; want none, 1145, 1200 and 1255",
			due.slot, soon.at/ms, late.at/ms, pg.ep.next/ms)
	}
}
