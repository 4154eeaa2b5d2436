package engine

import "errors"

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
)
