package engine

import (
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// This file holds the types of the engine's client-facing operations
// (register, submit, get, watch, cancel, list), which the gRPC API in
// package node translates to and from protobuf.

// WorkflowInfo describes a registered workflow version.
type WorkflowInfo struct {
	Name        string
	Version     uint32
	IRHash      string
	Description string
	Tasks       int
	// Capabilities are those its tasks need, sorted.
	Capabilities []string
	CreatedAt    time.Time
	// Existing is set when registration found the same version already
	// registered with the same IR (a no-op).
	Existing bool
}

// SubmitRequest starts a workflow instance. Exactly one of (Name, Version)
// and Spec is set: a registered version, or an inline spec that is compiled
// and registered on the way (same rules as RegisterWorkflow).
type SubmitRequest struct {
	Name    string
	Version uint32 // 0 with Name: the latest registered version
	Spec    []byte // inline YAML or JSON
	// SpecFile names the inline spec in error messages.
	SpecFile string
	// Inputs are bound against the workflow's declared inputs; unknown,
	// missing or mistyped inputs are rejected before anything is queued.
	Inputs map[string]any
	// IdempotencyKey, when set, makes resubmission return the existing
	// instance instead of starting another.
	IdempotencyKey string
	// Deadline bounds the whole instance; zero means none. An instance
	// still running at its deadline is FAILED and its tasks cancelled.
	Deadline time.Duration
	// Dev is the edit-and-run loop for an inline spec: when its version is
	// registered with another definition, the spec is registered as the
	// version after the highest registered one (or as the registered version
	// that has its definition) instead of being refused. Versions stay
	// immutable; SubmitResult.DevVersion says which one ran.
	Dev bool
}

// MaxSubmitBatchItems bounds the items of one SubmitBatch call, so one
// call is one store transaction of bounded size.
const MaxSubmitBatchItems = 1000

// SubmitBatchRequest starts an instance of one workflow version per item
// (Name, Version, Spec and SpecFile as in SubmitRequest).
type SubmitBatchRequest struct {
	Name     string
	Version  uint32
	Spec     []byte
	SpecFile string
	Items    []SubmitItem
}

// SubmitItem is one instance of a SubmitBatchRequest; its fields mean
// what SubmitRequest's do.
type SubmitItem struct {
	Inputs         map[string]any
	IdempotencyKey string
	Deadline       time.Duration
}

// SubmitBatchResult names the instances, one per item in order.
type SubmitBatchResult struct {
	Workflow  WorkflowInfo
	Instances []port.Queued
}

// SubmitResult names the instance.
type SubmitResult struct {
	InstanceID uuid.UUID
	Workflow   WorkflowInfo
	Existing   bool // the idempotency key matched an earlier submission
	// DevVersion is set when Dev moved the spec off its own version, which
	// was registered with another definition.
	DevVersion bool
}

// InstanceView is an instance with its tasks, for GetInstance.
type InstanceView struct {
	ID              uuid.UUID
	Workflow        string
	Version         uint32
	State           port.InstanceState
	Inputs          map[string]any
	Outputs         map[string]any // when COMPLETE
	Error           string         // when FAILED or CANCELLED
	CreatedAt       time.Time
	StartedAt       time.Time // zero until claimed
	FinishedAt      time.Time // zero until terminal
	CancelRequested bool
	Tasks           []TaskView // one per task of the workflow, in dependency order
	// ETA is the estimated time left until the instance finishes, as of
	// the read, when ETAKnown: see instanceETA (eta.go) for what it is
	// made of. Only the engine that holds the instance knows it (from its
	// workers' heartbeats); views read from the Store, of finished
	// instances and of instances being cancelled leave it unknown.
	ETA      time.Duration
	ETAKnown bool
	// Parent is the task attempt that started the instance, when it is a
	// child instance (a task whose body is a workflow starts one per
	// attempt); nil otherwise.
	Parent *port.ParentRef
	// Paused: PauseInstance holds the instance back (State is PAUSED
	// while it is live).
	Paused bool
	// Run counts the instance's runs: 1, then one more per RetryInstance.
	Run int
	// Signals are the signals sent to the instance, in the order they
	// were recorded, taken by a wait or not.
	Signals []SignalInfo
}

// TaskView is one task of an instance. For a spread task it summarises the
// instances (Width, Done, Failed); Output is then the ordered list once the
// barrier fired.
type TaskView struct {
	Name        string
	Capability  string
	Action      string
	Needs       []string         // the tasks it depends on: the edges of the DAG
	Status      graph.TaskStatus // as Graph.Task says, a spread or a loop that goes on shown as running
	Attempt     uint32           // latest attempt (0: never dispatched)
	MaxAttempts uint32
	Output      any
	// Error says why the task is not completed: the error of its latest
	// attempt while it is retrying or once it failed (for a spread task,
	// of its first failed instance). It is empty while an attempt runs and
	// once the task completed: earlier attempts' errors are in Attempts.
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
	Progress   *port.TaskProgress // latest heartbeat of a running attempt
	// Spread tasks only: instance counts (Width -1 for a plain task, and
	// for a spread task not expanded yet).
	Width, Done, Failed int32
	// IsSpread is set for a spread task, expanded or not.
	IsSpread bool
	// IsLoop is set for a loop task, started or not; Iterations counts
	// the iterations it started (-1 before it starts): its Attempts are
	// those of every iteration, Index being the iteration.
	IsLoop     bool
	Iterations int32
	// Workflow is, for a task whose body is a child workflow (Capability
	// and Action are then empty), that workflow's name, and
	// WorkflowVersion the version its children run (0 when unknown).
	// Each attempt's Child is the child instance it started.
	Workflow        string
	WorkflowVersion uint32
	// Attempts lists the task's attempts — for a spread task, those of
	// every instance — ordered by index, then attempt: each finished
	// attempt as recorded, then the latest one if it has no result yet (in
	// flight, or cancelled). At most MaxAttemptsShown are listed; when
	// there are more, the failed and running ones are kept first and
	// AttemptsOmitted counts the rest.
	Attempts        []AttemptView
	AttemptsOmitted int
	// Wait is set while a task with wait: waits (its Status is running).
	Wait *WaitInfo
	// WaitSignal is the signal a wait: {signal: …} task takes, set
	// whatever its status, for views and the dashboard.
	WaitSignal string
}

// MaxAttemptsShown bounds TaskView.Attempts: a wide spread lists at most
// this many attempts, so that a view stays well within one API message.
const MaxAttemptsShown = 1000

// AttemptView is one attempt of a task, or of one instance of a spread
// task.
type AttemptView struct {
	Index   int32 // spread index, or a loop's iteration; -1 for a plain task
	Attempt uint32
	// WorkerID is the worker that ran it ("node/capability/slot" for the
	// Waggler layer's workers). Empty when unknown: an attempt that timed
	// out (the engine records those), or one in flight before its worker's
	// first heartbeat.
	WorkerID string
	// StartedAt is when its worker started it; for an attempt in flight,
	// when this engine dispatched it (zero in views read from the Store).
	StartedAt  time.Time
	FinishedAt time.Time // zero while in flight, and for a cancelled attempt
	// Running: in flight — running, or waiting for a worker.
	Running bool
	OK      bool
	// Error is why it failed; "cancelled" for an attempt cancelled in
	// flight.
	Error string
	// Child is, for an attempt of a task whose body is a child workflow,
	// the child instance it started (uuid.Nil: none was started — a limit
	// refused it, or its inputs did not bind). WorkerID is then empty.
	Child uuid.UUID
}

// EventKind classifies instance events.
type EventKind string

// Event kinds.
const (
	// EventSnapshot carries the whole current view (Instance); it starts a
	// watch, and replaces the client's view when the requested sequence
	// number is no longer available (the engine restarted, or the log was
	// trimmed).
	EventSnapshot      EventKind = "snapshot"
	EventState         EventKind = "state"          // instance state changed
	EventTaskStarted   EventKind = "task_started"   // an attempt was dispatched
	EventTaskProgress  EventKind = "task_progress"  // a heartbeat with progress
	EventTaskCompleted EventKind = "task_completed" // an attempt (or a whole spread) succeeded
	EventTaskFailed    EventKind = "task_failed"    // an attempt failed
	EventTaskRetrying  EventKind = "task_retrying"  // a retry is scheduled
	EventTaskSkipped   EventKind = "task_skipped"
	EventTaskCancelled EventKind = "task_cancelled"
	EventSignal        EventKind = "signal"  // a signal was received (Signal)
	EventPaused        EventKind = "paused"  // PauseInstance took effect
	EventResumed       EventKind = "resumed" // ResumeInstance took effect
	EventRetried       EventKind = "retried" // RetryInstance started run Run
)

// Event is one entry of an instance's event stream. Seq increases by one per
// event of the instance; WatchInstance resumes after a given Seq.
type Event struct {
	Seq   uint64
	Time  time.Time
	Kind  EventKind
	State port.InstanceState // EventState, and the state after every event
	Task  string
	Index int32 // spread index or loop iteration, -1 for a plain task or a whole spread or loop
	// Iteration is set when Index is a loop's iteration ("task#3").
	Iteration bool
	Attempt   uint32
	Output    any
	Error     string
	RetryAt   time.Time          // EventTaskRetrying
	Progress  *port.TaskProgress // EventTaskProgress
	Instance  *InstanceView      // EventSnapshot
	Signal    *SignalInfo        // EventSignal
	Run       int                // EventRetried: the run that starts
}

// ListRequest selects instances.
type ListRequest struct {
	Workflow     string               // empty: all
	States       []port.InstanceState // empty: all
	IDPrefix     string               // empty: all (see InstanceFilter.IDPrefix)
	CreatedAfter time.Time            // zero: all
	Limit        int                  // 0: DefaultInstanceLimit
	PageToken    string
}

// InstanceSummary is one row of ListInstances.
type InstanceSummary struct {
	ID         uuid.UUID
	Workflow   string
	Version    uint32
	State      port.InstanceState
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time
	// Parent is, for a child instance, its parent instance; uuid.Nil
	// otherwise.
	Parent uuid.UUID
}

// ListResult is one page of instances.
type ListResult struct {
	Instances     []InstanceSummary
	NextPageToken string
}

// SignalRequest delivers a signal to a live instance (SignalInstance).
type SignalRequest struct {
	InstanceID uuid.UUID
	// Name is the signal's name, the one a task's wait: {signal: NAME}
	// takes.
	Name string
	// Payload is canonical JSON; nil means null. A wait that takes the
	// signal outputs it.
	Payload []byte
	// IdempotencyKey, when set, delivers the signal once however many
	// times it is sent with that key.
	IdempotencyKey string
}

// SignalResult reports a signal's delivery.
type SignalResult struct {
	// Seq numbers the signal in the store (increasing).
	Seq int64
	// Duplicate: the idempotency key was seen before; that signal stands
	// and nothing else was delivered.
	Duplicate bool
	// Delivered: a task waiting for the signal took it at once (otherwise
	// it is kept until a wait reaches it).
	Delivered bool
}

// SignalInfo is a signal in an instance's history.
type SignalInfo struct {
	Seq     int64
	Name    string
	Payload []byte // canonical JSON
	At      time.Time
	// Consumed: a wait took it; By names the execution and attempt
	// ("approve#1").
	Consumed bool
	By       string
}

// WaitInfo describes a task that waits (wait:) right now.
type WaitInfo struct {
	// Signal is the signal it waits for; empty for a wait for a time.
	Signal string
	// Until is when the wait ends (wait: for / until) or times out
	// (wait: {signal, timeout}); zero: never.
	Until time.Time
}

// EventRequest publishes an event (PublishEvent): every workflow whose
// trigger lists Name gets an instance with Payload as its event input.
type EventRequest struct {
	Name    string
	Payload []byte // canonical JSON; nil means null
	// IdempotencyKey, when set, starts each triggered workflow once per
	// key, however many times the event is published with it.
	IdempotencyKey string
}

// EventStart is an instance an event started (or had started, Existing).
type EventStart struct {
	Workflow   string
	Version    uint32
	InstanceID uuid.UUID
	Existing   bool
}

// EventResult lists what an event started, one entry per triggered
// workflow.
type EventResult struct {
	Started []EventStart
}

// RetryResult reports a RetryInstance.
type RetryResult struct {
	// Run is the instance's run that starts now: 2 on its first retry.
	Run int
	// Tasks are the tasks that run again, sorted.
	Tasks []string
}
