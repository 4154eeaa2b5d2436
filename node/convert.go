package node

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// This file translates engine types to protobuf and back. Values become
// canonical JSON text (package value), so whole numbers stay whole.

func workflowInfoToProto(w engine.WorkflowInfo) *robonetv1.WorkflowInfo {
	return &robonetv1.WorkflowInfo{
		Name: w.Name, Version: w.Version, IrHash: w.IRHash, Description: w.Description,
		Tasks: int32(w.Tasks), CreatedAt: timestamp(w.CreatedAt), Capabilities: w.Capabilities,
	}
}

var stateToProtoMap = map[port.InstanceState]robonetv1.InstanceState{
	port.StatePending:   robonetv1.InstanceState_INSTANCE_STATE_PENDING,
	port.StateRunning:   robonetv1.InstanceState_INSTANCE_STATE_RUNNING,
	port.StateGathering: robonetv1.InstanceState_INSTANCE_STATE_GATHERING,
	port.StateComplete:  robonetv1.InstanceState_INSTANCE_STATE_COMPLETE,
	port.StateFailed:    robonetv1.InstanceState_INSTANCE_STATE_FAILED,
	port.StateCancelled: robonetv1.InstanceState_INSTANCE_STATE_CANCELLED,
	port.StatePaused:    robonetv1.InstanceState_INSTANCE_STATE_PAUSED,
}

func stateToProto(s port.InstanceState) robonetv1.InstanceState {
	return stateToProtoMap[s] // unknown: UNSPECIFIED
}

func stateFromProto(s robonetv1.InstanceState) (port.InstanceState, bool) {
	for es, ps := range stateToProtoMap {
		if ps == s {
			return es, true
		}
	}
	return "", false
}

var taskStatusToProto = map[graph.TaskStatus]robonetv1.TaskStatus{
	graph.TaskWaiting:   robonetv1.TaskStatus_TASK_STATUS_WAITING,
	graph.TaskRunning:   robonetv1.TaskStatus_TASK_STATUS_RUNNING,
	graph.TaskRetrying:  robonetv1.TaskStatus_TASK_STATUS_RETRYING,
	graph.TaskCompleted: robonetv1.TaskStatus_TASK_STATUS_COMPLETED,
	graph.TaskFailed:    robonetv1.TaskStatus_TASK_STATUS_FAILED,
	graph.TaskSkipped:   robonetv1.TaskStatus_TASK_STATUS_SKIPPED,
	graph.TaskCancelled: robonetv1.TaskStatus_TASK_STATUS_CANCELLED,
}

var eventKindToProto = map[engine.EventKind]robonetv1.EventKind{
	engine.EventSnapshot:      robonetv1.EventKind_EVENT_KIND_SNAPSHOT,
	engine.EventState:         robonetv1.EventKind_EVENT_KIND_STATE,
	engine.EventTaskStarted:   robonetv1.EventKind_EVENT_KIND_TASK_STARTED,
	engine.EventTaskProgress:  robonetv1.EventKind_EVENT_KIND_TASK_PROGRESS,
	engine.EventTaskCompleted: robonetv1.EventKind_EVENT_KIND_TASK_COMPLETED,
	engine.EventTaskFailed:    robonetv1.EventKind_EVENT_KIND_TASK_FAILED,
	engine.EventTaskRetrying:  robonetv1.EventKind_EVENT_KIND_TASK_RETRYING,
	engine.EventTaskSkipped:   robonetv1.EventKind_EVENT_KIND_TASK_SKIPPED,
	engine.EventTaskCancelled: robonetv1.EventKind_EVENT_KIND_TASK_CANCELLED,
	engine.EventSignal:        robonetv1.EventKind_EVENT_KIND_SIGNAL,
	engine.EventPaused:        robonetv1.EventKind_EVENT_KIND_PAUSED,
	engine.EventResumed:       robonetv1.EventKind_EVENT_KIND_RESUMED,
	engine.EventRetried:       robonetv1.EventKind_EVENT_KIND_RETRIED,
}

func instanceToProto(v *engine.InstanceView) *robonetv1.Instance {
	in := &robonetv1.Instance{
		Id:              v.ID.String(),
		Workflow:        v.Workflow,
		Version:         v.Version,
		State:           stateToProto(v.State),
		InputsJson:      jsonText(v.Inputs, v.Inputs != nil),
		OutputsJson:     jsonText(v.Outputs, v.Outputs != nil),
		Error:           v.Error,
		CreatedAt:       timestamp(v.CreatedAt),
		StartedAt:       timestamp(v.StartedAt),
		FinishedAt:      timestamp(v.FinishedAt),
		CancelRequested: v.CancelRequested,
		Tasks:           make([]*robonetv1.TaskState, 0, len(v.Tasks)),
		Progress:        progressOf(v.Tasks),
		Paused:          v.Paused,
		Run:             clampInt32(max(v.Run, 1)),
	}
	for i := range v.Signals {
		in.Signals = append(in.Signals, signalToProto(&v.Signals[i]))
	}
	for i := range v.Tasks {
		in.Tasks = append(in.Tasks, taskToProto(&v.Tasks[i]))
	}
	if v.ETAKnown {
		in.Eta = durationpb.New(v.ETA)
	}
	if p := v.Parent; p != nil {
		in.Parent = &robonetv1.InstanceParent{InstanceId: p.InstanceID.String(), Execution: p.ExecutionID, Attempt: p.Attempt}
	}
	return in
}

func taskToProto(t *engine.TaskView) *robonetv1.TaskState {
	ts := &robonetv1.TaskState{
		Name:        t.Name,
		Capability:  t.Capability,
		Action:      t.Action,
		Needs:       t.Needs,
		Status:      taskStatusToProto[t.Status],
		Attempt:     t.Attempt,
		MaxAttempts: t.MaxAttempts,
		OutputJson:  jsonText(t.Output, hasOutput(t)),
		Error:       t.Error,
		StartedAt:   timestamp(t.StartedAt),
		FinishedAt:  timestamp(t.FinishedAt),
		Progress:    taskProgressToProto(t.Progress),
		Workflow:    t.Workflow,
	}
	if t.Workflow != "" {
		ts.WorkflowVersion = t.WorkflowVersion
	}
	ts.WaitSignal = t.WaitSignal
	if w := t.Wait; w != nil {
		ts.Waiting, ts.WaitUntil = true, timestamp(w.Until)
		if ts.WaitSignal == "" {
			ts.WaitSignal = w.Signal
		}
	}
	if t.Width >= 0 {
		ts.Spread, ts.Width, ts.Done, ts.Failed = true, t.Width, t.Done, t.Failed
	}
	if t.IsLoop {
		ts.Loop, ts.Iterations = true, max(t.Iterations, 0)
	}
	if len(t.Attempts) > 0 {
		ts.Attempts = make([]*robonetv1.TaskAttempt, 0, len(t.Attempts))
		for i := range t.Attempts {
			ts.Attempts = append(ts.Attempts, attemptToProto(&t.Attempts[i]))
		}
	}
	ts.AttemptsOmitted = int32(min(t.AttemptsOmitted, 1<<31-1)) //nolint:gosec // clamped
	return ts
}

func attemptToProto(a *engine.AttemptView) *robonetv1.TaskAttempt {
	pa := &robonetv1.TaskAttempt{
		Index:      a.Index,
		Attempt:    a.Attempt,
		Worker:     a.WorkerID,
		StartedAt:  timestamp(a.StartedAt),
		FinishedAt: timestamp(a.FinishedAt),
		Running:    a.Running,
		Ok:         a.OK,
		Error:      a.Error,
	}
	if a.WorkerID != "" {
		pa.Node = wag.Started{WorkerID: a.WorkerID}.Node()
	}
	if a.Child != uuid.Nil {
		pa.ChildInstanceId = a.Child.String()
	}
	return pa
}

// hasOutput reports whether a task has an output to show: a completed
// task (whose output may be null), or a failed one under skip (null).
func hasOutput(t *engine.TaskView) bool {
	return t.Output != nil || t.Status == graph.TaskCompleted
}

// progressOf counts units of work over an instance's tasks: a plain task
// (or a spread not expanded yet, or an empty one) is one unit, an expanded
// spread one unit per instance. "Running" means dispatched and not
// finished: the attempt runs, or waits for a free worker.
func progressOf(tasks []engine.TaskView) *robonetv1.InstanceProgress {
	p := &robonetv1.InstanceProgress{}
	for i := range tasks {
		t := &tasks[i]
		if t.Width > 0 {
			p.Total += t.Width
			switch t.Status {
			case graph.TaskSkipped, graph.TaskCancelled:
				p.Done += t.Width
				p.Skipped += t.Width
				continue
			}
			// Done counts completed instances; failed ones (under skip)
			// are resolved too. Instances not resolved while the spread
			// runs are dispatched: running, or queued at a worker.
			resolved := min(t.Done+t.Failed, t.Width)
			p.Done += resolved
			p.Failed += t.Failed
			if t.Status == graph.TaskRunning || t.Status == graph.TaskRetrying {
				p.Running += t.Width - resolved
			}
			continue
		}
		p.Total++
		if t.IsSpread && t.Width < 0 && (t.Status == graph.TaskWaiting || t.Status == graph.TaskRunning) {
			p.Unexpanded++
		}
		switch t.Status {
		case graph.TaskRunning:
			p.Running++
		case graph.TaskCompleted:
			p.Done++
		case graph.TaskFailed:
			p.Done++
			p.Failed++
		case graph.TaskSkipped, graph.TaskCancelled:
			p.Done++
			p.Skipped++
		}
	}
	return p
}

func taskProgressToProto(p *port.TaskProgress) *robonetv1.TaskProgress {
	if p == nil {
		return nil
	}
	tp := &robonetv1.TaskProgress{
		Attempt: p.Attempt, ExecutionId: p.ExecutionID, WorkerId: p.WorkerID, Seq: p.Seq,
		StepsDone: p.StepsDone, StepsTotal: p.StepsTotal, CpuPercent: p.CPUPercent, MemBytes: p.MemBytes,
		Message: p.Message, At: timestamp(p.At),
	}
	if p.ETA > 0 {
		tp.Eta = durationpb.New(p.ETA)
	}
	return tp
}

func eventToProto(e *engine.Event) *robonetv1.Event {
	ev := &robonetv1.Event{
		Seq:        e.Seq,
		Time:       timestamp(e.Time),
		Kind:       eventKindToProto[e.Kind],
		State:      stateToProto(e.State),
		Task:       e.Task,
		Index:      e.Index,
		Iteration:  e.Iteration,
		Attempt:    e.Attempt,
		OutputJson: jsonText(e.Output, e.Kind == engine.EventTaskCompleted),
		Error:      e.Error,
		RetryAt:    timestamp(e.RetryAt),
		Progress:   taskProgressToProto(e.Progress),
	}
	if e.Instance != nil {
		ev.Instance = instanceToProto(e.Instance)
	}
	if e.Signal != nil {
		ev.Signal = signalToProto(e.Signal)
	}
	if e.Kind == engine.EventRetried {
		ev.Run = clampInt32(e.Run)
	}
	return ev
}

// signalToProto is a signal of an instance; its payload is canonical JSON
// already, nil for null.
func signalToProto(s *engine.SignalInfo) *robonetv1.Signal {
	payload := "null"
	if len(s.Payload) > 0 {
		payload = string(s.Payload)
	}
	return &robonetv1.Signal{Seq: s.Seq, Name: s.Name, PayloadJson: payload, At: timestamp(s.At), Consumed: s.Consumed, By: s.By}
}

func summaryToProto(s *engine.InstanceSummary) *robonetv1.InstanceSummary {
	sum := &robonetv1.InstanceSummary{
		Id: s.ID.String(), Workflow: s.Workflow, Version: s.Version, State: stateToProto(s.State),
		Error: s.Error, CreatedAt: timestamp(s.CreatedAt), FinishedAt: timestamp(s.FinishedAt),
	}
	if s.Parent != uuid.Nil {
		sum.ParentInstanceId = s.Parent.String()
	}
	return sum
}

// jsonText encodes a canonical value as JSON text; present false (no
// value yet) gives "". A value that is not canonical cannot come out of
// the engine; it is reported inside the text rather than failing the call.
func jsonText(v any, present bool) string {
	if !present {
		return ""
	}
	data, err := value.Encode(v)
	if err != nil {
		return `{"error": "value not representable as JSON"}`
	}
	return string(data)
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func scheduleToProto(s engine.Schedule) *robonetv1.ScheduleInfo {
	p := &robonetv1.ScheduleInfo{
		Name: s.Name, Workflow: &robonetv1.WorkflowRef{Name: s.Workflow, Version: s.Version},
		InputsJson: string(value.MustEncode(orEmpty(s.Inputs))), Cron: s.Cron, AllowDuplicate: s.AllowDuplicate,
		Paused: s.Paused, NextRunAt: timestamp(s.NextRunAt), LastRunAt: timestamp(s.LastRunAt),
		LastSkipped: s.LastSkipped, CreatedAt: timestamp(s.CreatedAt),
	}
	if s.Interval > 0 {
		p.Interval = durationpb.New(s.Interval)
	}
	if s.Jitter > 0 {
		p.Jitter = durationpb.New(s.Jitter)
	}
	if s.LastInstanceID != uuid.Nil {
		p.LastInstanceId = s.LastInstanceID.String()
	}
	return p
}

// orEmpty is m, or an empty map for nil (encoded {}, not null).
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func poolStatsToProto(st wag.PoolStats) *robonetv1.PoolStats {
	return &robonetv1.PoolStats{
		Capability: st.Capability, Pool: st.Pool, Slots: clampInt32(st.Slots), Busy: clampInt32(st.Busy),
		Completed: st.Completed, Failed: st.Failed, PerMinute: clampInt32(st.PerMinute),
		LatencyP50: durationpb.New(st.LatencyP50), LatencyP99: durationpb.New(st.LatencyP99),
	}
}

func poolStatusToProto(p port.PoolStatus) *robonetv1.PoolStats {
	return poolStatsToProto(wag.PoolStats{Capability: p.Capability, Pool: p.Pool, Slots: p.Slots, Busy: p.Busy,
		Completed: p.Completed, Failed: p.Failed, PerMinute: p.PerMinute, LatencyP50: p.LatencyP50, LatencyP99: p.LatencyP99})
}
