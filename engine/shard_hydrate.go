package engine

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// hydrate takes a claimed instance into memory: restore (or start) its
// graph, replay what was recorded, apply a pending cancel request and arm
// its deadline.
func (s *shard) hydrate(c port.ClaimedInstance, pe *planEntry, perr error, h *holder) {
	if old := s.insts[c.ID]; old != nil { // our lease lapsed and we claimed it again
		s.evict(old, "claimed again after its lease lapsed")
	}
	now := s.now()
	inst := s.hold(c, pe, h)
	s.takeSignals(inst, c.Signals)
	if perr != nil {
		s.failEarly(inst, fmt.Sprintf("cannot load its workflow version: %v", perr))
		return
	}
	st, err := decodeState(c.State)
	if err != nil {
		s.failEarly(inst, fmt.Sprintf("cannot read its stored state: %v", err))
		return
	}
	inst.load(st, c.Results)
	var fx []graph.Effect
	var fresh bool
	var reason string
	switch {
	case c.CancelRequested:
		fx, reason = s.cancelClaimed(inst, st, now)
	case len(st.graph) == 0:
		fx, reason = s.startClaimed(inst, c.Inputs, st, now)
		fresh = true
	default:
		fx, reason = s.resumeClaimed(inst, c, st, now)
	}
	if reason != "" {
		s.failEarly(inst, reason)
		return
	}
	// The snapshot restored is st.graph; it counts as written.
	inst.snapBytes = len(c.State)
	s.replayClaimed(inst, c, fx, fresh, now)
	if !inst.finishing && !st.deadlineAt.IsZero() {
		s.armDeadline(inst, st.deadlineAt, now)
	}
	s.settle(inst)
}

// hold makes the instance of a claim, as yet without a graph, and holds it
// on the shard; it returns the instance.
func (s *shard) hold(c port.ClaimedInstance, pe *planEntry, h *holder) *instance {
	inst := &instance{
		id:        c.ID,
		h:         h,
		pe:        pe,
		createdAt: c.CreatedAt,
		lg:        s.log.With(zap.Stringer("instance", c.ID)),
		shown:     port.StateRunning,
		progress:  make(map[graph.TaskRef]*liveProgress),
		parent:    c.Parent,
		wake:      c.Wake,
		paused:    c.Paused,
		run:       max(c.Run, 1),
	}
	h.paused.Store(c.Paused)
	if c.Gathering { // an earlier owner showed it GATHERING: never back
		inst.shown, inst.gatherMarked = port.StateGathering, true
	}
	h.state.Store(inst.shown)
	last, ok := s.lastSeq[c.ID]
	if !ok {
		last = s.e.cfg.Term << 32
	}
	delete(s.lastSeq, c.ID)
	inst.log = newEventLog(s.e.cfg.EventLogSize, last)
	s.insts[c.ID] = inst
	return inst
}

// takeSignals gives inst the signals of its claim, not consumed yet, in
// seq order: watchers see them arrive here.
func (s *shard) takeSignals(inst *instance, sigs []port.SignalRecord) {
	for _, sig := range sigs {
		inst.signals = append(inst.signals, sig)
		inst.knowSignal(sig.Seq)
		info := SignalInfo{Seq: sig.Seq, Name: sig.Name, Payload: sig.Payload, At: sig.CreatedAt}
		s.emit(inst, Event{Kind: EventSignal, Index: -1, Signal: &info})
	}
}

// load gives inst what was stored of it: its envelope and the results
// recorded, which the graph about to be rebuilt replays.
func (inst *instance) load(st instanceState, results []port.ActionResult) {
	inst.envelope = st
	inst.rec = newRecorded(results)
	inst.history.hydrated(inst.pe, results)
	n := inst.pe.plan.NumTasks()
	inst.announced = make([]bool, n)
	inst.started = make([]int64, n)
	inst.finished = make([]int64, n)
}

// storedGraph is the graph of an instance as st holds it: its snapshot
// restored, or a fresh graph when none was written yet; at st's depth among
// child workflows. The error is Restore's.
func storedGraph(plan *graph.Plan, id string, st instanceState) (*graph.Graph, error) {
	if len(st.graph) == 0 {
		g := plan.NewGraph(id)
		g.SetDepth(st.depth)
		return g, nil
	}
	g, err := plan.Restore(id, st.graph)
	if err != nil {
		return nil, err
	}
	g.SetDepth(st.depth)
	return g, nil
}

// cancelClaimed rebuilds the graph of an instance whose cancellation was
// requested before it ran, or while its previous owner ran it, and cancels
// it: nothing new is dispatched, and attempts left in flight are cancelled.
// It returns the effects to apply, or why the instance cannot run.
func (s *shard) cancelClaimed(inst *instance, st instanceState, now time.Time) ([]graph.Effect, string) {
	var err error
	if inst.g, err = storedGraph(inst.pe.plan, inst.id.String(), st); err != nil {
		return nil, fmt.Sprintf("cannot restore its snapshot: %v", err)
	}
	inst.graphState = inst.g.State()
	inst.cancelReason = "cancelled by request"
	fx := inst.g.Cancel(now)
	if fx == nil {
		fx = inst.g.Resume(now) // already terminal: Finished again
	}
	return fx, ""
}

// startClaimed starts the graph of an instance that never ran from its
// stored inputs. It returns the effects to apply, or why the instance
// cannot run.
func (s *shard) startClaimed(inst *instance, inputs []byte, st instanceState, now time.Time) ([]graph.Effect, string) {
	decoded, err := value.Decode(inputs)
	in, isMap := decoded.(map[string]any)
	if err != nil || (!isMap && decoded != nil) {
		return nil, fmt.Sprintf("cannot read its stored inputs: %v", err)
	}
	inst.g = inst.pe.plan.NewGraph(inst.id.String())
	inst.g.SetDepth(st.depth)
	fx, err := inst.g.Start(in, now)
	if err != nil {
		return nil, fmt.Sprintf("cannot start: %v", err)
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
	inst.lg.Info("instance started", zap.String("workflow", inst.pe.info.Name), zap.Uint32("version", inst.pe.info.Version))
	return fx, ""
}

// resumeClaimed restores the graph of an instance from its snapshot and
// resumes it. It returns the effects to apply (the attempts in flight,
// dispatched again), or why the instance cannot run.
func (s *shard) resumeClaimed(inst *instance, c port.ClaimedInstance, st instanceState, now time.Time) ([]graph.Effect, string) {
	var err error
	if inst.g, err = storedGraph(inst.pe.plan, inst.id.String(), st); err != nil {
		return nil, fmt.Sprintf("cannot restore its snapshot: %v", err)
	}
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
	fx := inst.g.Resume(now)
	inst.lg.Info("instance resumed", zap.String("workflow", inst.pe.info.Name), zap.Uint32("version", inst.pe.info.Version),
		zap.Int("recorded_results", len(c.Results)))
	return fx, ""
}

// replayClaimed applies the effects of a claimed instance's rebuilt graph,
// answering the attempts already recorded from the record; fresh says that
// the graph was started rather than restored.
func (s *shard) replayClaimed(inst *instance, c port.ClaimedInstance, fx []graph.Effect, fresh bool, now time.Time) {
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
}

// armDeadline arms the deadline timer of inst, due at, or fails inst at
// once when at has passed.
func (s *shard) armDeadline(inst *instance, at, now time.Time) {
	if now.Before(at) {
		s.pushTimer(timerEntry{at: at, inst: inst, deadline: true})
	} else {
		s.deadlineExceeded(inst, now)
	}
}

// markResolved marks the tasks a restored instance had resolved as
// announced (watchers get them in a snapshot) and takes their times from
// the recorded results.
func (s *shard) markResolved(inst *instance, results []port.ActionResult) {
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
	s.fl = append(s.fl, flushItem{inst: inst, completion: &port.Completion{
		InstanceID: inst.id, Owner: s.e.cfg.Owner, Status: port.StateFailed, Error: reason,
	}})
}
