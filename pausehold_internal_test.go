package breakwater

import (
	"math"
	"testing"
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
