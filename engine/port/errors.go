package port

import "errors"

// Errors of the operations of the ports that the engine, its adapters and
// its callers share (besides the Store's, in store.go). Test them with
// errors.Is.
var (
	// ErrInvalidArgument: the request itself is malformed (e.g. both or
	// neither of a workflow name and an inline spec, a negative deadline).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrStaleTerm: a Dispatcher refused a dispatch or cancel because it
	// has seen a newer leadership term than the request's.
	ErrStaleTerm = errors.New("stale leadership term")
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
