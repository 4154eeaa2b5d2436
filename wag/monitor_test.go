package wag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// TestMonitorLadder drives the pure heartbeat monitor through scripts of
// heartbeats, ticks and dead events, with time as an input: interval 1s,
// slack 250ms, dead after 3 missed intervals unless the case says
// otherwise. Every script starts by tracking attempt K, generation 1, on
// worker w1 at t=0.
func TestMonitorLadder(t *testing.T) {
	type step struct {
		at     time.Duration
		op     string // hb, tick, dead, stop
		seq    uint64
		gen    uint64 // hb: default 1
		worker string // hb, dead: default w1
		want   string // hb: verdict; tick and dead: alarms as "rung(missed)" joined by ","
	}
	ms := time.Millisecond
	cases := []struct {
		name      string
		deadAfter int
		steps     []step
		replays   uint64
		gapMissed uint64
	}{
		{name: "normal", steps: []step{
			{at: 1000 * ms, op: "hb", seq: 1, want: "accepted"},
			{at: 1500 * ms, op: "tick"},
			{at: 2000 * ms, op: "hb", seq: 2, want: "accepted"},
			{at: 3200 * ms, op: "tick"},
			{at: 3210 * ms, op: "hb", seq: 3, want: "accepted"},
			{at: 4000 * ms, op: "tick"},
		}},
		{name: "one missed is logged once", steps: []step{
			{at: 1000 * ms, op: "hb", seq: 1, want: "accepted"},
			{at: 2240 * ms, op: "tick"}, // within the slack
			{at: 2260 * ms, op: "tick", want: "late(1)"},
			{at: 2900 * ms, op: "tick"},
			{at: 3000 * ms, op: "hb", seq: 2, want: "accepted recovered"},
			{at: 3500 * ms, op: "tick"},
		}},
		{name: "two missed alert, then recovery", steps: []step{
			{at: 1300 * ms, op: "tick", want: "late(1)"},
			{at: 2300 * ms, op: "tick", want: "alert(2)"},
			{at: 2400 * ms, op: "tick"},
			{at: 2500 * ms, op: "hb", seq: 1, want: "accepted recovered"},
			{at: 3000 * ms, op: "tick"},
			{at: 3800 * ms, op: "tick", want: "late(1)"},
		}},
		{name: "three missed is death, then the attempt is forgotten", steps: []step{
			{at: 1300 * ms, op: "tick", want: "late(1)"},
			{at: 2300 * ms, op: "tick", want: "alert(2)"},
			{at: 3300 * ms, op: "tick", want: "dead(3)"},
			{at: 9000 * ms, op: "tick"},
			{at: 9100 * ms, op: "hb", seq: 1, want: "stale"},
		}},
		{name: "a long silence climbs every rung in one tick", steps: []step{
			{at: 5 * time.Second, op: "tick", want: "late(4),alert(4),dead(4)"},
		}},
		{name: "dead after 2 skips the alert rung", deadAfter: 2, steps: []step{
			{at: 1300 * ms, op: "tick", want: "late(1)"},
			{at: 2300 * ms, op: "tick", want: "dead(2)"},
		}},
		{name: "replays and reorders are ignored and counted", replays: 3, gapMissed: 1, steps: []step{
			{at: 1000 * ms, op: "hb", seq: 1, want: "accepted"},
			{at: 1100 * ms, op: "hb", seq: 1, want: "replay"},
			{at: 2000 * ms, op: "hb", seq: 3, want: "accepted gap=1"},
			{at: 2100 * ms, op: "hb", seq: 2, want: "replay"},
			{at: 2200 * ms, op: "hb", seq: 3, want: "replay"},
			// A replay is no sign of life: silence still counts from 2s.
			{at: 3300 * ms, op: "tick", want: "late(1)"},
		}},
		{name: "a gap counts as missed heartbeats, not death", gapMissed: 2 + 96, steps: []step{
			{at: 1000 * ms, op: "hb", seq: 3, want: "accepted gap=2"},
			{at: 1500 * ms, op: "tick"},
			{at: 2000 * ms, op: "hb", seq: 100, want: "accepted gap=96"},
			{at: 2500 * ms, op: "tick"},
		}},
		{name: "older generation and other workers are stale", steps: []step{
			{at: 500 * ms, op: "hb", seq: 1, gen: 2, want: "stale"},
			{at: 600 * ms, op: "hb", seq: 1, worker: "w2", want: "stale"},
			{at: 700 * ms, op: "hb", seq: 1, want: "accepted"},
		}},
		{name: "a dead event short-cuts the ladder", steps: []step{
			{at: 1000 * ms, op: "hb", seq: 1, want: "accepted"},
			{at: 1100 * ms, op: "dead", worker: "w2"},
			{at: 1200 * ms, op: "dead", want: "dead(0)"},
			{at: 9000 * ms, op: "tick"},
		}},
		{name: "a stopped attempt raises nothing", steps: []step{
			{at: 500 * ms, op: "stop"},
			{at: 9000 * ms, op: "tick"},
		}},
	}
	key := port.AttemptKey{InstanceID: uuid.MustParse("00000000-0000-0000-0000-000000000001"), ExecutionID: "a", Attempt: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			deadAfter := tc.deadAfter
			if deadAfter == 0 {
				deadAfter = 3
			}
			m := newMonitor(time.Second, deadAfter)
			m.start(key, 1, "w1", t0)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.gen == 0 {
					s.gen = 1
				}
				if s.worker == "" {
					s.worker = "w1"
				}
				var got string
				switch s.op {
				case "hb":
					got = verdictString(m.observe(Heartbeat{Key: key, Generation: s.gen, WorkerID: s.worker, Seq: s.seq}, now))
				case "tick":
					got = alarmsString(m.tick(now))
				case "dead":
					got = alarmsString(m.workerDead(s.worker, now))
				case "stop":
					m.stop(key, 1)
				default:
					t.Fatalf("bad op %q", s.op)
				}
				if got != s.want {
					t.Errorf("step %d (%s at %v): got %q, want %q", i, s.op, s.at, got, s.want)
				}
			}
			if m.replays != tc.replays {
				t.Errorf("replays = %d, want %d", m.replays, tc.replays)
			}
			if m.gapMissed != tc.gapMissed {
				t.Errorf("gap-missed = %d, want %d", m.gapMissed, tc.gapMissed)
			}
		})
	}
}

// TestMonitorOrdersAlarms checks that alarms for several attempts come out
// in key order, whatever the map order.
func TestMonitorOrdersAlarms(t *testing.T) {
	m := newMonitor(time.Second, 3)
	t0 := time.Unix(0, 0)
	var keys []port.AttemptKey
	for i := range 20 {
		k := port.AttemptKey{InstanceID: uuid.MustParse("00000000-0000-0000-0000-000000000001"), ExecutionID: fmt.Sprintf("t[%02d]", i), Attempt: 1}
		keys = append(keys, k)
		m.start(k, uint64(i+1), "w", t0)
	}
	alarms := m.tick(t0.Add(1500 * time.Millisecond))
	if len(alarms) != len(keys) {
		t.Fatalf("got %d alarms, want %d", len(alarms), len(keys))
	}
	for i, a := range alarms {
		if a.Key != keys[i] || a.Rung != rungLate {
			t.Fatalf("alarm %d = %v %v, want %v late", i, a.Key.ExecutionID, a.Rung, keys[i].ExecutionID)
		}
	}
	if got := m.workerDead("w", t0.Add(2*time.Second)); len(got) != len(keys) || got[0].Key != keys[0] {
		t.Fatalf("workerDead: %d alarms", len(got))
	}
}

func verdictString(o observation) string {
	s := [...]string{hbAccepted: "accepted", hbReplay: "replay", hbStale: "stale"}[o.Verdict]
	if o.Gap > 0 {
		s += fmt.Sprintf(" gap=%d", o.Gap)
	}
	if o.Recovered {
		s += " recovered"
	}
	return s
}

func alarmsString(as []alarm) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s(%d)", a.Rung, a.Missed)
	}
	return strings.Join(parts, ",")
}
