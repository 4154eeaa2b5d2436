package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/value"
)

func (s *shard) onResult(r *TaskResult) {
	inst := s.insts[r.InstanceID]
	if inst == nil || inst.finishing || inst.g == nil {
		s.e.ignoreResult(r, "instance not held here")
		return
	}
	ref, ok := inst.pe.parseExecution(r.ExecutionID)
	if !ok {
		s.e.ignoreResult(r, "unknown execution")
		return
	}
	if info := inst.g.Task(ref); info.Status != graph.TaskRunning || info.Attempt != r.Attempt {
		s.e.ignoreResult(r, "attempt not in flight")
		return
	}
	now := s.now()
	if r.Lost {
		if inst.lost == nil {
			inst.lost = make(map[graph.TaskRef]int)
		}
		inst.lost[ref]++
		if n := inst.lost[ref]; n <= MaxLost {
			inst.lg.Info("attempt lost by the Waggler layer; dispatching it again", zap.String("task", r.ExecutionID),
				zap.Uint32("attempt", r.Attempt), zap.Int("times", n), zap.String("reason", r.Error))
			s.process(inst, inst.g.Redispatch(ref, r.Attempt, now), now)
			s.settle(inst)
			return
		}
		// Lost over and over: a failed attempt (the policy decides).
		r.OK, r.Error = false, fmt.Sprintf("lost %d times by the Waggler layer (last: %s)", inst.lost[ref], r.Error)
	}
	delete(inst.lost, ref)
	if pinned, ok := inst.g.NodeOf(ref); ok && r.OK && r.WorkerID != "" {
		// A run of on: every_node counts only from the node it is pinned
		// to: a copy an earlier engine dispatched under another node list
		// (it died before that list was durable) is a failed attempt.
		if ran, _, _ := strings.Cut(r.WorkerID, "/"); ran != pinned {
			r.OK, r.Error = false, fmt.Sprintf("ran on node %s, not on node %s it is pinned to", ran, pinned)
		}
	}
	inst.resolvedAny = true
	ar := ActionResult{InstanceID: inst.id, ExecutionID: r.ExecutionID, Attempt: r.Attempt, WorkerID: StorableText(r.WorkerID),
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
			ar.Error = StorableText("invalid output: " + err.Error())
		} else if err = inst.g.Accept(ref, r.Attempt, out); err != nil {
			ar.Error = StorableText(err.Error())
		} else {
			ar.OK, ar.Output, res.Output = true, enc, out
		}
	} else {
		ar.Error = StorableText(r.Error)
		if ar.Error == "" {
			ar.Error = "failed"
		}
	}
	m := s.e.cfg.Metrics.Capability(inst.pe.labels[ref.Node])
	s.e.partitionOf(inst.id).tasks.Add(1)
	if ar.OK {
		m.Completed.Inc()
	} else {
		m.Failed.Inc()
		res.Err = errors.New(ar.Error)
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		m.Duration.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	}
	start := time.Now()
	defer func() { s.e.cfg.Metrics.Propagation.Observe(time.Since(start).Seconds()) }()
	fx := inst.g.Complete(ref, r.Attempt, res, now)
	s.record(inst, ref, ar)
	delete(inst.progress, ref)
	name := inst.pe.task(ref.Node).GetName()
	if ar.OK {
		s.emit(inst, Event{Kind: EventTaskCompleted, Task: name, Index: ref.Index, Attempt: r.Attempt, Output: res.Output})
	} else {
		s.taskFailedLog(inst, ref, r.Attempt, ar.Error)
		s.emit(inst, Event{Kind: EventTaskFailed, Task: name, Index: ref.Index, Attempt: r.Attempt, Error: ar.Error})
	}
	s.resolvedTask(inst, ref, now)
	s.process(inst, fx, now)
	s.settle(inst)
}

func (s *shard) onProgress(p *TaskProgress) {
	inst := s.insts[p.InstanceID]
	if inst == nil || inst.finishing || inst.g == nil {
		return
	}
	ref, ok := inst.pe.parseExecution(p.ExecutionID)
	if !ok {
		return
	}
	if info := inst.g.Task(ref); info.Status != graph.TaskRunning || info.Attempt != p.Attempt {
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
func (s *shard) record(inst *instance, ref graph.TaskRef, ar ActionResult) {
	s.fl = append(s.fl, flushItem{inst: inst, results: []ActionResult{ar}})
	inst.history.finished(ref, ar)
	inst.sinceCount++
	inst.sinceBytes += resultBytes(ar)
}

func (s *shard) taskFailedLog(inst *instance, ref graph.TaskRef, attempt uint32, reason string) {
	t := inst.pe.task(ref.Node)
	inst.lg.Warn("task attempt failed", zap.String("task", inst.pe.executionID(ref)),
		zap.String("capability", t.GetCapability()), zap.Uint32("attempt", attempt), zap.String("error", reason))
}
