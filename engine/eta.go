package engine

import (
	"time"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// This file estimates the time left until a running instance finishes
// (InstanceView.ETA) from what its workers' heartbeats say. The estimate
// is made when a view is read, on the instance's shard, in one pass over
// the tasks still to finish (and the executions of a spread that runs, as
// the view itself makes); heartbeats and results pay nothing for it but
// keeping the first heartbeat of each attempt (liveProgress).
//
// The rules (docs/workflows.md, "Progress and ETA"):
//
//   - An execution in flight estimates its own time left from its latest
//     heartbeat: the ETA its worker reported, counted down since the
//     heartbeat (never below 0); without one, when the heartbeats give
//     steps (steps_total set, and steps done since the worker's first
//     heartbeat of the attempt), the steps left at the rate since that
//     first heartbeat, counted down the same way. Otherwise it has none.
//   - A plain task that runs takes its execution's estimate. A task that
//     waits (for its needs, or to be expanded) or waits to retry has no
//     estimate: nothing says how long it will take.
//   - A spread that runs: each unresolved element takes its own estimate,
//     or, without one (queued for a worker, no ETA in its heartbeats,
//     waiting to retry), the mean run time of the spread's completed
//     elements (after the wait until its retry). The spread needs that
//     work spread over the workers running its elements now (those that
//     sent a heartbeat for their attempt), but never less than its
//     longest element, retry wait included: max(longest, work / workers).
//     No completed element to take the mean from, or no worker running an
//     element, and the spread has no estimate.
//   - The instance: everything still to run runs now (nothing waits), so
//     it ends when the last of its tasks does — its ETA is the largest of
//     their estimates. One task without an estimate makes it unknown.

// liveProgress is the latest heartbeat of an execution in flight, with the
// first one its worker sent for the attempt: the step rate is measured
// between the two.
type liveProgress struct {
	port.TaskProgress
	firstAt   time.Time
	firstDone int64
}

// heard makes the live progress of a heartbeat p, after cur (nil: none):
// the first mark carries over while the attempt stays on its worker.
func heard(cur *liveProgress, p *port.TaskProgress) *liveProgress {
	lp := &liveProgress{TaskProgress: *p, firstAt: p.At, firstDone: p.StepsDone}
	if cur != nil && cur.Attempt == p.Attempt && cur.WorkerID == p.WorkerID {
		lp.firstAt, lp.firstDone = cur.firstAt, cur.firstDone
	}
	return lp
}

// etaTask is a task still to finish, as the estimate sees it.
type etaTask struct {
	// unknown: it waits (for its needs, to be expanded, or to retry a
	// plain task): nothing says how long it will take.
	unknown bool
	// spread: an expanded spread that runs; execs are its unresolved
	// elements, ran and ranFor count its completed elements whose run time
	// is known, and their run times.
	spread bool
	execs  []etaExec
	ran    int
	ranFor time.Duration
}

// etaExec is an execution still to finish: the attempt in flight of a
// plain task, or an unresolved element of a spread.
type etaExec struct {
	// progress is the latest heartbeat of the attempt in flight; nil: none
	// (not at a worker yet, or between attempts).
	progress *liveProgress
	// retryAt: between two attempts, when the next one goes out; zero:
	// an attempt is in flight.
	retryAt time.Time
}

// instanceETA is the time left until the instance whose unfinished tasks
// are tasks finishes, as of now; ok is false when it is unknown.
func instanceETA(tasks []etaTask, now time.Time) (eta time.Duration, ok bool) {
	for i := range tasks {
		left, ok := tasks[i].left(now)
		if !ok {
			return 0, false
		}
		eta = max(eta, left)
	}
	return eta, true
}

// left is the task's time left.
func (t *etaTask) left(now time.Time) (time.Duration, bool) {
	switch {
	case t.unknown:
		return 0, false
	case !t.spread:
		if len(t.execs) != 1 {
			return 0, false
		}
		return t.execs[0].left(now)
	case len(t.execs) == 0:
		return 0, true // every element resolved: the spread resolves now
	}
	var longest, total time.Duration
	workers := 0
	for _, x := range t.execs {
		if x.atWorker() {
			workers++
		}
		left, ok := x.left(now)
		var wait time.Duration // not work: it adds to the element, not to the workers' load
		if !ok {
			if t.ran == 0 {
				return 0, false
			}
			left = t.ranFor / time.Duration(t.ran)
			if !x.retryAt.IsZero() {
				wait = max(x.retryAt.Sub(now), 0)
			}
		}
		longest = max(longest, wait+left)
		total += left
	}
	if workers == 0 {
		return 0, false
	}
	return max(longest, total/time.Duration(workers)), true
}

// atWorker reports whether a worker runs the execution: it sent a
// heartbeat for the attempt in flight.
func (x *etaExec) atWorker() bool { return x.progress != nil && x.progress.WorkerID != "" }

// left is the execution's own estimate of its time left, from its latest
// heartbeat: the reported ETA, else the steps left at the rate since the
// first heartbeat; both counted down since the heartbeat.
func (x *etaExec) left(now time.Time) (time.Duration, bool) {
	p := x.progress
	if p == nil || !x.retryAt.IsZero() {
		return 0, false
	}
	since := max(now.Sub(p.At), 0) // a heartbeat stamped ahead of this clock counts as now
	switch {
	case p.ETA > 0:
		return max(p.ETA-since, 0), true
	case p.StepsTotal <= 0:
		return 0, false
	case p.StepsDone >= p.StepsTotal:
		return 0, true
	case p.StepsDone <= p.firstDone || !p.At.After(p.firstAt):
		return 0, false // no step done since the first heartbeat: no rate yet
	}
	took := p.At.Sub(p.firstAt)
	left := time.Duration(float64(took) / float64(p.StepsDone-p.firstDone) * float64(p.StepsTotal-p.StepsDone))
	return max(left-since, 0), true
}

// eta estimates the time left of a held instance, as of now (see the top
// of this file); ok is false when it is unknown, and for an instance that
// is finishing or being cancelled.
func (inst *instance) eta(now time.Time) (time.Duration, bool) {
	if inst.finishing || inst.cancelReason != "" || inst.h.terminal() != "" || inst.graphState.Terminal() {
		return 0, false
	}
	var tasks []etaTask
	for _, node := range inst.pe.order {
		ref := graph.Ref(node)
		info := inst.g.Task(ref)
		switch {
		case resolved(info.Status):
			continue
		case info.Width >= 0:
			tasks = append(tasks, inst.spreadETA(node, info.Width))
		case info.Status == graph.TaskRunning:
			tasks = append(tasks, etaTask{execs: []etaExec{{progress: inst.progress[ref]}}})
		default: // waiting, or retrying
			return 0, false // unknown whatever the others say
		}
	}
	return instanceETA(tasks, now)
}

// spreadETA is what the estimate needs of an expanded spread that runs.
func (inst *instance) spreadETA(node, width int32) etaTask {
	t := etaTask{spread: true}
	for i := range width {
		ref := graph.TaskRef{Node: node, Index: i}
		info := inst.g.Task(ref)
		switch info.Status {
		case graph.TaskRunning:
			t.execs = append(t.execs, etaExec{progress: inst.progress[ref]})
		case graph.TaskRetrying:
			t.execs = append(t.execs, etaExec{retryAt: info.Due})
		case graph.TaskCompleted:
			if done := inst.history.byRef[ref].done; len(done) > 0 {
				if r := done[len(done)-1]; r.ok && r.started > 0 && r.finished >= r.started {
					t.ran++
					t.ranFor += time.Duration(r.finished - r.started)
				}
			}
		}
	}
	return t
}

// resolved reports whether a task (or a spread's element) with this
// status is over.
func resolved(st graph.TaskStatus) bool {
	switch st {
	case graph.TaskCompleted, graph.TaskFailed, graph.TaskSkipped, graph.TaskCancelled:
		return true
	}
	return false
}
