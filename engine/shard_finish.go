package engine

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

// finish queues the completion of an instance that reached a terminal
// state; it is reported only once it is durable (see completed).
func (s *shard) finish(inst *instance, st graph.State) {
	inst.finishing = true
	c := &port.Completion{InstanceID: inst.id, Owner: s.e.cfg.Owner}
	switch {
	case inst.failReason != "":
		c.Status, c.Error = port.StateFailed, inst.failReason
	case st == graph.Complete:
		out, err := value.Encode(inst.g.Outputs())
		if err != nil {
			c.Status, c.Error = port.StateFailed, "encoding the outputs: "+err.Error()
			inst.failReason = c.Error
		} else {
			c.Status, c.Output = port.StateComplete, out
		}
	case st == graph.Failed:
		c.Status, c.Error = port.StateFailed, inst.g.Err().Error()
	default:
		c.Status, c.Error = port.StateCancelled, inst.cancelReason
		if c.Error == "" {
			c.Error = "cancelled"
		}
	}
	if snap, err := inst.g.Snapshot(); err == nil {
		c.State = inst.envelope.encode(snap)
	} else {
		inst.lg.Error("cannot snapshot the finished instance", zap.Error(err))
	}
	s.fl = append(s.fl, flushItem{inst: inst, completion: c})
}

// completed runs once the completion of inst is durable.
func (s *shard) completed(inst *instance, c *port.Completion) {
	if s.insts[inst.id] != inst {
		return
	}
	inst.shown = c.Status
	inst.h.state.Store(inst.shown)
	s.e.cfg.Metrics.InstanceFinished(string(c.Status))
	ev := Event{Kind: EventState, Error: c.Error}
	if c.Status == port.StateComplete && inst.g != nil {
		ev.Output = inst.g.Outputs()
	}
	s.emit(inst, ev)
	fields := []zap.Field{zap.String("state", string(inst.shown))}
	if c.Error != "" {
		fields = append(fields, zap.String("error", c.Error))
	}
	if !inst.envelope.startedAt.IsZero() {
		fields = append(fields, zap.Duration("duration", s.now().Sub(inst.envelope.startedAt)))
	}
	inst.lg.Info("instance finished", fields...)
	p := inst.parent
	var r port.TaskResult
	if p != nil {
		var outputs map[string]any
		if c.Status == port.StateComplete && inst.g != nil {
			outputs = inst.g.Outputs()
		}
		started, finished := inst.envelope.startedAt, s.now()
		r = childResult(inst.id, c.Status, c.Output, outputs, c.Error, &started, &finished)
		r.AttemptKey = p.AttemptKey()
	}
	s.remove(inst)
	if p != nil {
		// A child instance: its parent's attempt has its outcome now. Told
		// once it left memory, so that a dispatch of the same attempt
		// that does not find it held reads it finished from the store.
		s.e.TaskResult(context.Background(), r)
	}
}

// cancel applies a cancellation (by request) to a held instance.
func (s *shard) cancel(inst *instance, reason string, now time.Time) {
	if inst.finishing || inst.g == nil {
		return
	}
	inst.cancelReason = reason
	s.process(inst, inst.g.Cancel(now), now)
	s.settle(inst)
}

// deadlineExceeded fails an instance whose deadline passed: its in-flight
// attempts are cancelled (graph.Cancel) and the completion says FAILED.
func (s *shard) deadlineExceeded(inst *instance, now time.Time) {
	if inst.finishing || inst.g == nil {
		return
	}
	inst.failReason = fmt.Sprintf("deadline exceeded after %s", inst.envelope.deadline)
	inst.lg.Warn("instance deadline exceeded", zap.Duration("deadline", inst.envelope.deadline))
	s.process(inst, inst.g.Cancel(now), now)
	s.settle(inst)
}

// evict drops an instance this engine no longer owns: its in-flight
// attempts are cancelled and nothing more is written or dispatched for it.
func (s *shard) evict(inst *instance, reason string) {
	if s.insts[inst.id] != inst {
		return
	}
	s.e.evictions.Add(1)
	s.e.partitionOf(inst.id).evictions.Add(1)
	inst.lg.Warn("instance evicted", zap.String("reason", reason))
	s.stopInFlight(inst)
	if len(s.lastSeq) > 100_000 { // bound the memory of numbering
		clear(s.lastSeq)
	}
	s.lastSeq[inst.id] = inst.log.last()
	s.remove(inst)
}

// remove forgets an instance. Timer entries may still point at it until
// they fire, so its graph and per-task state are released here.
func (s *shard) remove(inst *instance) {
	delete(s.insts, inst.id)
	s.dropTimers(inst)
	inst.g, inst.rec, inst.progress = nil, nil, nil
	inst.announced, inst.started, inst.finished = nil, nil, nil
	inst.h.gone.Store(true)
	inst.log.close()
	s.e.held.CompareAndDelete(inst.id, inst.h)
	s.e.heldCount.Add(-1)
	if s.e.dueLeft.Load() { // the room freed may take one of them
		s.e.wakeClaimer()
	}
}

// stopInFlight cancels the attempts in flight of an instance this engine
// lets go of (evicted, or the engine stopping): the next owner dispatches
// them again. A child instance is left running: it is an instance of its
// own, which the next owner takes over with its parent.
func (s *shard) stopInFlight(inst *instance) {
	for _, a := range s.inFlight(inst) {
		if !inst.pe.isChild(a.ref.Node) {
			s.cancelOp(inst, a.ref, a.attempt)
		}
	}
}

// cancelOp queues the cancellation of attempt of ref: of the child
// instance it started, for a task whose body is a child workflow.
func (s *shard) cancelOp(inst *instance, ref graph.TaskRef, attempt uint32) {
	if inst.pe.isChild(ref.Node) {
		key := port.AttemptKey{InstanceID: inst.id, ExecutionID: inst.pe.executionID(ref), Attempt: attempt}
		s.e.children.push(childOp{kind: cancelChild, key: key, parent: inst.h,
			reason: fmt.Sprintf("its parent %s cancelled %s attempt %d", inst.id, key.ExecutionID, attempt)})
		return
	}
	s.out = append(s.out, outOp{h: inst.h, cancel: true, d: port.TaskDispatch{
		AttemptKey: port.AttemptKey{InstanceID: inst.id, ExecutionID: inst.pe.executionID(ref), Attempt: attempt},
		Term:       s.e.cfg.Term,
		Capability: inst.pe.task(ref.Node).GetCapability(),
	}})
}

// running is one attempt in flight.
type running struct {
	ref     graph.TaskRef
	attempt uint32
}

// inFlight lists the attempts of inst that are running.
func (s *shard) inFlight(inst *instance) []running {
	out := s.running[:0]
	if inst.g == nil || inst.finishing {
		return out
	}
	for node := range inst.pe.plan.NumTasks() {
		ref := graph.Ref(int32(node))
		info := inst.g.Task(ref)
		switch info.Status {
		case graph.TaskRunning:
			out = append(out, running{ref, info.Attempt})
		case graph.TaskLooping:
			r := graph.TaskRef{Node: int32(node), Index: max(info.Iterations-1, 0)}
			if ii := inst.g.Task(r); ii.Status == graph.TaskRunning {
				out = append(out, running{r, ii.Attempt})
			}
		case graph.TaskSpreading:
			for i := range info.Width {
				r := graph.TaskRef{Node: int32(node), Index: i}
				if ii := inst.g.Task(r); ii.Status == graph.TaskRunning {
					out = append(out, running{r, ii.Attempt})
				}
			}
		}
	}
	s.running = out[:0]
	return out
}

// shutdown is the shard's part of a graceful Stop or a Release: cancel
// what runs (Stop only), write a last snapshot of every live instance so
// the next owner replays little, and end the loop.
func (s *shard) shutdown(cancel bool) {
	for _, inst := range s.insts {
		if inst.g == nil || inst.finishing {
			continue
		}
		if cancel {
			s.stopInFlight(inst)
		}
		if inst.sinceCount > 0 || inst.structural {
			s.snapshot(inst)
		}
		inst.log.close()
	}
	s.quit = true
}
