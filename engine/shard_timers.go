package engine

import (
	"container/heap"
	"time"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

type timerEntry struct {
	at       time.Time
	inst     *instance
	deadline bool        // the workflow deadline; else a graph timer
	park     bool        // a park check (waits.go); else a graph timer
	t        graph.Timer // graph timer
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	return x
}

// pushTimer adds an entry to the shard's timers.
func (s *shard) pushTimer(te timerEntry) {
	te.inst.timers++
	heap.Push(&s.timers, te)
}

// dropTimers forgets the entries of an instance that left memory: at
// once when they are many (a parked instance's wait may be due in days,
// and its entries would keep the instance's memory until then), by
// rebuilding the heap without the entries of instances gone.
func (s *shard) dropTimers(inst *instance) {
	s.deadTimers += inst.timers
	if s.deadTimers < 1024 || 2*s.deadTimers < len(s.timers) {
		return
	}
	live := s.timers[:0]
	for _, te := range s.timers {
		if s.insts[te.inst.id] == te.inst {
			live = append(live, te)
		} else {
			te.inst.timers--
		}
	}
	clear(s.timers[len(live):])
	s.timers = live
	heap.Init(&s.timers)
	s.deadTimers = 0
}

// arm points the shard's timer at the earliest entry.
func (s *shard) arm() {
	if len(s.timers) == 0 {
		if !s.armed.IsZero() {
			s.timer.Stop()
			s.armed = time.Time{}
		}
		return
	}
	at := s.timers[0].at
	if s.armed.Equal(at) {
		return
	}
	s.timer.Reset(at.Sub(s.now()))
	s.armed = at
}

// fireDue handles every timer that is due. Timers of instances that left
// are dropped here; the graph ignores timers that no longer apply.
func (s *shard) fireDue() {
	now := s.now()
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		te := heap.Pop(&s.timers).(timerEntry)
		inst := te.inst
		inst.timers--
		if s.insts[inst.id] != inst {
			s.deadTimers--
			continue
		}
		if inst.finishing {
			continue
		}
		switch {
		case te.deadline:
			s.deadlineExceeded(inst, now)
		case te.park:
			s.parkCheck(inst, now)
		case inst.parking:
			// The park's write is in flight: the snapshot it writes holds
			// this timer, and the instance is claimed again when it is due.
		case inst.paused:
			inst.heldTimers = append(inst.heldTimers, te.t) // fired on resume
		default:
			s.fire(inst, te.t, now)
		}
	}
}

// fire hands a due graph timer to the graph. A timeout that fails an attempt
// is recorded as that attempt's result, so a later hydration replays the
// same failure.
func (s *shard) fire(inst *instance, t graph.Timer, now time.Time) {
	fx := inst.g.Fire(t, now)
	if fx == nil {
		return
	}
	if t.Kind == graph.Timeout {
		info := inst.g.Task(t.Task)
		ar := port.ActionResult{InstanceID: inst.id, ExecutionID: inst.pe.executionID(t.Task), Attempt: t.Attempt,
			Error: info.Error, FinishedAt: now}
		if p := inst.progress[t.Task]; p != nil && p.Attempt == t.Attempt {
			ar.WorkerID = p.WorkerID // the worker it timed out on, as its last heartbeat said
		}
		s.record(inst, t.Task, ar)
		delete(inst.progress, t.Task)
		s.taskFailedLog(inst, t.Task, t.Attempt, info.Error)
		s.emit(inst, Event{Kind: EventTaskFailed, Task: inst.pe.task(t.Task.Node).GetName(), Index: t.Task.Index,
			Attempt: t.Attempt, Error: info.Error})
		s.resolvedTask(inst, t.Task, now)
	}
	if t.Kind == graph.WaitOver {
		s.waitOver(inst, t, now)
	}
	s.process(inst, fx, now)
	s.settle(inst)
}
