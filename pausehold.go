package breakwater

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Releasing held calls without a herd. When a pause or an overload hold
// ends, the calls that waited do not all reach the upstream in the same
// instant. One probe goes first: after a pause, the first waiter to see it
// end, while the others wait for its answer (the next waiter probes at
// once if the probe never reached the upstream, and at the latest after
// pauseProbeLease); after an overload hold, the probe whose answer ended
// it. Once the probe is answered with anything but a new hold, the held
// calls leave in the order they arrived. After a pause (a 429), they leave
// from a random phase (so that clients held together do not come back
// together), spaced one and a half times as far apart as they arrived,
// while calls arriving meanwhile go straight through: the upstream sees at
// most the offered load plus two thirds of it, never a herd, and a strict
// limiter that answered the probe is not met with more than it can take.
// After an overload hold (503s with a hint: maintenance), every call joins
// one line, the held ones first and the arrivals behind them, and the line
// moves twice as fast as the calls arrived: the upstream sees at most twice
// the offered load, and the held calls, oldest first, each leave before
// the deadline they were offered with (the k-th held call leaves k halves
// of the arrival spacing after the probe, a whole spacing sooner than its
// deadline when deadlines are alike). The retry of a call that was itself
// throttled joins the held calls' line. A new hold stops the release; the
// calls still waiting keep their order.
const (
	pauseProbeLease = time.Second
	minReleaseSpace = time.Millisecond
	maxReleaseSpace = 250 * time.Millisecond
)

// episode is the calls a gate held, from the start of a hold until the
// last of them left; guarded by the gate's mutex.
type episode struct {
	id        uint64    // 0 until a call is held
	arrived   int       // calls held, for their arrival rate
	firstPark int64     // when the first was
	waiting   []*waiter // held calls in arrival order, some of them gone
	live      int       // waiting calls not gone
	probeAt   int64     // when the probe after a pause went; 0: none yet
	relStart  int64     // when the release began; 0: not yet
	space     int64     // between two held calls leaving the gate
	next      int64     // during a release: the first slot not taken
	// line: the release follows an overload hold, and calls arriving
	// during it join the held calls' line.
	line bool
}

// waiter is one held call.
type waiter struct {
	ep   uint64 // the episode it is held in
	dl   int64  // its call's deadline (registry nanoseconds; math.MaxInt64: none)
	at   int64  // its turn to leave, once the release began (slot)
	slot bool
	gone bool // it left the gate, or gave up
}

// gateDecision is what a gate tells one call.
type gateDecision struct {
	wait  bool  // wait until at (or a change), else go now
	park  bool  // a call that waits is held (takes its place in line)
	take  bool  // a call that waits or goes takes the release slot at
	line  bool  // a call that waits joins the line of a maintenance release by its deadline
	probe bool  // a call that goes is the probe after a pause
	at    int64 // registry nanoseconds
	rem   int64 // how long the hold still lasts, for the deadline check
}

// admitLocked decides for the call w (nil while it was not held) at now;
// held marks the retry of a call that was throttled. The caller parks it or
// takes its slot as the decision says. An attempt let through is counted
// by the overload admission. pg.mu must be held.
func (pg *pauseGate) admitLocked(g *PauseGates, now int64, w *waiter, held bool) gateDecision {
	d := pg.decideLocked(g, now, w, held)
	if o := pg.over; o != nil && !d.wait {
		o.sent(now)
	}
	return d
}

func (pg *pauseGate) decideLocked(g *PauseGates, now int64, w *waiter, held bool) gateDecision {
	ep := &pg.ep
	if ep.relStart != 0 && now >= ep.next && ep.live == 0 {
		*ep = episode{} // every held call has left
	}
	if until := pg.until.Load(); until > now {
		return gateDecision{wait: true, park: true, at: until, rem: until - now}
	}
	if o := pg.over; o != nil && o.held {
		if o.probe(now) {
			g.busyUntil(pg, o.askUntil())
			return gateDecision{}
		}
		if o.probeOut {
			// Its answer, which may end the hold, usually comes within a
			// round trip: wait for it, within the deadline.
			return gateDecision{wait: true, park: true, at: o.nextProbe}
		}
		return gateDecision{wait: true, park: true, at: o.nextProbe, rem: o.nextProbe - now}
	}
	switch {
	case ep.live == 0 && ep.relStart == 0:
		return gateDecision{}
	case ep.relStart == 0: // the pause is over: one probe first
		if ep.probeAt == 0 || now >= ep.probeAt+int64(pauseProbeLease) {
			ep.probeAt = now
			g.busyUntil(pg, now+int64(pauseProbeLease))
			return gateDecision{probe: true}
		}
		// Its answer usually comes within a round trip: wait for it
		// whatever the deadline, within the deadline.
		return gateDecision{wait: true, park: true, at: ep.probeAt + int64(pauseProbeLease)}
	case w != nil && w.slot && w.ep == ep.id: // held: its turn, in arrival order
		return gateDecision{wait: now < w.at, at: w.at, rem: max(0, w.at-now)}
	case ep.line && now < ep.next: // any call during a maintenance release: in the line
		return gateDecision{wait: true, line: true}
	case held && now < ep.next: // a throttled call's retry: in the held line
		return gateDecision{wait: true, take: true, at: ep.next, rem: ep.next - now}
	}
	return gateDecision{}
}

// park holds the call w (nil: a new one), due by dl, in the current
// episode and returns it; retry marks the retry of a throttled call, which
// the offered rate does not count again. pg.mu must be held.
func (pg *pauseGate) park(now int64, w *waiter, dl int64, retry bool) *waiter {
	ep := &pg.ep
	if w != nil && !w.gone && w.ep == ep.id && ep.id != 0 {
		return w
	}
	if ep.id == 0 {
		pg.episodes++
		ep.id, ep.firstPark = pg.episodes, now
	}
	w = &waiter{ep: ep.id, dl: dl}
	if !retry {
		ep.arrived++
	}
	ep.live++
	ep.waiting = append(ep.waiting, w)
	return w
}

// enqueue puts the call w (nil: a new one; retry as for park), due by dl, in the line of a
// maintenance release, by its deadline: it takes the turn of the first
// waiter due later, and each waiter from there moves back one space.
// pg.mu must be held.
func (pg *pauseGate) enqueue(now int64, w *waiter, dl int64, retry bool) *waiter {
	ep := &pg.ep
	if w != nil && !w.gone && w.ep == ep.id && w.slot {
		return w // in line already
	}
	w = pg.park(now, nil, dl, retry)
	ep.waiting = ep.waiting[:len(ep.waiting)-1] // park appended it
	i := len(ep.waiting)
	for j, o := range ep.waiting {
		if !o.gone && o.slot && o.dl > dl {
			i = j
			break
		}
	}
	w.slot = true
	if i == len(ep.waiting) {
		w.at = max(ep.next, now)
	} else {
		w.at = ep.waiting[i].at
		for _, o := range ep.waiting[i:] {
			if !o.gone && o.slot {
				o.at += ep.space
			}
		}
	}
	ep.next = max(ep.next, now) + ep.space
	ep.waiting = slices.Insert(ep.waiting, i, w)
	return w
}

// leave records that the held call w left the gate or gave up. pg.mu must
// be held.
func (pg *pauseGate) leave(w *waiter) {
	if w != nil && !w.gone {
		w.gone = true
		if w.ep == pg.ep.id {
			pg.ep.live--
		}
	}
}

// holdLocked stops a release in progress: the key is held again, and the
// calls still waiting keep their order. pg.mu must be held.
func (pg *pauseGate) holdLocked() {
	ep := &pg.ep
	ep.relStart, ep.probeAt = 0, 0
	kept := ep.waiting[:0]
	for _, w := range ep.waiting {
		if !w.gone {
			w.slot = false
			kept = append(kept, w)
		}
	}
	clear(ep.waiting[len(kept):])
	ep.waiting = kept
}

// probeLost lets the next waiter probe at once: the probe after a pause
// did not reach the upstream, or got no answer.
func (g *PauseGates) probeLost(key string) {
	pg, ok := g.gate(key)
	if !ok {
		return
	}
	pg.mu.Lock()
	if ep := &pg.ep; ep.probeAt != 0 && ep.relStart == 0 {
		ep.probeAt = 0
		pg.changedLocked()
	}
	pg.mu.Unlock()
}

// releaseLocked starts releasing the episode's waiters: the probe that
// went at probe was answered at now. The first of them leaves one space
// after the probe; after an overload hold (maintenance), the calls leave
// in one line at twice their arrival rate. pg.mu must be held.
func (pg *pauseGate) releaseLocked(g *PauseGates, now, probe int64, maintenance bool) {
	ep := &pg.ep
	if ep.live == 0 || ep.relStart != 0 {
		return
	}
	var phase int64
	ep.space = int64(minReleaseSpace)
	if n := int64(ep.arrived); n > 1 {
		gap := (now - ep.firstPark) / (n - 1) // n calls arrived over now-firstPark
		if maintenance {                      // a little over half the gap: at most twice the offered load in any window
			ep.space = min(max(gap*11/20, int64(minReleaseSpace)), int64(maxReleaseSpace))
		} else {
			ep.space = min(max(3*gap/2, int64(minReleaseSpace)), int64(maxReleaseSpace))
			phase = rand.Int64N(ep.space)
		}
	}
	ep.line = maintenance
	if maintenance { // earliest deadline first
		slices.SortStableFunc(ep.waiting, func(a, b *waiter) int { return cmp.Compare(a.dl, b.dl) })
	}
	ep.relStart = max(now, probe+ep.space)
	ep.next = ep.relStart + phase
	for _, w := range ep.waiting {
		// A turn after maintenance goes to a waiter that can still use it:
		// one due before it will be refused.
		if !w.gone && (!maintenance || w.dl > ep.next) {
			w.at, w.slot = ep.next, true
			ep.next += ep.space
		}
	}
	g.busyUntil(pg, ep.next+1)
	pg.changedLocked()
}

// waitSlow is wait while some gate holds something; latest is the value of
// g.latest that sent the call here.
func (g *PauseGates) waitSlow(ctx context.Context, key string, dl time.Time, latest int64, held bool) (probe bool, err error) {
	if g.now() >= latest {
		g.latest.CompareAndSwap(latest, 0)
		return false, nil
	}
	pg, ok := g.gate(key)
	if !ok {
		return false, nil
	}
	var w *waiter
	for {
		t := time.Now()
		now := int64(t.Sub(g.start))
		left, bounded := timeLeft(ctx, dl, t)
		due := int64(math.MaxInt64)
		if bounded {
			due = now + int64(left)
		}
		pg.mu.Lock()
		d := pg.admitLocked(g, now, w, held)
		if d.line {
			w, held = pg.enqueue(now, w, due, held), false
			d.at, d.rem = w.at, max(0, w.at-now)
			g.busyUntil(pg, pg.ep.next+1)
			pg.changedLocked() // the waiters behind it moved back
		}
		if rem := time.Duration(d.rem); d.wait && (g.cfg.maxWait == 0 || rem > g.cfg.maxWait || bounded && rem >= left) {
			pg.leave(w)
			pg.mu.Unlock()
			return false, rejected(ErrPaused, key, g.wall(now+d.rem))
		}
		if d.take {
			pg.ep.next = d.at + pg.ep.space
			g.busyUntil(pg, pg.ep.next+1)
			w, held = &waiter{ep: pg.ep.id, at: d.at, slot: true, gone: true}, false
		}
		if !d.wait {
			pg.leave(w)
			w = nil
			at := pg.paceLocked(g, now)
			if at <= now {
				pg.mu.Unlock()
				return d.probe, nil
			}
			// The key is paced (pacer.go) and its next slot is at at:
			// wait for it, or for a change of the gate (a new rate, a
			// hold), and look again.
			if bounded && time.Duration(at-now) >= left {
				pg.mu.Unlock()
				return false, rejected(ErrPaused, key, g.wall(at))
			}
			wake := pg.waitChanLocked()
			pg.mu.Unlock()
			timer := time.NewTimer(time.Duration(at - now))
			select {
			case <-timer.C:
			case <-wake:
				timer.Stop()
			case <-ctx.Done():
				timer.Stop()
				return false, ctx.Err()
			}
			continue
		}
		if d.park {
			w = pg.park(now, w, due, held)
		}
		wake := pg.waitChanLocked()
		pg.mu.Unlock()
		wait := time.Duration(d.at - now)
		if bounded && left < wait { // waiting for a probe's answer, within the deadline
			wait = left
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
			if bounded && wait == left {
				pg.mu.Lock()
				pg.leave(w)
				pg.mu.Unlock()
				return false, rejected(ErrPaused, key, g.wall(d.at))
			}
		case <-wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			pg.mu.Lock()
			pg.leave(w)
			pg.mu.Unlock()
			return false, ctx.Err()
		}
	}
}
