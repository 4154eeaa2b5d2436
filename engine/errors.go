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
	// ErrInvalidArgument: the request itself is malformed (e.g. both or
	// neither of a workflow name and an inline spec, a negative deadline).
	ErrInvalidArgument = errors.New("invalid argument")
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
	// ErrStaleTerm: a Dispatcher refused a dispatch or cancel because it
	// has seen a newer leadership term than the request's.
	ErrStaleTerm = errors.New("stale leadership term")
	// ErrUnknownSignal: a signal names no wait: {signal: …} of the
	// instance's workflow, so nothing could ever take it.
	ErrUnknownSignal = errors.New("no task of the workflow waits for this signal")
	// ErrInstanceLive: the operation needs a finished instance (retry),
	// and this one is still queued or running.
	ErrInstanceLive = errors.New("instance is still running")
	// ErrNotRetryable: retry was asked of an instance that COMPLETED:
	// only a FAILED or CANCELLED instance runs again.
	ErrNotRetryable = errors.New("instance completed; only a failed or cancelled instance can be retried")
	// ErrTooManySignals: the instance holds as many signals no wait took
	// yet as its limit allows.
	ErrTooManySignals = errors.New("too many pending signals")
)

// MaxLost is how many times one attempt may be reported lost
// (TaskResult.Lost) and dispatched again before it counts as failed.
const MaxLost = 10

// MaxDeadline is the longest deadline a submission may set.
const MaxDeadline = 10 * 365 * 24 * time.Hour
