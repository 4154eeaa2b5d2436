package port

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// AttemptKey names one attempt of one execution (a task, or one instance of
// a spread task) of one workflow instance.
type AttemptKey struct {
	InstanceID  uuid.UUID
	ExecutionID string // stable within the instance, e.g. "probe[3]"; see graph.ExecutionID
	Attempt     uint32 // 1-based
}

// IdempotencyKey is the key handlers get to deduplicate side effects:
// dispatch is at-least-once, so the same attempt may run twice.
func (k AttemptKey) IdempotencyKey() string {
	return k.InstanceID.String() + "/" + k.ExecutionID + "#" + itoa(k.Attempt)
}

func itoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TaskDispatch is one attempt the engine hands to the Waggler layer.
type TaskDispatch struct {
	AttemptKey
	// Term is the leadership term of the engine that dispatched the
	// attempt: its fencing token. A receiver that has seen a newer term
	// refuses the attempt with ErrStaleTerm, so a deposed engine cannot
	// start work; one that sees a newer term than it knew adopts it.
	Term       uint64
	Workflow   string // workflow name, for logs and metrics
	Task       string // task name
	Index      int32  // spread index, -1 for a plain task
	Capability string
	Action     string
	// Input is the evaluated `with`: a canonical value (package value).
	// Read-only: it may share structure with other tasks' data.
	Input any
	// Timeout bounds the attempt on the worker; zero means none. The engine
	// also enforces it with its own timer.
	Timeout time.Duration
	// Verify, when 2 or 3, asks the Waggler layer to run the attempt on
	// that many distinct worker nodes and report the majority's output
	// (the task's verify); 0 or 1: once.
	Verify int
	// Resumed says an engine of an earlier term may have dispatched the
	// attempt: it is dispatched while the engine takes over an instance
	// an earlier engine held (ClaimedInstance.HeldBefore). A worker may
	// run it already, so the Waggler layer treats it as handed out before
	// (wag.Handoff.MayRun), not as new.
	Resumed bool
	// Group and Avoid are set by the Waggler layer, never by the engine:
	// on one run (a replica) of a verified attempt, Group names the
	// attempt and the Waggler places the runs of one group on distinct
	// worker nodes, none of them in Avoid.
	Group string
	Avoid []string
	// Node, on a run of a task with on: every_node, is the node it is
	// pinned to: the Waggler assigns it only to a worker of that node,
	// and fails it ("node X left while running") rather than moving it
	// when that node's worker is declared dead, or when no worker of the
	// node registers in time. Empty: any node.
	Node string
}

// Dispatcher is how the engine hands work to the Waggler layer: package wag
// in-process on one node, and the same interface over gRPC streams across
// nodes. Implementations must not block on task execution; they may block
// briefly for backpressure, honouring ctx.
type Dispatcher interface {
	// Dispatch hands attempts over and answers for each, in order: nil
	// means accepted — the Waggler layer then owes the engine a result for
	// it, or a report that it was lost (TaskResult.Lost). A batch that
	// crosses nodes cannot be all-or-none, hence one answer per attempt;
	// a nil slice means every attempt was accepted. The engine retries
	// the attempts refused, except those refused with an error wrapping
	// ErrStaleTerm.
	Dispatch(ctx context.Context, tasks []TaskDispatch) []error
	// Cancel asks for attempts dispatched under term to stop (their
	// results, if any still arrive, are ignored by the engine). Unknown
	// attempts are ignored. A receiver that has seen a newer term ignores
	// the request and answers ErrStaleTerm: the attempts belong to a newer
	// engine now, which may have dispatched them again.
	Cancel(ctx context.Context, term uint64, attempts []AttemptKey) error
	// Nodes returns the nodes that serve capability now: alive, not
	// quarantined, with workers of it; sorted by name. A task with on:
	// every_node runs once on each (TaskDispatch.Node). It must not block.
	Nodes(capability string) []string
}

// TaskResult is the outcome of one attempt, reported by the Waggler layer.
type TaskResult struct {
	AttemptKey
	// Lost reports an accepted attempt the Waggler layer can no longer
	// account for, without an outcome: its Waggler is gone with no
	// successor that knows it, its epoch was superseded, no worker can be
	// reached. Error says why. The engine dispatches the same attempt again
	// (dispatch is at-least-once), up to MaxLost times, and then counts it
	// as a failed attempt, so an attempt without a timeout never waits
	// forever for a result nobody owes.
	Lost   bool
	OK     bool
	Output any // canonical value when OK
	// OutputJSON is Output's canonical JSON when the sender encoded it
	// already (the local worker pool checks an output's size that way);
	// nil: the engine encodes Output.
	OutputJSON []byte
	Error      string // why, when !OK; includes exit code and stderr tail for exec
	WorkerID   string
	StartedAt  time.Time
	FinishedAt time.Time
}

// TaskProgress is what a worker's heartbeat says about a running attempt.
type TaskProgress struct {
	AttemptKey
	WorkerID   string
	Seq        uint64 // heartbeat sequence number
	StepsDone  int64
	StepsTotal int64 // 0 when unknown
	ETA        time.Duration
	CPUPercent float64
	MemBytes   uint64
	Message    string
	At         time.Time
}

// ResultSink receives results and progress from the Waggler layer. The
// engine implements it. Results for attempts the engine no longer waits for
// (stale, duplicate, cancelled) are ignored; each attempt's result is
// recorded exactly once.
type ResultSink interface {
	TaskResult(ctx context.Context, r TaskResult)
	TaskProgress(ctx context.Context, p TaskProgress)
}
