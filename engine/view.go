package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/value"
)

// GetInstance returns an instance with its tasks: live from the graph when
// this engine holds it, otherwise from the Store (the snapshot restored,
// the recorded results replayed on top, timings from the task history).
func (e *Engine) GetInstance(ctx context.Context, id uuid.UUID) (InstanceView, error) {
	if v, ok, err := e.liveView(ctx, id); err != nil || ok {
		return v, err
	}
	return e.storeView(ctx, id)
}

// onShard runs fn on the shard of a held instance and waits for it. ok is
// false when the instance is not held here (or left before fn ran).
func (e *Engine) onShard(ctx context.Context, id uuid.UUID, fn func(s *shard, inst *instance)) (ok bool, err error) {
	v, found := e.held.Load(id)
	if !found || !e.running.Load() {
		return false, nil
	}
	h := v.(*holder)
	done := make(chan bool, 1)
	h.shard.send(func(s *shard) {
		inst := s.insts[id]
		if inst == nil || inst.h != h || inst.g == nil {
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

func (e *Engine) liveView(ctx context.Context, id uuid.UUID) (InstanceView, bool, error) {
	var v InstanceView
	ok, err := e.onShard(ctx, id, func(_ *shard, inst *instance) { v = inst.view() })
	return v, ok, err
}

// view is the live view of a held instance (on its shard).
func (inst *instance) view() InstanceView {
	v := InstanceView{
		ID:        inst.id,
		Workflow:  inst.pe.info.Name,
		Version:   inst.pe.info.Version,
		State:     inst.api,
		Inputs:    inst.g.Inputs(),
		CreatedAt: inst.createdAt,
		StartedAt: inst.st.startedAt,
	}
	v.CancelRequested = inst.cancelReason != ""
	if inst.finishing {
		// Terminal in memory, not yet durable: still shown as running.
		v.State = apiState(inst.state)
	}
	times := func(node int32) (time.Time, time.Time) {
		return fromUnixNanos(inst.started[node]), fromUnixNanos(inst.finished[node])
	}
	v.Tasks = taskViews(inst.pe, inst.g, times, func(ref graph.TaskRef) *TaskProgress {
		if p := inst.progress[ref]; p != nil {
			cp := *p
			return &cp
		}
		return nil
	})
	return v
}

// taskViews lists the tasks of g in dependency order.
func taskViews(pe *planEntry, g *graph.Graph, times func(int32) (time.Time, time.Time),
	progress func(graph.TaskRef) *TaskProgress) []TaskView {
	out := make([]TaskView, 0, len(pe.order))
	for _, node := range pe.order {
		t := pe.task(node)
		ref := graph.Ref(node)
		info := g.Task(ref)
		tv := TaskView{
			Name:        t.GetName(),
			Capability:  t.GetCapability(),
			Action:      t.GetAction(),
			Status:      taskStatus(info.Status),
			Attempt:     info.Attempt,
			MaxAttempts: pe.maxAttempts[node],
			Output:      info.Output,
			Error:       info.Error,
			Width:       -1,
		}
		tv.StartedAt, tv.FinishedAt = times(node)
		if info.Status == graph.TaskRunning && progress != nil {
			tv.Progress = progress(ref)
		}
		if info.Width >= 0 {
			tv.Width = info.Width
			var maxAttempt uint32
			for i := range info.Width {
				ii := g.Task(graph.TaskRef{Node: node, Index: i})
				switch ii.Status {
				case graph.TaskCompleted:
					tv.Done++
				case graph.TaskFailed:
					tv.Failed++
					if tv.Error == "" {
						tv.Error = ii.Error
					}
				}
				maxAttempt = max(maxAttempt, ii.Attempt)
			}
			tv.Attempt = maxAttempt
		} else if t.GetSpread() != nil && info.Status == graph.TaskCompleted {
			tv.Width = 0 // an empty spread
		}
		if !tv.Status.finished() {
			tv.FinishedAt = time.Time{}
		}
		out = append(out, tv)
	}
	return out
}

// finished reports whether a task with this status is over.
func (s TaskStatus) finished() bool {
	return s != TaskWaiting && s != TaskRunning && s != TaskRetrying
}

func taskStatus(st graph.TaskStatus) TaskStatus {
	switch st {
	case graph.TaskRunning, graph.TaskSpreading:
		return TaskRunning
	case graph.TaskRetrying:
		return TaskRetrying
	case graph.TaskCompleted:
		return TaskCompleted
	case graph.TaskFailed:
		return TaskFailed
	case graph.TaskSkipped:
		return TaskSkipped
	case graph.TaskCancelled:
		return TaskCancelled
	default:
		return TaskWaiting
	}
}

// storeView builds the view of an instance from the Store.
func (e *Engine) storeView(ctx context.Context, id uuid.UUID) (InstanceView, error) {
	rec, err := e.cfg.Store.GetInstance(ctx, id)
	if err != nil {
		return InstanceView{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	pe, err := e.plans.get(ctx, rec.WorkflowVersionID)
	if err != nil {
		return InstanceView{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	hist, err := e.cfg.Store.TaskHistory(ctx, id)
	if err != nil {
		return InstanceView{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	return e.recordView(pe, rec, hist)
}

// recordView builds a view from a stored record and its history.
func (e *Engine) recordView(pe *planEntry, rec InstanceRecord, hist []ActionResult) (InstanceView, error) {
	v := InstanceView{
		ID:              rec.ID,
		Workflow:        rec.WorkflowName,
		Version:         rec.WorkflowVersion,
		State:           statusState(rec.Status),
		Error:           rec.Error,
		CreatedAt:       rec.CreatedAt,
		CancelRequested: rec.CancelRequested,
	}
	if rec.StartedAt != nil {
		v.StartedAt = *rec.StartedAt
	}
	if rec.FinishedAt != nil {
		v.FinishedAt = *rec.FinishedAt
	}
	if in, err := value.Decode(rec.Inputs); err == nil {
		v.Inputs, _ = in.(map[string]any)
	}
	if rec.Status == StatusComplete && len(rec.Output) > 0 {
		out, err := value.Decode(rec.Output)
		if err != nil {
			return InstanceView{}, fmt.Errorf("instance %s: decoding its outputs: %w", rec.ID, err)
		}
		v.Outputs, _ = out.(map[string]any)
	}
	st, err := decodeState(rec.State)
	if err != nil {
		return InstanceView{}, fmt.Errorf("instance %s: %w", rec.ID, err)
	}
	if !st.startedAt.IsZero() && v.StartedAt.IsZero() {
		v.StartedAt = st.startedAt
	}
	// The graph as the owner has it: the snapshot (or a fresh start, if the
	// owner has not written one yet), with the results recorded since
	// replayed on top; what the owner would dispatch is shown as running.
	g := pe.plan.NewGraph(rec.ID.String())
	now := e.cfg.Clock.Now()
	var fx []graph.Effect
	switch {
	case len(st.graph) > 0:
		if g, err = pe.plan.Restore(rec.ID.String(), st.graph); err != nil {
			return InstanceView{}, fmt.Errorf("instance %s: %w", rec.ID, err)
		}
		if !rec.Status.Terminal() {
			fx = g.Resume(now)
		}
	case rec.Status == StatusRunning:
		fx, _ = g.Start(v.Inputs, now) // an error leaves the graph PENDING
	}
	if fx != nil {
		drive(g, pe, newRecorded(hist), fx, now, nil, func(graph.Effect) {})
		if s := g.State(); s == graph.Running || s == graph.Gathering {
			v.State = apiState(s)
		}
	}
	started := make(map[int32]time.Time)
	finished := make(map[int32]time.Time)
	for _, r := range hist {
		ref, ok := pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		if t, ok := started[ref.Node]; !r.StartedAt.IsZero() && (!ok || r.StartedAt.Before(t)) {
			started[ref.Node] = r.StartedAt
		}
		if r.FinishedAt.After(finished[ref.Node]) {
			finished[ref.Node] = r.FinishedAt
		}
	}
	v.Tasks = taskViews(pe, g, func(node int32) (time.Time, time.Time) { return started[node], finished[node] }, nil)
	return v, nil
}

// CancelInstance cancels an instance. The request is recorded in the Store
// first (so it survives a restart); if this engine holds the instance it is
// applied at once — in-flight attempts are cancelled through the
// Dispatcher — otherwise its owner, or the next one, applies it on its next
// lease refresh or claim. A finished instance fails with
// ErrInstanceFinished, an unknown one with ErrNotFound.
func (e *Engine) CancelInstance(ctx context.Context, id uuid.UUID) error {
	if err := e.cfg.Store.RequestCancel(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			if rec, gerr := e.cfg.Store.GetInstance(ctx, id); gerr == nil && rec.Status.Terminal() {
				return fmt.Errorf("cancel instance %s: it is already %s: %w", id, statusState(rec.Status), ErrInstanceFinished)
			}
		}
		return fmt.Errorf("cancel instance %s: %w", id, err)
	}
	if _, err := e.onShard(ctx, id, func(s *shard, inst *instance) { s.cancel(inst, "cancelled by request", s.now()) }); err != nil {
		return err
	}
	e.wakeClaimer() // a queued instance is cancelled when it is claimed
	return nil
}
