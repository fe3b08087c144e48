package breakwater

import (
	"testing"
	"time"
)

// TestPacingStartsWhenAPauseDidNotSuffice pins when a 429 starts pacing: it
// must come within a hint of the key's last pause ending, with a success in
// between. A 429 at the pause's very end, after a success in that instant,
// paces; one a full hint later only pauses.
func TestPacingStartsWhenAPauseDidNotSuffice(t *testing.T) {
	const hint = time.Second
	throttled := Outcome{Category: Throttled, Status: 429, RetryAfter: hint, HasRetryAfter: true}
	ok := Outcome{Category: Success, Status: 200}
	for _, tc := range []struct {
		name  string
		after time.Duration // from the pause's end to the second 429
		paced bool
	}{
		{"at the pause's end", 0, true},
		{"just within a hint", hint - 1, true},
		{"a full hint later", hint, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now int64
			base, err := NewPauseGates()
			if err != nil {
				t.Fatal(err)
			}
			g := base.simulated(&now)
			g.Observe("k", throttled, nil)
			now += int64(hint) // the pause ends
			g.Observe("k", ok, nil)
			now += int64(tc.after)
			g.Observe("k", throttled, nil)
			now += int64(hint) // the second pause ends
			// A paced key admits one request a hint, starting now: the
			// second of two has to wait.
			first, second := g.paced("k"), g.paced("k")
			if first != now {
				t.Fatalf("first request after the pause due at %v, want now (%v)", time.Duration(first), time.Duration(now))
			}
			if got := second > now; got != tc.paced {
				t.Errorf("second request due at %v (now %v): paced = %v, want %v", time.Duration(second), time.Duration(now), got, tc.paced)
			}
		})
	}
}

// A paced key's snapshot shows its learned rate: one per hint at first,
// doubled by a success in slow start, then cut to the last rate answered
// under a ceiling at the next 429; forgotten paceForget after its last 429.
func TestPauseSnapshotShowsTheLearnedRate(t *testing.T) {
	const hint = time.Second
	throttled := Outcome{Category: Throttled, Status: 429, RetryAfter: hint, HasRetryAfter: true}
	ok := Outcome{Category: Success, Status: 200}
	var now int64
	base, err := NewPauseGates()
	if err != nil {
		t.Fatal(err)
	}
	g := base.simulated(&now)
	snap := func() PauseSnapshot {
		t.Helper()
		s := g.Snapshot().Pauses
		if len(s) != 1 {
			t.Fatalf("pauses %+v, want one", s)
		}
		return s[0]
	}
	g.Observe("k", throttled, nil)
	if s := snap(); !s.Paused || s.Paced {
		t.Fatalf("after a lone 429: %+v, want paused, not paced", s)
	}
	now += int64(hint)
	g.Observe("k", ok, nil)
	g.Observe("k", throttled, nil) // the pause did not suffice
	if s := snap(); !s.Paced || s.PaceRate != 1 || s.PacePhase != PaceSlowStart || s.PaceCeiling != 0 {
		t.Fatalf("paced: %+v, want 1/s in slow start", s)
	}
	now += int64(hint)
	g.paced("k")
	g.Observe("k", ok, nil)
	if s := snap(); s.PaceRate != 2 || s.PacePhase != PaceSlowStart {
		t.Fatalf("after a success: %+v, want 2/s in slow start", s)
	}
	now += int64(hint)
	g.paced("k")
	g.Observe("k", throttled, nil)
	if s := snap(); s.PaceRate != 1 || s.PacePhase != PaceCeiling || s.PaceCeiling != 1.5 {
		t.Fatalf("after the overshoot's 429: %+v, want 1/s under a ceiling of 1.5/s", s)
	}
	now += int64(paceForget)
	if s := snap(); s.Paced || s.PaceRate != 0 || s.PacePhase != "" {
		t.Fatalf("%s after the last 429: %+v, want no longer paced", paceForget, s)
	}
}
