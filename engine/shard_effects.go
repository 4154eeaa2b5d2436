package engine

import (
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// process applies the effects of one graph call (replaying recorded
// attempts first during hydration).
func (s *shard) process(inst *instance, fx []graph.Effect, now time.Time) {
	if len(fx) == 0 {
		return
	}
	var replayed int
	s.work, replayed = drive(inst.g, inst.pe, inst.rec, fx, now, s.work, func(capability string) []string {
		// The node list is decided now, once: the next snapshot, written
		// with this event's results, carries it, so no replay asks again.
		inst.structural = true
		return s.e.cfg.Dispatcher.Nodes(capability)
	}, func(e graph.Effect) { s.effect(inst, e, now) })
	inst.sinceBytes += replayed
	if replayed > 0 {
		inst.sinceCount++
	}
}

// effect applies one effect.
func (s *shard) effect(inst *instance, e graph.Effect, now time.Time) {
	pe := inst.pe
	switch e.Kind {
	case graph.Dispatch:
		if inst.paused {
			inst.held = append(inst.held, e) // dispatched on resume (waits.go)
			return
		}
		t := pe.task(e.Task.Node)
		key := port.AttemptKey{InstanceID: inst.id, ExecutionID: pe.executionID(e.Task), Attempt: e.Attempt}
		if signal, _, ok := pe.plan.Wait(e.Task.Node); ok {
			// A wait: the engine holds it, no worker or Waggler does.
			s.dispatchWait(inst, e, signal)
		} else if name, version, ok := pe.plan.Child(e.Task.Node); ok {
			s.e.cfg.Metrics.Capability(pe.labels[e.Task.Node]).Dispatched.Inc()
			// The attempt is a child instance: the children loop starts
			// it; no Waggler sees it.
			if version == 0 {
				version = inst.envelope.pin(name)
			}
			s.e.children.push(childOp{kind: spawnChild, key: key, parent: inst.h, name: name, version: version,
				input: e.Input, depth: inst.g.Depth() + 1})
		} else {
			s.e.cfg.Metrics.Capability(pe.labels[e.Task.Node]).Dispatched.Inc()
			node, _ := inst.g.NodeOf(e.Task) // "" unless a run of on: every_node
			s.out = append(s.out, outOp{h: inst.h, d: port.TaskDispatch{
				AttemptKey: key,
				Term:       s.e.cfg.Term,
				Workflow:   pe.info.Name,
				Task:       t.GetName(),
				Index:      e.Task.Index,
				Capability: t.GetCapability(),
				Action:     t.GetAction(),
				Input:      e.Input,
				Timeout:    t.GetTimeout().AsDuration(),
				Verify:     int(t.GetVerify()),
				Resumed:    inst.resuming,
				Node:       node,
			}})
		}
		if inst.started[e.Task.Node] == 0 {
			inst.started[e.Task.Node] = now.UnixNano()
		}
		inst.history.dispatched(e.Task, now)
		if e.Task.Index == 0 && e.Attempt == inst.g.AttemptBase(e.Task.Node)+1 && t.GetSpread() != nil {
			inst.structural = true // a spread expanded
		}
		s.emit(inst, Event{Kind: EventTaskStarted, Task: t.GetName(), Index: e.Task.Index, Attempt: e.Attempt})
	case graph.Cancel:
		s.cancelled(inst, e, now)
	case graph.SetTimer:
		s.pushTimer(timerEntry{at: e.Timer.At, inst: inst, t: e.Timer})
		if e.Timer.Kind == graph.Retry {
			s.e.cfg.Metrics.Capability(pe.labels[e.Timer.Task.Node]).Retried.Inc()
			s.emit(inst, Event{Kind: EventTaskRetrying, Task: pe.task(e.Timer.Task.Node).GetName(), Index: e.Timer.Task.Index,
				Attempt: e.Timer.Attempt, RetryAt: e.Timer.At})
		}
	case graph.Finished:
		s.finish(inst, e.State)
	}
}

// cancelled applies a Cancel effect: the attempt in flight, if any, is
// stopped and the task (or instance) gets its task_cancelled. A task
// cancelled as a whole (by a join's cancel_rest, or with its instance) is
// announced, and resolves for its successors as a skipped task would: the
// tasks skipped because of it are announced after it, O(d) in its
// successors. (A timeout's Cancel stops an attempt that failed; the task
// is not cancelled.)
func (s *shard) cancelled(inst *instance, e graph.Effect, now time.Time) {
	ref := e.Task
	info := inst.g.Task(ref)
	attempt := e.Attempt
	if attempt > 0 {
		s.cancelOp(inst, ref, attempt)
		delete(inst.progress, ref)
	} else {
		attempt = info.Attempt // nothing in flight: the latest that ran, if any
	}
	s.emit(inst, Event{Kind: EventTaskCancelled, Task: inst.pe.task(ref.Node).GetName(), Index: ref.Index, Attempt: attempt})
	if ref.Index < 0 && info.Status == graph.TaskCancelled && !inst.announced[ref.Node] {
		inst.announced[ref.Node] = true
		inst.finished[ref.Node] = now.UnixNano()
		s.announceFrom(inst, inst.pe.succ[ref.Node], now)
	}
}

// resolvedTask announces what a completion or timeout of ref resolved: the
// task itself (a plain task, or a spread whose barrier fired) and, through
// the successor lists, tasks resolved without running (skipped, failed
// guards, empty spreads). O(d) in the tasks it touches.
func (s *shard) resolvedTask(inst *instance, ref graph.TaskRef, now time.Time) {
	if ref.Index < 0 {
		// The attempt's own event said it; mark the task if it resolved.
		switch inst.g.Task(ref).Status {
		case graph.TaskCompleted, graph.TaskFailed:
			inst.announced[ref.Node] = true
			inst.finished[ref.Node] = now.UnixNano()
			s.announceFrom(inst, inst.pe.succ[ref.Node], now)
		}
		return
	}
	s.announceFrom(inst, []int32{ref.Node}, now)
}

// announceRoots announces the roots resolved by Start and what follows.
func (s *shard) announceRoots(inst *instance, now time.Time) {
	var roots []int32
	for node := range inst.announced {
		if len(inst.pe.task(int32(node)).GetNeeds()) == 0 {
			roots = append(roots, int32(node))
		}
	}
	s.announceFrom(inst, roots, now)
}

func (s *shard) announceFrom(inst *instance, nodes []int32, now time.Time) {
	queue := append([]int32(nil), nodes...)
	for len(queue) > 0 {
		node := queue[0]
		queue = queue[1:]
		if inst.announced[node] {
			continue
		}
		info := inst.g.Task(graph.Ref(node))
		ev := Event{Task: inst.pe.task(node).GetName(), Index: -1, Attempt: info.Attempt}
		switch info.Status {
		case graph.TaskCompleted:
			ev.Kind, ev.Output = EventTaskCompleted, info.Output
		case graph.TaskFailed:
			ev.Kind, ev.Error = EventTaskFailed, info.Error
		case graph.TaskSkipped:
			ev.Kind = EventTaskSkipped
		default:
			continue // not resolved: nothing to say, and nothing after it resolved
		}
		inst.announced[node] = true
		inst.finished[node] = now.UnixNano()
		s.emit(inst, ev)
		queue = append(queue, inst.pe.succ[node]...)
	}
}

// emit appends an event to the instance's log.
func (s *shard) emit(inst *instance, ev Event) {
	ev.Time = s.now()
	if ev.Index >= 0 {
		if node, ok := inst.pe.plan.Lookup(ev.Task); ok && inst.pe.task(node).GetLoop() != nil {
			ev.Iteration = true
		}
	}
	if ev.Kind == EventState {
		ev.Index = -1
	}
	if ev.State == "" {
		ev.State = inst.shown
	}
	inst.log.append(ev)
}

// settle runs after every event of an instance: it reports state changes
// and decides whether to write a snapshot.
//
// Snapshot amortisation: results are durable on their own (hydration
// replays them), so a snapshot only bounds the replay. One is written when
// a spread expanded (its width is not one result) or a join was decided
// (replay answers recorded dispatches in node order, not in the order the
// results came: a join decided by results replayed in another order could
// see other needs; the snapshot, written with the result that decided it,
// keeps the decision), and otherwise once at
// least minSnapshotResults results were recorded since the last snapshot
// and they weigh at least half of it (payload + 32 bytes per result).
// Snapshot sizes then grow geometrically while results accumulate, so the
// bytes written over an instance's life are a small multiple of its final
// snapshot — O(n) for an n-wide spread, where a snapshot per completion
// would be O(n²). Neither the start nor a change of state (RUNNING to
// GATHERING) needs one: replay reproduces both, and an instance that lives
// past a group commit would write its row again for each.
func (s *shard) settle(inst *instance) {
	if inst.finishing {
		return
	}
	if st := inst.g.State(); !st.Terminal() && (st != inst.graphState || clientState(st, inst.resolvedAny) != inst.shown) {
		inst.graphState = st
		switch next := inst.clientState(); {
		case next == inst.shown, next == port.StateRunning && inst.shown == port.StateGathering: // never back
		case next == port.StateGathering:
			// Shown once the Store has it (gathered), so that no read, on
			// this node or another, or after this engine, goes back.
			if !inst.gatherMarked {
				inst.gatherMarked = true
				s.fl = append(s.fl, flushItem{inst: inst, gathering: true})
			}
		default:
			inst.shown = next
			inst.h.state.Store(inst.shown)
			s.emit(inst, Event{Kind: EventState})
		}
	}
	if j := inst.g.Joins(); j != inst.joins {
		inst.joins, inst.structural = j, true
	}
	if inst.structural || (inst.sinceCount >= minSnapshotResults && 2*inst.sinceBytes >= inst.snapBytes) {
		s.snapshot(inst)
	}
}

// gathered runs once the Store records that inst reached GATHERING: the
// instance is shown so from now on.
func (s *shard) gathered(inst *instance) {
	if s.insts[inst.id] != inst || inst.finishing || inst.shown != port.StateRunning {
		return
	}
	inst.shown = port.StateGathering
	inst.h.state.CompareAndSwap(port.StateRunning, port.StateGathering)
	s.emit(inst, Event{Kind: EventState})
}

func (s *shard) snapshot(inst *instance) {
	snap, err := inst.g.Snapshot()
	if err != nil {
		inst.lg.Error("cannot snapshot the instance", zap.Error(err))
		return
	}
	b := inst.envelope.encode(snap)
	s.fl = append(s.fl, flushItem{inst: inst, state: b})
	inst.snapBytes, inst.sinceBytes, inst.sinceCount, inst.structural = len(b), 0, 0, false
}

// minSnapshotResults is the fewest results recorded between two amortised
// snapshots: a small instance replays a few dozen results on hydration
// (microseconds each) rather than rewriting its snapshot as it goes.
const minSnapshotResults = 32
