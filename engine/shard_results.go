package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

// onResult takes the result of an attempt in flight into its instance:
// records it, tells the graph and applies what the graph does next.
func (s *shard) onResult(r *port.TaskResult) {
	inst, ref, why := s.attemptInFlight(r.AttemptKey)
	if why != "" {
		s.e.ignoreResult(r, why)
		return
	}
	now := s.now()
	if r.Lost && s.redispatchLost(inst, ref, r, now) {
		return
	}
	delete(inst.lost, ref)
	failOffNode(inst.g, ref, r)
	inst.resolvedAny = true
	ar, res := judgeResult(inst.g, inst.id, ref, r)
	s.countResult(inst, ref, r, ar.OK)
	s.applyResult(inst, ref, ar, res, now)
}

// attemptInFlight returns the instance held here and the execution of the
// attempt k when it is in flight; why says why it is not ("" when it is).
func (s *shard) attemptInFlight(k port.AttemptKey) (inst *instance, ref graph.TaskRef, why string) {
	inst = s.insts[k.InstanceID]
	if inst == nil || inst.finishing || inst.g == nil {
		return nil, ref, "instance not held here"
	}
	ref, ok := inst.pe.parseExecution(k.ExecutionID)
	if !ok {
		return nil, ref, "unknown execution"
	}
	if info := inst.g.Task(ref); info.Status != graph.TaskRunning || info.Attempt != k.Attempt {
		return nil, ref, "attempt not in flight"
	}
	return inst, ref, ""
}

// redispatchLost dispatches again an attempt the Waggler layer lost, and
// reports true, up to MaxLost times; past that it makes r a failed
// attempt (the policy decides) and reports false.
func (s *shard) redispatchLost(inst *instance, ref graph.TaskRef, r *port.TaskResult, now time.Time) bool {
	if inst.lost == nil {
		inst.lost = make(map[graph.TaskRef]int)
	}
	inst.lost[ref]++
	n := inst.lost[ref]
	if n > MaxLost {
		// Lost over and over: a failed attempt (the policy decides).
		r.OK, r.Error = false, fmt.Sprintf("lost %d times by the Waggler layer (last: %s)", n, r.Error)
		return false
	}
	inst.lg.Info("attempt lost by the Waggler layer; dispatching it again", zap.String("task", r.ExecutionID),
		zap.Uint32("attempt", r.Attempt), zap.Int("times", n), zap.String("reason", r.Error))
	s.process(inst, inst.g.Redispatch(ref, r.Attempt, now), now)
	s.settle(inst)
	return true
}

// failOffNode makes r a failed attempt when it is a run of an on:
// every_node task that ran on another node than the one it is pinned to: a
// copy an earlier engine dispatched under another node list (it died
// before that list was durable).
func failOffNode(g *graph.Graph, ref graph.TaskRef, r *port.TaskResult) {
	pinned, ok := g.NodeOf(ref)
	if !ok || !r.OK || r.WorkerID == "" {
		return
	}
	if ran, _, _ := strings.Cut(r.WorkerID, "/"); ran != pinned {
		r.OK, r.Error = false, fmt.Sprintf("ran on node %s, not on node %s it is pinned to", ran, pinned)
	}
}

// judgeResult returns what is recorded of the attempt r reports, and what
// the graph is told: its canonical output if it succeeded and the task's
// accept check takes it, otherwise the failure (an output that is not a
// value, or one the check rejects, included).
func judgeResult(g *graph.Graph, id uuid.UUID, ref graph.TaskRef, r *port.TaskResult) (port.ActionResult, graph.Result) {
	ar := port.ActionResult{InstanceID: id, ExecutionID: r.ExecutionID, Attempt: r.Attempt, WorkerID: port.StorableText(r.WorkerID),
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	var res graph.Result
	if r.OK {
		// The ResultSink contract asks for canonical outputs, and encoding
		// checks that while it walks the value: normalise (a second walk)
		// only when a dispatcher sent something else. A sender that
		// encoded the output already says so with OutputJSON.
		out, enc, err := r.Output, r.OutputJSON, error(nil)
		if enc == nil {
			enc, err = value.Encode(out)
		}
		if err != nil {
			if out, err = value.Normalize(r.Output); err == nil {
				enc, err = value.Encode(out)
			}
		}
		// The task's accept check judges the output here, once, and its
		// verdict is what is recorded: a rejected attempt is a failed
		// result, which replay feeds back as it is (graph.Accept).
		if err != nil {
			ar.Error = port.StorableText("invalid output: " + err.Error())
		} else if err = g.Accept(ref, r.Attempt, out); err != nil {
			ar.Error = port.StorableText(err.Error())
		} else {
			ar.OK, ar.Output, res.Output = true, enc, out
		}
	} else {
		ar.Error = port.StorableText(r.Error)
		if ar.Error == "" {
			ar.Error = "failed"
		}
	}
	if !ar.OK {
		res.Err = errors.New(ar.Error)
	}
	return ar, res
}

// countResult counts a result in the metrics of its task's capability and
// of its instance's partition.
func (s *shard) countResult(inst *instance, ref graph.TaskRef, r *port.TaskResult, ok bool) {
	m := s.e.cfg.Metrics.Capability(inst.pe.labels[ref.Node])
	s.e.partitionOf(inst.id).tasks.Add(1)
	if ok {
		m.Completed.Inc()
	} else {
		m.Failed.Inc()
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		m.Duration.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	}
}

// applyResult tells the graph the result of an attempt, queues its record,
// tells watchers and applies what the graph does next.
func (s *shard) applyResult(inst *instance, ref graph.TaskRef, ar port.ActionResult, res graph.Result, now time.Time) {
	start := time.Now()
	defer func() { s.e.cfg.Metrics.Propagation.Observe(time.Since(start).Seconds()) }()
	fx := inst.g.Complete(ref, ar.Attempt, res, now)
	s.record(inst, ref, ar)
	delete(inst.progress, ref)
	name := inst.pe.task(ref.Node).GetName()
	if ar.OK {
		s.emit(inst, Event{Kind: EventTaskCompleted, Task: name, Index: ref.Index, Attempt: ar.Attempt, Output: res.Output})
	} else {
		s.taskFailedLog(inst, ref, ar.Attempt, ar.Error)
		s.emit(inst, Event{Kind: EventTaskFailed, Task: name, Index: ref.Index, Attempt: ar.Attempt, Error: ar.Error})
	}
	s.resolvedTask(inst, ref, now)
	s.process(inst, fx, now)
	s.settle(inst)
}

func (s *shard) onProgress(p *port.TaskProgress) {
	inst, ref, why := s.attemptInFlight(p.AttemptKey)
	if why != "" {
		return
	}
	if cur := inst.progress[ref]; cur != nil && cur.WorkerID == p.WorkerID && p.Seq <= cur.Seq {
		return // a replayed or reordered heartbeat
	}
	lp := heard(inst.progress[ref], p)
	inst.progress[ref] = lp
	s.emit(inst, Event{Kind: EventTaskProgress, Task: inst.pe.task(ref.Node).GetName(), Index: ref.Index,
		Attempt: p.Attempt, Progress: &lp.TaskProgress})
}

// record queues an accepted result of ref for the next group commit.
func (s *shard) record(inst *instance, ref graph.TaskRef, ar port.ActionResult) {
	s.fl = append(s.fl, flushItem{inst: inst, results: []port.ActionResult{ar}})
	inst.history.finished(ref, ar)
	inst.sinceCount++
	inst.sinceBytes += resultBytes(ar)
}

func (s *shard) taskFailedLog(inst *instance, ref graph.TaskRef, attempt uint32, reason string) {
	t := inst.pe.task(ref.Node)
	inst.lg.Warn("task attempt failed", zap.String("task", inst.pe.executionID(ref)),
		zap.String("capability", t.GetCapability()), zap.Uint32("attempt", attempt), zap.String("error", reason))
}
