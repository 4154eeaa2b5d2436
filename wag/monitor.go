package wag

import (
	"cmp"
	"slices"
	"time"

	"github.com/robonet/robonet/engine/port"
)

// rung is a step of the missed-heartbeat ladder (docs/architecture.md,
// "Heartbeats").
type rung uint8

const (
	rungOK    rung = iota // heard from in time
	rungLate              // 1 interval missed: log
	rungAlert             // 2 missed: alert, pre-select a backup worker
	rungDead              // MissedHeartbeats missed, or the worker is known dead: fail over
)

func (r rung) String() string {
	switch r {
	case rungOK:
		return "ok"
	case rungLate:
		return "late"
	case rungAlert:
		return "alert"
	case rungDead:
		return "dead"
	}
	return "rung?"
}

// alarm is an effect of the monitor: an attempt climbed a rung.
type alarm struct {
	Key     port.AttemptKey
	Gen     uint64
	Worker  string
	Rung    rung
	Missed  int           // whole intervals missed
	Silence time.Duration // since the last accepted heartbeat (or the start)
}

// verdict is what the monitor made of one heartbeat.
type verdict uint8

const (
	hbAccepted verdict = iota
	hbReplay           // seq not above the last accepted one: replay or reorder
	hbStale            // unknown attempt, older generation or another worker
)

// observation is the result of monitor.observe.
type observation struct {
	Verdict verdict
	// Gap is how many sequence numbers were skipped (5 after 3 is 1): they
	// count as missed heartbeats, but the heartbeat itself is a sign of
	// life, so a gap never kills.
	Gap uint64
	// Recovered is set when the attempt was on the late or alert rung and is
	// back to ok (so a pre-selected backup can be released).
	Recovered bool
}

// track is what the monitor knows of one running assignment.
type track struct {
	gen       uint64
	worker    string
	lastSeq   uint64
	lastHeard time.Time
	rung      rung
}

// monitor is the heartbeat ladder: a pure state machine with no goroutines,
// clocks or I/O. The Waggler feeds it events with the current time and
// applies the alarms it returns.
//
// An attempt has missed k heartbeats when its silence, less a slack of a
// quarter interval (so that a heartbeat arriving just after its due time is
// not "missed"), spans k whole intervals.
type monitor struct {
	interval  time.Duration
	slack     time.Duration
	deadAfter int
	tracks    map[port.AttemptKey]*track

	replays   uint64 // heartbeats ignored as replays or reorders
	gapMissed uint64 // heartbeats missed in sequence gaps
}

func newMonitor(interval time.Duration, deadAfter int) *monitor {
	return &monitor{
		interval:  interval,
		slack:     interval / 4,
		deadAfter: deadAfter,
		tracks:    make(map[port.AttemptKey]*track),
	}
}

// start watches an assignment from now on; it replaces any earlier
// generation of the attempt.
func (m *monitor) start(key port.AttemptKey, gen uint64, worker string, now time.Time) {
	m.tracks[key] = &track{gen: gen, worker: worker, lastHeard: now}
}

// stop forgets an assignment; a newer generation is left alone.
func (m *monitor) stop(key port.AttemptKey, gen uint64) {
	if t, ok := m.tracks[key]; ok && t.gen == gen {
		delete(m.tracks, key)
	}
}

// observe judges one heartbeat.
func (m *monitor) observe(hb Heartbeat, now time.Time) observation {
	t, ok := m.tracks[hb.Key]
	if !ok || t.gen != hb.Generation || t.worker != hb.WorkerID {
		return observation{Verdict: hbStale}
	}
	if hb.Seq <= t.lastSeq {
		m.replays++
		return observation{Verdict: hbReplay}
	}
	obs := observation{Verdict: hbAccepted, Gap: hb.Seq - t.lastSeq - 1, Recovered: t.rung != rungOK}
	m.gapMissed += obs.Gap
	t.lastSeq = hb.Seq
	t.lastHeard = now
	t.rung = rungOK
	return obs
}

// missed is the number of whole intervals missed after a silence.
func (m *monitor) missed(silence time.Duration) int {
	if silence <= m.slack {
		return 0
	}
	return int((silence - m.slack) / m.interval)
}

// threshold is the number of missed intervals that reaches r.
func (m *monitor) threshold(r rung) int {
	switch r {
	case rungLate:
		return 1
	case rungAlert:
		return 2
	default:
		return m.deadAfter
	}
}

// tick climbs the ladder at now: one alarm per rung newly reached, in
// order (late, alert, dead), attempts sorted by key. Rungs at or above the
// dead threshold are skipped; a dead attempt is forgotten.
func (m *monitor) tick(now time.Time) []alarm {
	var out []alarm
	for key, t := range m.tracks {
		silence := now.Sub(t.lastHeard)
		missed := m.missed(silence)
		for r := t.rung + 1; r <= rungDead; r++ {
			th := m.threshold(r)
			if r != rungDead && th >= m.deadAfter {
				continue
			}
			if missed < th {
				break
			}
			t.rung = r
			out = append(out, alarm{Key: key, Gen: t.gen, Worker: t.worker, Rung: r, Missed: missed, Silence: silence})
		}
		if t.rung == rungDead {
			delete(m.tracks, key)
		}
	}
	slices.SortFunc(out, compareAlarms)
	return out
}

// workerDead short-cuts the ladder: every attempt of the worker is dead now.
func (m *monitor) workerDead(worker string, now time.Time) []alarm {
	var out []alarm
	for key, t := range m.tracks {
		if t.worker != worker {
			continue
		}
		silence := now.Sub(t.lastHeard)
		out = append(out, alarm{Key: key, Gen: t.gen, Worker: worker, Rung: rungDead, Missed: m.missed(silence), Silence: silence})
		delete(m.tracks, key)
	}
	slices.SortFunc(out, compareAlarms)
	return out
}

func compareAlarms(a, b alarm) int {
	return cmp.Or(
		compareKeys(a.Key, b.Key),
		cmp.Compare(a.Rung, b.Rung),
	)
}

func compareKeys(a, b port.AttemptKey) int {
	return cmp.Or(
		slices.Compare(a.InstanceID[:], b.InstanceID[:]),
		cmp.Compare(a.ExecutionID, b.ExecutionID),
		cmp.Compare(a.Attempt, b.Attempt),
	)
}
