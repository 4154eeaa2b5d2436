package engine

import (
	"testing"
	"time"

	"github.com/robonet/robonet/engine/port"
)

func TestInstanceETA(t *testing.T) {
	now := time.Unix(1000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	// beat is a heartbeat from worker w1, received `at` ago.
	beat := func(at time.Duration, eta time.Duration) *liveProgress {
		return &liveProgress{TaskProgress: port.TaskProgress{WorkerID: "w1", ETA: eta, At: ago(at)}, firstAt: ago(at)}
	}
	// steps is a heartbeat at done of total steps, received `at` ago,
	// the worker's first for the attempt having said firstDone `first`
	// ago.
	steps := func(at time.Duration, done, total int64, first time.Duration, firstDone int64) *liveProgress {
		return &liveProgress{TaskProgress: port.TaskProgress{WorkerID: "w1", StepsDone: done, StepsTotal: total, At: ago(at)},
			firstAt: ago(first), firstDone: firstDone}
	}
	running := func(p *liveProgress) etaTask { return etaTask{execs: []etaExec{{progress: p}}} }
	spread := func(ran int, ranFor time.Duration, execs ...etaExec) etaTask {
		return etaTask{spread: true, execs: execs, ran: ran, ranFor: ranFor}
	}
	queued := etaExec{}
	waiting := etaTask{unknown: true}
	const unknown = time.Duration(-1)

	for _, c := range []struct {
		name  string
		tasks []etaTask
		want  time.Duration // unknown: no estimate
	}{
		{"nothing left to run", nil, 0},
		{"one task with a fresh ETA", []etaTask{running(beat(0, 90*time.Second))}, 90 * time.Second},
		{"the ETA counts down since the heartbeat", []etaTask{running(beat(10*time.Second, 90*time.Second))}, 80 * time.Second},
		{"an overdue ETA is 0, not negative", []etaTask{running(beat(2*time.Minute, 90*time.Second))}, 0},
		{"a heartbeat stamped ahead of the clock counts as now", []etaTask{running(beat(-5*time.Second, time.Minute))}, time.Minute},
		{"parallel tasks: the slowest", []etaTask{running(beat(0, 10*time.Second)), running(beat(0, 70*time.Second))}, 70 * time.Second},
		{"a running task not heard from yet", []etaTask{running(beat(0, time.Minute)), running(nil)}, unknown},
		{"a heartbeat without ETA nor steps", []etaTask{running(&liveProgress{TaskProgress: port.TaskProgress{WorkerID: "w1", At: now}})}, unknown},
		// A chain a → b: a runs with an ETA, b waits for it; how long b
		// takes is unknown, so is the instance's ETA.
		{"a chain whose later task waits", []etaTask{running(beat(0, 30*time.Second)), waiting}, unknown},
		{"a plain task waiting to retry", []etaTask{{unknown: true}}, unknown},

		// 4 of 10 steps done, 1 of them in the 20s since the first
		// heartbeat (which said 3): 20s a step, 6 left, heartbeat 5s ago.
		{"steps at the rate since the first heartbeat", []etaTask{running(steps(5*time.Second, 4, 10, 25*time.Second, 3))}, 115 * time.Second},
		{"steps with a reported ETA: the ETA wins", []etaTask{running(&liveProgress{
			TaskProgress: port.TaskProgress{WorkerID: "w1", StepsDone: 4, StepsTotal: 10, ETA: 7 * time.Second, At: now},
			firstAt:      ago(time.Hour), firstDone: 0})}, 7 * time.Second},
		{"steps, none since the first heartbeat: no rate", []etaTask{running(steps(0, 4, 10, 20*time.Second, 4))}, unknown},
		{"steps without a total", []etaTask{running(steps(0, 4, 0, 20*time.Second, 1))}, unknown},
		{"every step done", []etaTask{running(steps(0, 10, 10, 20*time.Second, 10))}, 0},
		{"a slow rate counted down past the end", []etaTask{running(steps(time.Hour, 5, 10, time.Hour+10*time.Second, 0))}, 0},

		// Spreads. 2 completed elements took 10s and 20s: 15s each.
		{"a spread: its elements' ETAs over one worker each",
			[]etaTask{spread(2, 30*time.Second, etaExec{progress: beat(0, 12*time.Second)}, etaExec{progress: beat(0, 4*time.Second)})}, 12 * time.Second},
		// Two workers run 8s and 4s; three queued elements at 15s each:
		// (8+4+45)/2 = 28.5s of work per worker.
		{"a spread with queued elements: the mean of its completed ones, over its workers",
			[]etaTask{spread(2, 30*time.Second, etaExec{progress: beat(0, 8*time.Second)}, etaExec{progress: beat(0, 4*time.Second)}, queued, queued, queued)},
			28500 * time.Millisecond},
		// One worker ran a 10s element; an element runs at it with no
		// ETA (counts the mean), two queued: 30s on one worker.
		{"a spread whose running element has no ETA of its own",
			[]etaTask{spread(1, 10*time.Second, etaExec{progress: beat(0, 0)}, queued, queued)}, 30 * time.Second},
		{"a spread never less than its longest element",
			[]etaTask{spread(1, 10*time.Second, etaExec{progress: beat(0, 50*time.Second)}, etaExec{progress: beat(0, 1*time.Second)}, etaExec{progress: beat(0, 1*time.Second)})},
			50 * time.Second},
		{"a spread element waiting to retry: the wait, then the mean",
			[]etaTask{spread(1, 10*time.Second, etaExec{progress: beat(0, 2*time.Second)}, etaExec{retryAt: now.Add(5 * time.Second)})}, 15 * time.Second},
		{"a spread with queued elements and none completed", []etaTask{spread(0, 0, etaExec{progress: beat(0, 8*time.Second)}, queued)}, unknown},
		{"a spread with no element at a worker", []etaTask{spread(3, 30*time.Second, queued, queued)}, unknown},
		{"a spread with elements that only waited (no worker)", []etaTask{spread(3, 30*time.Second, etaExec{
			progress: &liveProgress{TaskProgress: port.TaskProgress{Message: "waiting: no node serves work", At: now}}})}, unknown},
		{"a spread whose elements all resolved", []etaTask{spread(3, 30*time.Second)}, 0},
		{"a spread next to a task that waits", []etaTask{spread(1, time.Second, etaExec{progress: beat(0, time.Second)}), waiting}, unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := instanceETA(c.tasks, now)
			switch {
			case c.want == unknown && ok:
				t.Fatalf("ETA %s, want unknown", got)
			case c.want != unknown && !ok:
				t.Fatalf("ETA unknown, want %s", c.want)
			case ok && got != c.want:
				t.Fatalf("ETA %s, want %s", got, c.want)
			}
		})
	}
}

// The first heartbeat of an attempt is kept while its worker runs it, and
// taken again when the attempt moves to another worker or a new attempt
// starts.
func TestHeardKeepsTheFirstHeartbeat(t *testing.T) {
	t0 := time.Unix(100, 0)
	p := func(attempt uint32, worker string, done int64, at time.Duration) *port.TaskProgress {
		return &port.TaskProgress{AttemptKey: port.AttemptKey{Attempt: attempt}, WorkerID: worker, StepsDone: done, At: t0.Add(at)}
	}
	lp := heard(nil, p(1, "w1", 2, 0))
	lp = heard(lp, p(1, "w1", 5, time.Second))
	if lp.firstDone != 2 || !lp.firstAt.Equal(t0) || lp.StepsDone != 5 {
		t.Fatalf("same attempt, same worker: %+v", lp)
	}
	if moved := heard(lp, p(1, "w2", 1, 2*time.Second)); moved.firstDone != 1 || !moved.firstAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("moved to another worker: %+v", moved)
	}
	if next := heard(lp, p(2, "w1", 0, 3*time.Second)); next.firstDone != 0 || !next.firstAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("a new attempt: %+v", next)
	}
}
