package engine

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
}

// Dispatcher is how the engine hands work to the Waggler layer: package wag
// in-process on one node, and the same interface over gRPC streams across
// nodes. Implementations must not block on task execution; they may block
// briefly for backpressure, honouring ctx.
type Dispatcher interface {
	// Dispatch starts attempts. An error means none of them was accepted
	// and the engine will retry the dispatch.
	Dispatch(ctx context.Context, tasks []TaskDispatch) error
	// Cancel asks for attempts to stop (their results, if any still
	// arrive, are ignored by the engine). Unknown attempts are ignored.
	Cancel(ctx context.Context, attempts []AttemptKey) error
}

// TaskResult is the outcome of one attempt, reported by the Waggler layer.
type TaskResult struct {
	AttemptKey
	OK         bool
	Output     any    // canonical value when OK
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
