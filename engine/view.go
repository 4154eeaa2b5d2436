package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// GetInstance returns an instance with its tasks: live from the graph when
// this engine holds it, otherwise from the Store (the snapshot restored,
// the recorded results replayed on top, timings from the task history).
//
// The live view lists the attempts the engine keeps in memory; when it
// dropped some, or took the instance over from a previous owner, the
// recorded ones it lacks are read from the Store.
func (e *Engine) GetInstance(ctx context.Context, id uuid.UUID) (InstanceView, error) {
	if v, held := e.held.Load(id); held {
		h := v.(*holder)
		if h.heldBack.Load() {
			return e.heldBackView(ctx, id)
		}
		if err := h.settled(ctx); err != nil {
			return InstanceView{}, err
		}
		if h.terminal() != "" {
			// Durably finished, and the shard may not know yet: the
			// Store has all of it (outputs, error, times).
			return e.q.GetInstance(ctx, id)
		}
	}
	v, pe, trimmed, ok, err := e.liveView(ctx, id)
	if err != nil {
		return InstanceView{}, err
	}
	if !ok || v.State.Terminal() {
		// Not held, or its completion committed between the check above
		// and the live view (which then says finished but has no
		// outputs): the Store has all of it.
		return e.q.GetInstance(ctx, id)
	}
	if err := e.q.signalViews(ctx, &v, pe); err != nil {
		return InstanceView{}, err
	}
	if trimmed {
		hist, err := e.cfg.Store.TaskHistory(ctx, id)
		if err != nil {
			return InstanceView{}, fmt.Errorf("get instance %s: its attempts: %w", id, err)
		}
		completeAttempts(&v, pe, hist)
		childViews(&v, pe, nil)
	}
	boundAttempts(&v)
	return v, nil
}

// onShard runs fn on the shard of a held instance and waits for it. ok is
// false when the instance is not held here (or left before fn ran). When
// ctx ends first, onShard returns its error while fn may still run later:
// fn must then not write anything the caller reads after onShard returns
// (hand results over a buffered channel, read once ok is true).
func (e *Engine) onShard(ctx context.Context, id uuid.UUID, fn func(s *shard, inst *instance)) (ok bool, err error) {
	v, found := e.held.Load(id)
	if !found || !e.running.Load() {
		return false, nil
	}
	h := v.(*holder)
	done := make(chan bool, 1)
	h.shard.send(func(s *shard) {
		inst := s.insts[id]
		if inst == nil || inst.h != h || inst.g == nil || inst.parking {
			done <- false
			return
		}
		fn(s, inst)
		done <- true
	})
	select {
	case ok = <-done:
		return ok, nil
	case <-h.shard.done:
		return false, nil
	case <-ctx.Done():
		return false, fmt.Errorf("instance %s: %w", id, ctx.Err())
	}
}

// liveView is the view of a held instance, with every attempt it keeps
// (not bounded yet); trimmed reports that it lacks some recorded ones.
// The shard hands the view over a channel: when ctx ends first, onShard
// returns while the shard may still build it, and must not write what
// this call returns.
func (e *Engine) liveView(ctx context.Context, id uuid.UUID) (v InstanceView, pe *planEntry, trimmed, ok bool, err error) {
	type built struct {
		v       InstanceView
		pe      *planEntry
		trimmed bool
	}
	out := make(chan built, 1)
	ok, err = e.onShard(ctx, id, func(s *shard, inst *instance) {
		out <- built{inst.fullView(s.now()), inst.pe, inst.history.trimmed}
	})
	if err != nil || !ok {
		return InstanceView{}, nil, false, ok, err
	}
	b := <-out // sent before onShard heard that fn ran
	return b.v, b.pe, b.trimmed, true, nil
}

// view is the live view of a held instance (on its shard) as of now, its
// attempts bounded (they are not completed from the Store).
func (inst *instance) view(now time.Time) InstanceView {
	v := inst.fullView(now)
	boundAttempts(&v)
	return v
}

// fullView is the live view as of now with every attempt the instance
// keeps.
func (inst *instance) fullView(now time.Time) InstanceView {
	v := InstanceView{
		ID:        inst.id,
		Workflow:  inst.pe.info.Name,
		Version:   inst.pe.info.Version,
		State:     inst.visibleState(),
		Inputs:    inst.g.Inputs(),
		CreatedAt: inst.createdAt,
		StartedAt: inst.envelope.startedAt,
	}
	// A finishing instance shows its last running state until its
	// completion is durable, then its terminal state — from the commit on,
	// before the shard hears of it (holder.state), as listings and the
	// Store do.
	if st := inst.h.terminal(); st != "" {
		v.State = st
	}
	v.CancelRequested = inst.cancelReason != ""
	v.Parent = inst.parent
	v.Paused, v.Run = inst.paused, inst.run
	if inst.paused && !v.State.Terminal() {
		v.State = port.StatePaused
	}
	v.Tasks = taskViews(inst.pe, inst.g, viewSource{
		times: func(node int32) (time.Time, time.Time) {
			return clock.FromUnixNanos(inst.started[node]), clock.FromUnixNanos(inst.finished[node])
		},
		progress: func(ref graph.TaskRef) *port.TaskProgress {
			if p := inst.progress[ref]; p != nil {
				cp := p.TaskProgress
				return &cp
			}
			return nil
		},
		attempts: inst.appendAttempts,
	})
	childViews(&v, inst.pe, &inst.envelope)
	v.ETA, v.ETAKnown = inst.eta(now)
	return v
}

// viewSource is what taskViews needs besides the graph.
type viewSource struct {
	// times gives a task's first dispatch and its resolution.
	times func(node int32) (time.Time, time.Time)
	// progress gives the latest heartbeat of an execution in flight; nil:
	// none known.
	progress func(graph.TaskRef) *port.TaskProgress
	// attempts appends the attempts of an execution to out, oldest first.
	attempts func(out []AttemptView, ref graph.TaskRef, info graph.TaskInfo) []AttemptView
}

// taskViews lists the tasks of g in dependency order.
func taskViews(pe *planEntry, g *graph.Graph, src viewSource) []TaskView {
	out := make([]TaskView, 0, len(pe.order))
	for _, node := range pe.order {
		out = append(out, taskView(pe, g, node, src))
	}
	return out
}

// taskView is the view of the task node of g: what its plan says, its
// status, and its attempts and progress (of every element of a spread, of
// every iteration of a loop).
func taskView(pe *planEntry, g *graph.Graph, node int32, src viewSource) TaskView {
	t := pe.task(node)
	ref := graph.Ref(node)
	info := g.Task(ref)
	tv := TaskView{
		Name:        t.GetName(),
		Capability:  t.GetCapability(),
		Action:      t.GetAction(),
		Needs:       t.GetNeeds(),
		IsSpread:    t.GetSpread() != nil || t.GetOn() == robonetv1.TaskOn_TASK_ON_EVERY_NODE, // one run per node
		IsLoop:      t.GetLoop() != nil,
		Iterations:  info.Iterations,
		Status:      viewStatus(info.Status),
		Attempt:     info.Attempt,
		MaxAttempts: pe.maxAttempts[node],
		Output:      info.Output,
		Error:       info.Error,
		Width:       -1,
	}
	tv.StartedAt, tv.FinishedAt = src.times(node)
	if signal, _, ok := pe.plan.Wait(node); ok {
		tv.WaitSignal = signal
		if info.Status == graph.TaskRunning {
			tv.Wait = &WaitInfo{Signal: signal, Until: info.Due}
		}
	}
	if info.Status == graph.TaskRunning && src.progress != nil {
		tv.Progress = src.progress(ref)
	}
	switch {
	case info.Width >= 0:
		spreadView(&tv, g, node, info.Width, src)
	case t.GetSpread() != nil:
		if info.Status == graph.TaskCompleted {
			tv.Width = 0 // an empty spread
		}
	case info.Iterations >= 0:
		loopView(&tv, g, node, info.Iterations, src)
	case t.GetLoop() != nil:
		if info.Status == graph.TaskCompleted {
			tv.Iterations = 0 // a loop over an empty list
		}
	default:
		tv.Attempts = src.attempts(nil, ref, info)
		if tv.Status == graph.TaskCompleted || tv.Status == graph.TaskRunning {
			tv.Error = "" // an earlier attempt's: it is in Attempts
		}
	}
	if !finished(tv.Status) {
		tv.FinishedAt = time.Time{}
	}
	return tv
}

// spreadView fills in tv, the view of a spread (or on: every_node) task of
// width elements: their attempts, how many completed and failed, the first
// failure, the progress of the first running element that has any, and
// the highest attempt.
func spreadView(tv *TaskView, g *graph.Graph, node, width int32, src viewSource) {
	tv.Width = width
	var maxAttempt uint32
	for i := range width {
		iref := graph.TaskRef{Node: node, Index: i}
		ii := g.Task(iref)
		tv.Attempts = src.attempts(tv.Attempts, iref, ii)
		switch ii.Status {
		case graph.TaskCompleted:
			tv.Done++
		case graph.TaskFailed:
			tv.Failed++
			if tv.Error == "" {
				tv.Error = ii.Error
			}
		case graph.TaskRunning:
			// A spread shows the progress of its first running
			// instance that has any ("waiting: …" included).
			if tv.Progress == nil && src.progress != nil {
				tv.Progress = src.progress(iref)
			}
		}
		maxAttempt = max(maxAttempt, ii.Attempt)
	}
	tv.Attempt = maxAttempt
}

// loopView fills in tv, the view of a loop task that ran n iterations:
// the attempts of every iteration, the current one's progress, and the
// error of the iteration that ended the loop unless it goes on.
func loopView(tv *TaskView, g *graph.Graph, node, n int32, src viewSource) {
	for i := range n {
		iref := graph.TaskRef{Node: node, Index: i}
		ii := g.Task(iref)
		tv.Attempts = src.attempts(tv.Attempts, iref, ii)
		if ii.Status == graph.TaskRunning && src.progress != nil {
			tv.Progress = src.progress(iref)
		}
		if tv.Status != graph.TaskCompleted && tv.Status != graph.TaskRunning && ii.Error != "" && tv.Error == "" {
			tv.Error = ii.Error
		}
	}
	if tv.Status == graph.TaskRunning {
		tv.Error = "" // an earlier attempt's: it is in Attempts
	}
}

// childViews fills in what the tasks whose body is a child workflow show:
// the workflow, the version their children run (the IR's, or st's pin for
// one named without a version; st nil leaves what is there) and, for each
// attempt, the child instance it started — recorded as the attempt's
// worker. It may run again on a view it filled.
func childViews(v *InstanceView, pe *planEntry, st *instanceState) {
	if !pe.plan.HasChildren() {
		return
	}
	for i := range v.Tasks {
		if i >= len(pe.order) {
			break
		}
		name, version, ok := pe.plan.Child(pe.order[i])
		if !ok {
			continue
		}
		tv := &v.Tasks[i]
		tv.Workflow = name
		if version == 0 && st != nil {
			version = st.pin(name)
		}
		if version != 0 {
			tv.WorkflowVersion = version
		}
		for j := range tv.Attempts {
			a := &tv.Attempts[j]
			if id, err := uuid.Parse(a.WorkerID); err == nil {
				a.Child, a.WorkerID = id, ""
			}
		}
	}
}

// finished reports whether a task with this view status is over.
func finished(s graph.TaskStatus) bool {
	return s != graph.TaskWaiting && s != graph.TaskRunning && s != graph.TaskRetrying
}

// viewStatus is a task's status in a view: a spread whose instances, or a
// loop whose iterations, go on is running; an unknown task is waiting.
func viewStatus(st graph.TaskStatus) graph.TaskStatus {
	switch st {
	case graph.TaskSpreading, graph.TaskLooping:
		return graph.TaskRunning
	case graph.TaskUnknown:
		return graph.TaskWaiting
	}
	return st
}

// CancelInstance cancels an instance. The request is recorded in the Store
// first (so it survives a restart); if this engine holds the instance it is
// applied at once — in-flight attempts are cancelled through the
// Dispatcher — otherwise its owner, or the next one, applies it on its next
// lease refresh or claim. A finished instance fails with
// ErrInstanceFinished, an unknown one with ErrNotFound.
func (e *Engine) CancelInstance(ctx context.Context, id uuid.UUID) error {
	if err := e.cfg.Store.RequestCancel(ctx, id); err != nil {
		if errors.Is(err, port.ErrNotFound) {
			if rec, gerr := e.cfg.Store.GetInstance(ctx, id); gerr == nil && rec.Status.Terminal() {
				return fmt.Errorf("cancel instance %s: it is already %s: %w", id, rec.Status, ErrInstanceFinished)
			}
			return fmt.Errorf("cancel instance %s: no such instance: %w", id, port.ErrNotFound)
		}
		return err // the store's error names the instance and the operation
	}
	if e.cancelHeldBack(id) {
		return nil
	}
	if _, err := e.onShard(ctx, id, func(s *shard, inst *instance) { s.cancel(inst, "cancelled by request", s.now()) }); err != nil {
		return err
	}
	e.wakeClaimer() // a queued instance is cancelled when it is claimed
	return nil
}
