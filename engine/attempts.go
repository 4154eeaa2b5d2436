package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
)

// This file keeps the attempts of each task for the instance views
// (TaskView.Attempts). The Store has every finished attempt (the result
// log, Store.TaskHistory), and views read from the Store take them from
// there; a held instance keeps its own in memory, because the live view
// is built on the shard, which never waits for the Store.

// keptAttempts bounds the finished attempts a held instance keeps in
// memory per execution (a plain task, or one instance of a spread): the
// latest ones. max_attempts allows up to 100; a view of an instance that
// dropped some completes its list from the Store (attemptBook.trimmed).
const keptAttempts = 10

// attemptBook is what a held instance remembers of its attempts. It costs
// one small entry per execution that was dispatched (about 100 bytes, so
// some 10 MB for a 100,000-wide spread, next to the outputs the graph
// holds anyway).
type attemptBook struct {
	byRef map[graph.TaskRef]execAttempts
	// trimmed is set when some finished attempts are not in byRef: dropped
	// past keptAttempts, or recorded by a previous owner (hydration brings
	// only the latest result of each execution).
	trimmed bool
}

// execAttempts are the attempts of one execution.
type execAttempts struct {
	done       []attemptRecord // finished, oldest first
	dispatched int64           // when the attempt in flight was dispatched (Unix ns); 0: none
}

// attemptRecord is a finished attempt, compactly.
type attemptRecord struct {
	attempt           uint32
	ok                bool
	worker, err       string
	started, finished int64 // Unix ns; 0: unknown
}

// dispatched notes that an attempt of ref went out at now.
func (b *attemptBook) dispatched(ref graph.TaskRef, now time.Time) {
	if b.byRef == nil {
		b.byRef = make(map[graph.TaskRef]execAttempts)
	}
	ea := b.byRef[ref]
	ea.dispatched = now.UnixNano()
	b.byRef[ref] = ea
}

// finished notes a recorded result of ref (results of one execution come
// in attempt order).
func (b *attemptBook) finished(ref graph.TaskRef, ar port.ActionResult) {
	if b.byRef == nil {
		b.byRef = make(map[graph.TaskRef]execAttempts)
	}
	ea := b.byRef[ref]
	if len(ea.done) == keptAttempts {
		ea.done = append(ea.done[:0], ea.done[1:]...)
		b.trimmed = true
	}
	ea.done = append(ea.done, attemptRecord{
		attempt: ar.Attempt, ok: ar.OK, worker: ar.WorkerID, err: ar.Error,
		started: clock.UnixNanos(ar.StartedAt), finished: clock.UnixNanos(ar.FinishedAt),
	})
	ea.dispatched = 0
	b.byRef[ref] = ea
}

// hydrated notes the results an instance was claimed with. Attempt
// numbers of an execution run from 1 without gaps, so a first result
// above attempt 1 means earlier ones are only in the Store.
func (b *attemptBook) hydrated(pe *planEntry, results []port.ActionResult) {
	for _, r := range results {
		if ref, ok := pe.parseExecution(r.ExecutionID); ok {
			b.finished(ref, r)
		}
	}
	for _, ea := range b.byRef {
		if len(ea.done) > 0 && ea.done[0].attempt > 1 {
			b.trimmed = true
		}
	}
}

// appendAttempts appends the attempts of ref to out, for the view: the
// finished ones it keeps, then the latest if it has no result — in flight
// (dispatched when, and by which worker as its latest heartbeat says), or
// cancelled.
func (inst *instance) appendAttempts(out []AttemptView, ref graph.TaskRef, info graph.TaskInfo) []AttemptView {
	ea := inst.history.byRef[ref]
	var last uint32
	for _, r := range ea.done {
		out = append(out, AttemptView{
			Index: ref.Index, Attempt: r.attempt, WorkerID: r.worker, OK: r.ok, Error: r.err,
			StartedAt: clock.FromUnixNanos(r.started), FinishedAt: clock.FromUnixNanos(r.finished),
		})
		last = r.attempt
	}
	cur := AttemptView{StartedAt: clock.FromUnixNanos(ea.dispatched)}
	if p := inst.progress[ref]; p != nil && p.Attempt == info.Attempt {
		cur.WorkerID = p.WorkerID
	}
	return appendUnrecorded(out, ref, info, last, cur)
}

// recordedAttempt is the view of a recorded result.
func recordedAttempt(index int32, r port.ActionResult) AttemptView {
	return AttemptView{
		Index: index, Attempt: r.Attempt, WorkerID: r.WorkerID, OK: r.OK, Error: r.Error,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	}
}

// historyAttempts groups recorded results by execution, in attempt order.
func historyAttempts(pe *planEntry, hist []port.ActionResult) map[graph.TaskRef][]AttemptView {
	out := make(map[graph.TaskRef][]AttemptView)
	for _, r := range hist {
		ref, ok := pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		out[ref] = append(out[ref], recordedAttempt(ref.Index, r))
	}
	for _, as := range out {
		slices.SortFunc(as, compareAttempts)
	}
	return out
}

// appendUnrecorded appends the latest attempt of ref to out when it has
// no result (last is the latest attempt with one): cur, marked in flight
// or cancelled.
func appendUnrecorded(out []AttemptView, ref graph.TaskRef, info graph.TaskInfo, last uint32, cur AttemptView) []AttemptView {
	if info.Attempt == 0 || last >= info.Attempt {
		return out
	}
	switch info.Status {
	case graph.TaskRunning:
		cur.Running = true
	case graph.TaskCancelled:
		cur.Error = "cancelled"
	default:
		return out // resolved by a result the caller does not know (yet)
	}
	cur.Index, cur.Attempt = ref.Index, info.Attempt
	return append(out, cur)
}

// completeAttempts adds to the tasks of v (in the order of pe.order) the
// recorded attempts of hist they lack, and bounds the lists again.
func completeAttempts(v *InstanceView, pe *planEntry, hist []port.ActionResult) {
	byRef := historyAttempts(pe, hist)
	for i := range v.Tasks {
		if i >= len(pe.order) {
			break
		}
		tv, node := &v.Tasks[i], pe.order[i]
		type key struct {
			index   int32
			attempt uint32
		}
		have := make(map[key]bool, len(tv.Attempts))
		for _, a := range tv.Attempts {
			have[key{a.Index, a.Attempt}] = true
		}
		added := false
		for ref, as := range byRef {
			if ref.Node != node {
				continue
			}
			for _, a := range as {
				if !have[key{a.Index, a.Attempt}] {
					tv.Attempts = append(tv.Attempts, a)
					added = true
				}
			}
		}
		if added {
			slices.SortFunc(tv.Attempts, compareAttempts)
		}
	}
}

// boundAttempts keeps at most MaxAttemptsShown attempts per task: the
// failed and running ones first, then successful ones, in list order.
func boundAttempts(v *InstanceView) {
	for i := range v.Tasks {
		tv := &v.Tasks[i]
		n := len(tv.Attempts)
		if n <= MaxAttemptsShown {
			continue
		}
		keep := make([]AttemptView, 0, MaxAttemptsShown)
		for _, ok := range []bool{false, true} {
			for _, a := range tv.Attempts {
				if a.OK == ok && len(keep) < MaxAttemptsShown {
					keep = append(keep, a)
				}
			}
		}
		slices.SortFunc(keep, compareAttempts)
		tv.Attempts, tv.AttemptsOmitted = keep, tv.AttemptsOmitted+n-len(keep)
	}
}

func compareAttempts(a, b AttemptView) int {
	if c := cmp.Compare(a.Index, b.Index); c != 0 {
		return c
	}
	return cmp.Compare(a.Attempt, b.Attempt)
}
