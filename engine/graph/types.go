package graph

import (
	"fmt"
	"strings"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// State is the lifecycle state of a workflow instance.
//
//	PENDING ──Start──▶ RUNNING ──▶ GATHERING ──▶ COMPLETE
//	   │                  │            │
//	   │                  ├────────────┴──▶ FAILED
//	   └──────────────────┴────────────┴──▶ CANCELLED (Cancel)
type State uint8

const (
	// Pending: created, Start not called yet.
	Pending State = iota
	// Running: some task is still waiting for its predecessors.
	Running
	// Gathering: every task has been dispatched, resolved or is waiting for a
	// retry; the instance only waits for results now.
	Gathering
	// Complete: every task resolved and the outputs were evaluated.
	Complete
	// Failed: a task failed under abort, exhausted its retries under retry, or
	// an output could not be evaluated. Err says why.
	Failed
	// Cancelled: Cancel was called before the instance finished.
	Cancelled
)

var stateNames = [...]string{"PENDING", "RUNNING", "GATHERING", "COMPLETE", "FAILED", "CANCELLED"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Terminal reports whether no further transition is possible.
func (s State) Terminal() bool { return s >= Complete }

// active reports whether the instance accepts completions and timers.
func (s State) active() bool { return s == Running || s == Gathering }

// TaskRef names one schedulable unit: a task, or one instance of a spread
// task.
type TaskRef struct {
	// Node is the task's index in Plan (the position in Workflow.Tasks).
	Node int32
	// Index is the spread index, or the iteration of a loop task, or -1
	// for a task that is neither a spread instance nor an iteration
	// (including a spread or a loop task as a whole).
	Index int32
}

// Ref returns the TaskRef of a task that is not a spread instance.
func Ref(node int32) TaskRef { return TaskRef{Node: node, Index: -1} }

// Result is the outcome of one attempt, reported through Graph.Complete.
type Result struct {
	// Output is the attempt's output, a value as defined by package value
	// (other Go number, slice and map types are normalized). The graph keeps
	// it as the task's output: do not modify it afterwards.
	Output any
	// Err, when non-nil, means the attempt failed; Output is then ignored.
	Err error
}

// EffectKind says what the runloop must do for an Effect.
type EffectKind uint8

const (
	// Dispatch: run attempt Effect.Attempt of Effect.Task with Effect.Input.
	// Dispatch is at-least-once (Resume repeats in-flight dispatches), so
	// workers deduplicate by ExecutionID.
	Dispatch EffectKind = iota + 1
	// Cancel: Effect.Task is cancelled. When Effect.Attempt is not 0, stop
	// that in-flight attempt; its completion, if it still arrives, is
	// ignored. Attempt 0 means nothing runs to stop: the task was waiting
	// for a retry, or it is a need of a join with cancel_rest that was
	// still waiting for its own needs, or a spread task as a whole (after
	// the Cancel effects of its instances).
	Cancel
	// SetTimer: call Graph.Fire(Effect.Timer, now) once now >= Timer.At.
	// Timers need no explicit cancellation: a timer that is no longer
	// relevant is ignored when it fires.
	SetTimer
	// Finished: the instance reached terminal state Effect.State.
	Finished
	// Scatter: Effect.Task, a task with on: every_node (Index -1), is
	// ready: call Graph.Scatter with the nodes that serve its capability
	// now. The task waits (TaskSpreading, width 0) until then.
	Scatter
)

var effectKindNames = [...]string{"?", "dispatch", "cancel", "set-timer", "finished", "scatter"}

func (k EffectKind) String() string {
	if int(k) < len(effectKindNames) {
		return effectKindNames[k]
	}
	return fmt.Sprintf("EffectKind(%d)", uint8(k))
}

// Effect is one instruction from the graph to the runloop. Effects are
// returned in the order they must be applied.
type Effect struct {
	Kind    EffectKind
	Task    TaskRef // Dispatch, Cancel
	Attempt uint32  // Dispatch, Cancel (1-based; a Cancel with nothing in flight has 0)
	// Input is the evaluated `with` of a Dispatch. It may share structure
	// with task outputs and plan literals: treat it as read-only.
	Input any
	Timer Timer // SetTimer
	State State // Finished
}

// TimerKind distinguishes the timers a graph asks for.
type TimerKind uint8

const (
	// Retry: dispatch the next attempt of Timer.Task.
	Retry TimerKind = iota + 1
	// Timeout: attempt Timer.Attempt of Timer.Task has run too long.
	Timeout
	// Next: the pause (loop.every) before iteration Timer.Task.Index of a
	// loop is over: dispatch it. Timer.Attempt is 0.
	Next
	// WaitOver: attempt Timer.Attempt of Timer.Task, a wait for a
	// duration or until a time, is over: Fire completes it, its output
	// being the due time (RFC 3339, UTC).
	WaitOver
)

func (k TimerKind) String() string {
	switch k {
	case Retry:
		return "retry"
	case Timeout:
		return "timeout"
	case Next:
		return "next"
	case WaitOver:
		return "wait"
	}
	return fmt.Sprintf("TimerKind(%d)", uint8(k))
}

// Timer is a request to call Graph.Fire at At. A timer is identified by
// (Kind, Task, Attempt); At is always in UTC.
type Timer struct {
	Kind    TimerKind
	Task    TaskRef
	Attempt uint32
	At      time.Time
}

// TaskStatus is the status of a task or a spread instance, as reported by
// Graph.Task.
type TaskStatus uint8

const (
	// TaskWaiting: some predecessor is unresolved (or the instance has not
	// started).
	TaskWaiting TaskStatus = iota
	// TaskRunning: an attempt is in flight.
	TaskRunning
	// TaskRetrying: an attempt failed and the retry timer is pending.
	TaskRetrying
	// TaskSpreading: a spread task whose instances are not all resolved;
	// or a task with on: every_node whose runs are not all resolved, or
	// that waits for its node list (Graph.Scatter; width 0).
	TaskSpreading
	// TaskCompleted: resolved with an output.
	TaskCompleted
	// TaskFailed: resolved as failed. Under on_failure skip its output is
	// null and dependents run; otherwise it is the task that failed the
	// workflow.
	TaskFailed
	// TaskSkipped: resolved without running, because its `when` guard was
	// false or every predecessor was skipped. Its output is null.
	TaskSkipped
	// TaskCancelled: its attempt (or retry) was cancelled because the
	// workflow failed or was cancelled, or it was a need of a join with
	// cancel_rest that had not resolved when the join was decided (then
	// it may never have started).
	TaskCancelled
	// TaskLooping: a loop task whose iterations are not done.
	TaskLooping
	// TaskUnknown: the TaskRef names no task or instance. (Never stored:
	// the statuses before it keep their values in snapshots.)
	TaskUnknown
)

var taskStatusNames = [...]string{"waiting", "running", "retrying", "spreading", "completed", "failed", "skipped", "cancelled", "looping", "unknown"}

func (s TaskStatus) String() string {
	if int(s) < len(taskStatusNames) {
		return taskStatusNames[s]
	}
	return fmt.Sprintf("TaskStatus(%d)", uint8(s))
}

// resolved reports whether a task with this status no longer blocks its
// successors.
func (s TaskStatus) resolved() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskSkipped
}

// TaskInfo describes a task or spread instance, for the API and tests.
type TaskInfo struct {
	Status TaskStatus
	// Attempt is the latest attempt dispatched (0 if none).
	Attempt uint32
	// Output is the output once completed (for a spread task: the list of
	// instance outputs in index order). Read-only.
	Output any
	// Error is the reason of the latest failed attempt, empty if none.
	Error string
	// Width is the number of instances of an expanded spread task, -1
	// otherwise. Pending is how many of them are unresolved.
	Width, Pending int32
	// Iterations is, for a loop task that started, the number of
	// iterations started so far (completed ones and the current one, not
	// one waiting for its pause); -1 otherwise. Attempt is then the
	// current (or last) iteration's attempt.
	Iterations int32
	// Due is the pending retry time (TaskRetrying), the timeout deadline
	// of the in-flight attempt (TaskRunning with a timeout; for a signal
	// wait, when it times out), or when a wait for a duration or until a
	// time is over (TaskRunning); zero otherwise.
	Due time.Time
}

// Stats counts what a Graph has handled since NewGraph or Restore. Stats
// are not part of the snapshot.
type Stats struct {
	// Dispatched counts Dispatch effects for new attempts.
	Dispatched uint64
	// Redispatched counts Dispatch effects repeated by Resume.
	Redispatched uint64
	// Completed counts accepted successful completions.
	Completed uint64
	// FailedAttempts counts accepted failed completions, timeouts and
	// attempts whose `with` could not be evaluated.
	FailedAttempts uint64
	// TimedOut counts attempts failed by their timeout.
	TimedOut uint64
	// Retries counts retry timers set.
	Retries uint64
	// Skipped counts tasks resolved as skipped.
	Skipped uint64
	// Cancelled counts Cancel effects for in-flight attempts.
	Cancelled uint64
	// Joins counts joins decided: fired on their join.min-th completed
	// need, or failed or skipped because join.min could no longer be
	// reached. The runloop snapshots after an event that decided one (see
	// docs/workflows.md, "N-of-M joins").
	Joins uint64
	// RestCancelled counts needs cancelled by a join's cancel_rest.
	RestCancelled uint64
	// StaleCompletions counts completions ignored because they named an
	// unknown task, an attempt not in flight, or arrived after the end.
	StaleCompletions uint64
	// StaleTimers counts timers that fired without effect.
	StaleTimers uint64
}

// WorkflowError explains why an instance FAILED. It is reconstructed exactly
// by Restore, so it carries strings rather than wrapped errors.
type WorkflowError struct {
	// Task is the name of the failed task; empty when Output is set.
	Task string
	// Index is the spread index of the failed instance, or the failed
	// iteration of a loop task, or -1.
	Index int32
	// Loop is set when Task is a loop task: Index is then an iteration,
	// and a failure with Attempt 0 is one of the loop itself (its until,
	// or its max reached).
	Loop bool
	// Attempt is the failed attempt; 0 when the task failed before any
	// attempt (its `when` or `spread` could not be evaluated).
	Attempt uint32
	// Policy is the task's failure policy.
	Policy robonetv1.FailurePolicy
	// Output names the workflow output that could not be evaluated.
	Output string
	// Reason says what went wrong.
	Reason string
}

func (e *WorkflowError) Error() string {
	var b strings.Builder
	if e.Output != "" {
		fmt.Fprintf(&b, "output %q: %s", e.Output, e.Reason)
		return b.String()
	}
	fmt.Fprintf(&b, "task %q", e.Task)
	switch {
	case e.Index >= 0 && e.Loop:
		fmt.Fprintf(&b, "#%d", e.Index)
	case e.Index >= 0:
		fmt.Fprintf(&b, "[%d]", e.Index)
	}
	// The workflow failed: no retry is scheduled, whatever the policy,
	// and the message must not suggest one.
	switch {
	case e.Attempt == 0 && e.Loop:
		b.WriteString(" failed: ")
	case e.Attempt == 0:
		b.WriteString(" failed before its first attempt: ")
	case e.Policy == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT:
		fmt.Fprintf(&b, " attempt %d failed (on_failure: abort): ", e.Attempt)
	default:
		fmt.Fprintf(&b, " attempt %d failed, its last (no retry left): ", e.Attempt)
	}
	b.WriteString(e.Reason)
	return b.String()
}
