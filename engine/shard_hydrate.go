package engine

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// hydrate takes a claimed instance into memory: restore (or start) its
// graph, replay what was recorded, apply a pending cancel request and arm
// its deadline.
func (s *shard) hydrate(c ClaimedInstance, pe *planEntry, perr error, h *holder) {
	if old := s.insts[c.ID]; old != nil { // our lease lapsed and we claimed it again
		s.evict(old, "claimed again after its lease lapsed")
	}
	now := s.now()
	inst := &instance{
		id:        c.ID,
		h:         h,
		pe:        pe,
		createdAt: c.CreatedAt,
		lg:        s.log.With(zap.Stringer("instance", c.ID)),
		shown:     StateRunning,
		progress:  make(map[graph.TaskRef]*liveProgress),
		parent:    c.Parent,
		wake:      c.Wake,
		paused:    c.Paused,
		run:       max(c.Run, 1),
	}
	h.paused.Store(c.Paused)
	if c.Gathering { // an earlier owner showed it GATHERING: never back
		inst.shown, inst.gatherMarked = StateGathering, true
	}
	h.state.Store(inst.shown)
	last, ok := s.lastSeq[c.ID]
	if !ok {
		last = s.e.cfg.Term << 32
	}
	delete(s.lastSeq, c.ID)
	inst.log = newEventLog(s.e.cfg.EventLogSize, last)
	s.insts[c.ID] = inst
	for _, sig := range c.Signals { // not consumed yet, by seq: watchers see them arrive here
		inst.signals = append(inst.signals, sig)
		inst.knowSignal(sig.Seq)
		info := SignalInfo{Seq: sig.Seq, Name: sig.Name, Payload: sig.Payload, At: sig.CreatedAt}
		s.emit(inst, Event{Kind: EventSignal, Index: -1, Signal: &info})
	}

	if perr != nil {
		s.failEarly(inst, fmt.Sprintf("cannot load its workflow version: %v", perr))
		return
	}
	st, err := decodeState(c.State)
	if err != nil {
		s.failEarly(inst, fmt.Sprintf("cannot read its stored state: %v", err))
		return
	}
	inst.envelope = st
	inst.rec = newRecorded(c.Results)
	inst.history.hydrated(pe, c.Results)
	n := pe.plan.NumTasks()
	inst.announced = make([]bool, n)
	inst.started = make([]int64, n)
	inst.finished = make([]int64, n)

	var fx []graph.Effect
	fresh := len(st.graph) == 0
	switch {
	case c.CancelRequested:
		// Cancelled before it ran, or while its previous owner ran it:
		// nothing new is dispatched, and attempts left in flight are
		// cancelled.
		if fresh {
			inst.g = pe.plan.NewGraph(c.ID.String())
		} else if inst.g, err = pe.plan.Restore(c.ID.String(), st.graph); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot restore its snapshot: %v", err))
			return
		}
		inst.g.SetDepth(st.depth)
		inst.graphState = inst.g.State()
		inst.cancelReason = "cancelled by request"
		if fx = inst.g.Cancel(now); fx == nil {
			fx = inst.g.Resume(now) // already terminal: Finished again
		}
		fresh = false
	case fresh:
		inputs, err := value.Decode(c.Inputs)
		in, isMap := inputs.(map[string]any)
		if err != nil || (!isMap && inputs != nil) {
			s.failEarly(inst, fmt.Sprintf("cannot read its stored inputs: %v", err))
			return
		}
		inst.g = pe.plan.NewGraph(c.ID.String())
		inst.g.SetDepth(st.depth)
		if fx, err = inst.g.Start(in, now); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot start: %v", err))
			return
		}
		inst.envelope.startedAt = now
		// No snapshot for the start: what was stored at submission plus
		// the results recorded later replays it (hydration starts a fresh
		// graph again and replays them), and an instance living past one
		// group commit would otherwise write its row twice.
		if inst.graphState = inst.g.State(); !inst.graphState.Terminal() && !inst.gatherMarked {
			inst.shown = inst.clientState()
			inst.h.state.Store(inst.shown)
		}
		s.emit(inst, Event{Kind: EventState})
		inst.lg.Info("instance started", zap.String("workflow", pe.info.Name), zap.Uint32("version", pe.info.Version))
	default:
		if inst.g, err = pe.plan.Restore(c.ID.String(), st.graph); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot restore its snapshot: %v", err))
			return
		}
		inst.g.SetDepth(st.depth)
		inst.graphState = inst.g.State()
		inst.resolvedAny = true   // restored mid-run
		inst.envelope.graph = nil // every later snapshot is taken from the graph
		if inst.envelope.startedAt.IsZero() {
			// The first claim of a run RetryInstance started (it writes
			// the snapshot of the new run, unstarted).
			inst.envelope.startedAt = now
			if c.Run > 1 {
				s.emit(inst, Event{Kind: EventRetried, Index: -1, Run: c.Run})
				inst.lg.Info("instance runs again", zap.Int("run", c.Run))
			}
		}
		fx = inst.g.Resume(now)
		inst.lg.Info("instance resumed", zap.String("workflow", pe.info.Name), zap.Uint32("version", pe.info.Version),
			zap.Int("recorded_results", len(c.Results)))
	}
	// The snapshot restored is st.graph; it counts as written.
	inst.snapBytes = len(c.State)
	if fresh {
		s.announceRoots(inst, now)
	}
	// An instance an earlier engine held may have what it dispatches now in
	// flight already: resumed, or ready when that engine stopped, its
	// first tasks included. (Only an engine that claimed it writes its
	// snapshot or results, so those imply HeldBefore.)
	if c.HeldBefore && c.Parent != nil {
		// Taken over: the engine that ended its parent may have died
		// before it cancelled this child.
		s.e.children.push(childOp{kind: checkParent, key: c.Parent.AttemptKey(), parent: inst.h, child: c.ID})
	}
	inst.resuming = c.HeldBefore
	s.process(inst, fx, now)
	inst.resuming = false
	if !fresh {
		s.markResolved(inst, c.Results)
	}
	inst.rec = nil // every recorded attempt still relevant was replayed above

	if !inst.finishing && !st.deadlineAt.IsZero() {
		if now.Before(st.deadlineAt) {
			s.pushTimer(timerEntry{at: st.deadlineAt, inst: inst, deadline: true})
		} else {
			s.deadlineExceeded(inst, now)
		}
	}
	s.settle(inst)
}

// markResolved marks the tasks a restored instance had resolved as
// announced (watchers get them in a snapshot) and takes their times from
// the recorded results.
func (s *shard) markResolved(inst *instance, results []ActionResult) {
	for node := range inst.announced {
		switch inst.g.Task(graph.Ref(int32(node))).Status {
		case graph.TaskCompleted, graph.TaskFailed, graph.TaskSkipped, graph.TaskCancelled:
			inst.announced[node] = true
		}
	}
	for _, r := range results {
		ref, ok := inst.pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		if st := clock.UnixNanos(r.StartedAt); st != 0 && (inst.started[ref.Node] == 0 || st < inst.started[ref.Node]) {
			inst.started[ref.Node] = st
		}
		if inst.announced[ref.Node] {
			inst.finished[ref.Node] = max(inst.finished[ref.Node], clock.UnixNanos(r.FinishedAt))
		}
	}
}

// failEarly fails an instance that cannot run at all (its workflow or state
// cannot be read).
func (s *shard) failEarly(inst *instance, reason string) {
	inst.lg.Error("instance cannot run", zap.String("reason", reason))
	inst.finishing = true
	inst.failReason = reason
	s.fl = append(s.fl, flushItem{inst: inst, completion: &Completion{
		InstanceID: inst.id, Owner: s.e.cfg.Owner, Status: StateFailed, Error: reason,
	}})
}
