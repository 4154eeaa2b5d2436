package wag

import (
	"time"

	"github.com/robonet/robonet/engine/port"
)

// Progress is what an action says about how far it has come. It rides the
// next heartbeat of its attempt.
type Progress struct {
	StepsDone  int64
	StepsTotal int64         // 0 when unknown
	ETA        time.Duration // 0 when unknown
	Message    string
}

// Heartbeat is what a worker sends its Waggler for a running attempt, every
// heartbeat interval. Across nodes it travels on the worker's stream.
type Heartbeat struct {
	Key        port.AttemptKey
	Generation uint64 // the Waggler's generation of the assignment
	WorkerID   string
	// Seq is 1, 2, 3, ... per assignment (attempt and generation): lower or
	// equal to the last accepted one is a replay or reorder.
	Seq        uint64
	Progress   Progress
	CPUPercent float64 // of one core, 0 when not measured
	MemBytes   uint64  // resident set, 0 when not measured
	SentAt     time.Time
}

// Report is a worker's final word on an assignment.
type Report struct {
	Key        port.AttemptKey
	Generation uint64
	WorkerID   string
	OK         bool
	Output     any    // canonical value when OK
	OutputJSON []byte // Output's canonical JSON, when the worker encoded it (nil: not at hand)
	Error      string // why, when !OK
	StartedAt  time.Time
	FinishedAt time.Time
	// Cancelled says the worker stopped the assignment because a Waggler
	// (or the engine, through one) cancelled it. Such a report only frees
	// the worker: it is never the attempt's result, which is the business
	// of the generation the attempt moved to, if any.
	Cancelled bool
}
