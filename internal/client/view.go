package client

import (
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The views below are the -o json and -o yaml forms of API objects: plain
// structs with snake_case keys, states as short upper-case words, task
// statuses as lower-case words and values (inputs, outputs) embedded as
// JSON rather than as JSON text, so `jq .outputs.total` works.

// InstanceView is an instance for -o json/yaml.
type InstanceView struct {
	ID              string          `json:"instance_id"`
	Workflow        string          `json:"workflow"`
	Version         uint32          `json:"version"`
	State           string          `json:"state"`
	Inputs          json.RawMessage `json:"inputs,omitempty"`
	Outputs         json.RawMessage `json:"outputs,omitempty"`
	Error           string          `json:"error,omitempty"`
	CreatedAt       *time.Time      `json:"created_at,omitempty"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	CancelRequested bool            `json:"cancel_requested,omitempty"`
	// Paused: held back by roboctl pause (state PAUSED while it is live).
	Paused bool `json:"paused,omitempty"`
	// Run is the instance's run: 1, then one more per roboctl retry.
	Run      int32        `json:"run,omitempty"`
	Progress ProgressView `json:"progress"`
	// ETA is the estimated time left while the instance runs, as a Go
	// duration ("1m20s"); absent when the node does not know one (see
	// docs/workflows.md, "Progress and ETA").
	ETA string `json:"eta,omitempty"`
	// Parent is, for a child instance, the task attempt of its parent that
	// started it.
	Parent *ParentView `json:"parent,omitempty"`
	Tasks  []TaskView  `json:"tasks"`
	// Signals are the signals sent to the instance, in the order they were
	// recorded.
	Signals []SignalView `json:"signals,omitempty"`
}

// SignalView is a signal sent to an instance.
type SignalView struct {
	Seq     int64           `json:"seq"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	At      *time.Time      `json:"at,omitempty"`
	// Consumed: a waiting task took it; By names the task's execution and
	// attempt ("approve#1").
	Consumed bool   `json:"consumed"`
	By       string `json:"by,omitempty"`
}

// WaitView describes a task with wait:.
type WaitView struct {
	// Signal is the signal it takes; empty for a wait for a time.
	Signal string `json:"signal,omitempty"`
	// Waiting: it waits right now.
	Waiting bool `json:"waiting"`
	// Until is when the wait ends (for, until) or times out (a signal's
	// timeout), while it waits; absent when it has no end.
	Until *time.Time `json:"until,omitempty"`
}

// ParentView names the task attempt that started a child instance.
type ParentView struct {
	ID        string `json:"instance_id"`
	Execution string `json:"execution"` // "scan", "scan[2]" or "scan#2"
	Attempt   uint32 `json:"attempt"`
}

// ProgressView counts units of work (see robonetv1.InstanceProgress).
type ProgressView struct {
	Total   int32 `json:"total"`
	Done    int32 `json:"done"`
	Running int32 `json:"running"`
	Failed  int32 `json:"failed"`
	Skipped int32 `json:"skipped"`
	// Unexpanded spread tasks count one unit each until they know their
	// width: Total grows then.
	Unexpanded int32 `json:"unexpanded,omitempty"`
}

// TaskView is one task of an instance.
type TaskView struct {
	Name        string          `json:"name"`
	Capability  string          `json:"capability"`
	Action      string          `json:"action"`
	Status      string          `json:"status"`
	Attempt     uint32          `json:"attempt"`
	MaxAttempts uint32          `json:"max_attempts"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       string          `json:"error,omitempty"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	Spread      *SpreadView     `json:"spread,omitempty"`
	Loop        *LoopView       `json:"loop,omitempty"`
	// Workflow is, for a task whose body is a child workflow, its name,
	// and WorkflowVersion the version its children run (when known);
	// each attempt's child_instance_id is the child it started.
	Workflow        string `json:"workflow,omitempty"`
	WorkflowVersion uint32 `json:"workflow_version,omitempty"`
	// Wait is set for a task with wait:.
	Wait     *WaitView     `json:"wait,omitempty"`
	Progress *TaskProgress `json:"progress,omitempty"`
	// Attempts lists every attempt (of every instance, for a spread task),
	// by index, then attempt.
	Attempts []AttemptView `json:"attempts"`
	// AttemptsOmitted counts attempts of a wide spread left out of
	// Attempts (the node lists at most 1,000 per task).
	AttemptsOmitted int32 `json:"attempts_omitted,omitempty"`
}

// AttemptView is one attempt of a task. Every key is always present:
// node, worker and the times are empty (null) when unknown.
type AttemptView struct {
	// Index is the spread index; present for spread tasks only.
	Index *int32 `json:"index,omitempty"`
	// Iteration is the loop's iteration; present for loop tasks only.
	Iteration  *int32     `json:"iteration,omitempty"`
	Attempt    uint32     `json:"attempt"`
	Node       string     `json:"node"`
	Worker     string     `json:"worker"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Running: in flight (running, or waiting for a worker); ok and error
	// then say nothing yet.
	Running bool   `json:"running"`
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	// Child is the child instance the attempt started, for a task whose
	// body is a child workflow.
	Child string `json:"child_instance_id,omitempty"`
}

// LoopView summarises the iterations of a loop task.
type LoopView struct {
	Iterations int32 `json:"iterations"` // started so far
}

// SpreadView summarises the instances of a spread task.
type SpreadView struct {
	Width  int32 `json:"width"`
	Done   int32 `json:"done"`
	Failed int32 `json:"failed"`
}

// TaskProgress is the latest heartbeat of a running attempt.
type TaskProgress struct {
	ExecutionID string     `json:"execution_id,omitempty"`
	Attempt     uint32     `json:"attempt,omitempty"`
	WorkerID    string     `json:"worker_id,omitempty"`
	Seq         uint64     `json:"seq"`
	StepsDone   int64      `json:"steps_done"`
	StepsTotal  int64      `json:"steps_total,omitempty"`
	ETA         string     `json:"eta,omitempty"`
	Message     string     `json:"message,omitempty"`
	At          *time.Time `json:"at,omitempty"`
}

// EventView is one event of an instance's stream.
type EventView struct {
	Seq   uint64     `json:"seq"`
	Time  *time.Time `json:"time,omitempty"`
	Kind  string     `json:"kind"`
	State string     `json:"state"`
	Task  string     `json:"task,omitempty"`
	Index *int32     `json:"index,omitempty"`
	// Iteration is set instead of Index for an iteration of a loop.
	Iteration *int32          `json:"iteration,omitempty"`
	Attempt   uint32          `json:"attempt,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	RetryAt   *time.Time      `json:"retry_at,omitempty"`
	Progress  *TaskProgress   `json:"progress,omitempty"`
	Instance  *InstanceView   `json:"instance,omitempty"`
	// Signal is the signal a signal event received.
	Signal *SignalView `json:"signal,omitempty"`
	// Run is the run a retried event started.
	Run int32 `json:"run,omitempty"`
}

// SummaryView is one row of an instance listing.
type SummaryView struct {
	ID         string     `json:"instance_id"`
	Workflow   string     `json:"workflow"`
	Version    uint32     `json:"version"`
	State      string     `json:"state"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Parent is, for a child instance, its parent instance.
	Parent string `json:"parent_instance_id,omitempty"`
}

// WorkflowView is a registered workflow version.
type WorkflowView struct {
	Name        string     `json:"name"`
	Version     uint32     `json:"version"`
	IRHash      string     `json:"ir_hash"`
	Description string     `json:"description,omitempty"`
	Tasks       int32      `json:"tasks"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
}

// StateName is an instance state as a short word: "COMPLETE".
func StateName(s robonetv1.InstanceState) string {
	return strings.TrimPrefix(s.String(), "INSTANCE_STATE_")
}

// TaskStatusName is a task status as a short word: "completed".
func TaskStatusName(s robonetv1.TaskStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATUS_"))
}

// EventKindName is an event kind as a short word: "task_started".
func EventKindName(k robonetv1.EventKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "EVENT_KIND_"))
}

// ParseState reads a state name in any case ("complete", "FAILED").
func ParseState(s string) (robonetv1.InstanceState, bool) {
	v, ok := robonetv1.InstanceState_value["INSTANCE_STATE_"+strings.ToUpper(s)]
	if !ok || v == 0 {
		return 0, false
	}
	return robonetv1.InstanceState(v), true
}

// Instance returns the view of in.
func Instance(in *robonetv1.Instance) InstanceView {
	v := InstanceView{
		ID:              in.GetId(),
		Workflow:        in.GetWorkflow(),
		Version:         in.GetVersion(),
		State:           StateName(in.GetState()),
		Inputs:          rawJSON(in.GetInputsJson()),
		Outputs:         rawJSON(in.GetOutputsJson()),
		Error:           in.GetError(),
		CreatedAt:       timeOf(in.GetCreatedAt()),
		StartedAt:       timeOf(in.GetStartedAt()),
		FinishedAt:      timeOf(in.GetFinishedAt()),
		CancelRequested: in.GetCancelRequested(),
		Paused:          in.GetPaused(),
		Run:             in.GetRun(),
		Progress:        progressOf(in.GetProgress()),
		Tasks:           make([]TaskView, 0, len(in.GetTasks())),
	}
	for _, s := range in.GetSignals() {
		v.Signals = append(v.Signals, signalOf(s))
	}
	if eta := in.GetEta(); eta != nil {
		v.ETA = roundDuration(eta.AsDuration()).String()
	}
	if p := in.GetParent(); p != nil {
		v.Parent = &ParentView{ID: p.GetInstanceId(), Execution: p.GetExecution(), Attempt: p.GetAttempt()}
	}
	for _, t := range in.GetTasks() {
		tv := TaskView{
			Name:        t.GetName(),
			Capability:  t.GetCapability(),
			Action:      t.GetAction(),
			Status:      TaskStatusName(t.GetStatus()),
			Attempt:     t.GetAttempt(),
			MaxAttempts: t.GetMaxAttempts(),
			Output:      rawJSON(t.GetOutputJson()),
			Error:       t.GetError(),
			StartedAt:   timeOf(t.GetStartedAt()),
			FinishedAt:  timeOf(t.GetFinishedAt()),
			Progress:    taskProgressOf(t.GetProgress()),
			Workflow:    t.GetWorkflow(),
		}
		if tv.Workflow != "" {
			tv.WorkflowVersion = t.GetWorkflowVersion()
		}
		if t.GetSpread() {
			tv.Spread = &SpreadView{Width: t.GetWidth(), Done: t.GetDone(), Failed: t.GetFailed()}
		}
		if t.GetLoop() {
			tv.Loop = &LoopView{Iterations: t.GetIterations()}
		}
		if t.GetWaitSignal() != "" || t.GetWaiting() {
			tv.Wait = &WaitView{Signal: t.GetWaitSignal(), Waiting: t.GetWaiting(), Until: timeOf(t.GetWaitUntil())}
		}
		tv.Attempts, tv.AttemptsOmitted = make([]AttemptView, 0, len(t.GetAttempts())), t.GetAttemptsOmitted()
		for _, a := range t.GetAttempts() {
			av := AttemptView{
				Attempt: a.GetAttempt(), Node: a.GetNode(), Worker: a.GetWorker(),
				StartedAt: timeOf(a.GetStartedAt()), FinishedAt: timeOf(a.GetFinishedAt()),
				Running: a.GetRunning(), OK: a.GetOk(), Error: a.GetError(), Child: a.GetChildInstanceId(),
			}
			if t.GetSpread() {
				idx := a.GetIndex()
				av.Index = &idx
			}
			if t.GetLoop() && a.GetIndex() >= 0 {
				idx := a.GetIndex()
				av.Iteration = &idx
			}
			tv.Attempts = append(tv.Attempts, av)
		}
		v.Tasks = append(v.Tasks, tv)
	}
	return v
}

// Event returns the view of ev.
func Event(ev *robonetv1.Event) EventView {
	v := EventView{
		Seq:      ev.GetSeq(),
		Time:     timeOf(ev.GetTime()),
		Kind:     EventKindName(ev.GetKind()),
		State:    StateName(ev.GetState()),
		Task:     ev.GetTask(),
		Attempt:  ev.GetAttempt(),
		Output:   rawJSON(ev.GetOutputJson()),
		Error:    ev.GetError(),
		RetryAt:  timeOf(ev.GetRetryAt()),
		Progress: taskProgressOf(ev.GetProgress()),
	}
	if ev.GetTask() != "" && ev.GetIndex() >= 0 {
		idx := ev.GetIndex()
		if ev.GetIteration() {
			v.Iteration = &idx
		} else {
			v.Index = &idx
		}
	}
	if ev.GetInstance() != nil {
		iv := Instance(ev.GetInstance())
		v.Instance = &iv
	}
	if s := ev.GetSignal(); s != nil {
		sv := signalOf(s)
		v.Signal = &sv
	}
	v.Run = ev.GetRun()
	return v
}

func signalOf(s *robonetv1.Signal) SignalView {
	payload := rawJSON(s.GetPayloadJson())
	if payload == nil {
		payload = json.RawMessage("null")
	}
	return SignalView{Seq: s.GetSeq(), Name: s.GetName(), Payload: payload, At: timeOf(s.GetAt()), Consumed: s.GetConsumed(), By: s.GetBy()}
}

// Summary returns the view of one listing row.
func Summary(s *robonetv1.InstanceSummary) SummaryView {
	return SummaryView{
		ID: s.GetId(), Workflow: s.GetWorkflow(), Version: s.GetVersion(), State: StateName(s.GetState()),
		Error: s.GetError(), CreatedAt: timeOf(s.GetCreatedAt()), FinishedAt: timeOf(s.GetFinishedAt()),
		Parent: s.GetParentInstanceId(),
	}
}

// Workflow returns the view of a registered version.
func Workflow(w *robonetv1.WorkflowInfo) WorkflowView {
	return WorkflowView{
		Name: w.GetName(), Version: w.GetVersion(), IRHash: w.GetIrHash(), Description: w.GetDescription(),
		Tasks: w.GetTasks(), CreatedAt: timeOf(w.GetCreatedAt()),
	}
}

func progressOf(p *robonetv1.InstanceProgress) ProgressView {
	return ProgressView{Total: p.GetTotal(), Done: p.GetDone(), Running: p.GetRunning(), Failed: p.GetFailed(), Skipped: p.GetSkipped(),
		Unexpanded: p.GetUnexpanded()}
}

func taskProgressOf(p *robonetv1.TaskProgress) *TaskProgress {
	if p == nil {
		return nil
	}
	tp := &TaskProgress{
		ExecutionID: p.GetExecutionId(), Attempt: p.GetAttempt(), WorkerID: p.GetWorkerId(), Seq: p.GetSeq(),
		StepsDone: p.GetStepsDone(), StepsTotal: p.GetStepsTotal(), Message: p.GetMessage(), At: timeOf(p.GetAt()),
	}
	if d := durationOf(p.GetEta()); d > 0 {
		tp.ETA = d.String()
	}
	return tp
}

// rawJSON embeds a JSON text from the API; empty means absent. Text that
// is not valid JSON (it always is, from a robonode) is embedded as a string
// so the view stays valid JSON.
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if !json.Valid([]byte(s)) {
		b, _ := json.Marshal(s)
		return b
	}
	return json.RawMessage(s)
}

func timeOf(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// RawJSON is a *_json field of the API as JSON to print: the text itself
// when it is JSON, else the text as a JSON string; nil when empty.
func RawJSON(s string) json.RawMessage { return rawJSON(s) }

// TimeOf is a timestamp of the API as a time to print; nil when unset.
func TimeOf(ts *timestamppb.Timestamp) *time.Time { return timeOf(ts) }
