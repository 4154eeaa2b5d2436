package engine

import (
	"errors"
	"time"
)

// Errors of the client-facing operations, besides the Store's (ErrNotFound,
// ErrVersionConflict, ErrIdempotencyConflict), spec.ErrorList (a spec that
// does not compile) and graph.ErrInvalidInput (inputs that do not bind). All
// are wrapped with context; test them with errors.Is or errors.As. The gRPC
// layer maps them to status codes once, at the edge.
var (
	// ErrInstanceFinished: the operation needs a live instance, and this
	// one already reached COMPLETE, FAILED or CANCELLED.
	ErrInstanceFinished = errors.New("instance already finished")
	// ErrStopped: the engine was stopped; start a new one.
	ErrStopped = errors.New("engine stopped")
	// ErrUnloadable: a stored workflow version cannot be loaded by this
	// engine (its IR does not decode, or its plan is refused, e.g. by
	// limits lowered since it was registered). Its instances cannot run
	// here; registering the spec again as a new version is the way out.
	ErrUnloadable = errors.New("workflow version cannot be loaded")
	// ErrUnknownSignal: a signal names no wait: {signal: …} of the
	// instance's workflow, so nothing could ever take it.
	ErrUnknownSignal = errors.New("no task of the workflow waits for this signal")
)

// MaxLost is how many times one attempt may be reported lost
// (TaskResult.Lost) and dispatched again before it counts as failed.
const MaxLost = 10

// MaxDeadline is the longest deadline a submission may set.
const MaxDeadline = 10 * 365 * 24 * time.Hour
