package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// errorStatus maps an error from a handler to the status the client gets.
// It is the only place where engine errors become gRPC codes:
//
//	spec.ErrorList               INVALID_ARGUMENT + SpecErrors (file:line:col, task, message per problem)
//	graph.ErrInvalidInput        INVALID_ARGUMENT + BadRequest (one violation per input problem)
//	port.ErrNotFound           NOT_FOUND
//	port.ErrVersionConflict    ALREADY_EXISTS
//	port.ErrIdempotencyConflict ALREADY_EXISTS
//	port.ErrInvalidArgument    INVALID_ARGUMENT
//	engine.ErrInstanceFinished   FAILED_PRECONDITION (cancelling a finished instance)
//	engine.ErrUnknownSignal      FAILED_PRECONDITION (no wait of the workflow takes the signal)
//	port.ErrInstanceLive       FAILED_PRECONDITION (retrying an instance still running)
//	port.ErrNotRetryable       FAILED_PRECONDITION (retrying an instance that completed)
//	port.ErrTooManySignals     RESOURCE_EXHAUSTED (the instance holds too many signals not taken)
//	port.ErrStoreUnavailable   UNAVAILABLE + ErrorInfo (reason STORE_UNAVAILABLE, outcome applied
//	                             "no" or "unknown") + RetryInfo: the database is unreachable or failing over
//	engine.ErrStopped, shutdown  UNAVAILABLE
//	*mesh.NotLeaderError         UNAVAILABLE + ErrorInfo (reason NOT_LEADER, the leader's name and gRPC address)
//	ErrNoLeader                  UNAVAILABLE (no leader elected within the forwarding window)
//	context errors               CANCELLED / DEADLINE_EXCEEDED
//	a status already             as it is (request validation in the handlers)
//	anything else                INTERNAL "internal error"; the cause is logged, never sent
//
// Messages of client errors are the engine's own wording, which names the
// workflow, instance or input concerned and never carries internals.
func errorStatus(log *zap.Logger, method string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		list      spec.ErrorList
		notLeader *mesh.NotLeaderError
	)
	switch {
	case errors.As(err, &notLeader):
		return withDetails(status.New(codes.Unavailable, notLeader.Error()), &errdetails.ErrorInfo{
			Reason: ReasonNotLeader, Domain: ErrorDomain,
			Metadata: map[string]string{"leader": notLeader.Leader, "leader_grpc": notLeader.LeaderGRPC},
		})
	case errors.Is(err, ErrNoLeader):
		return status.Error(codes.Unavailable, err.Error()+
			"; the servers may lack a quorum (roboctl members shows who is alive); retry later")
	case errors.As(err, &list):
		return specErrorsStatus(list)
	case errors.Is(err, graph.ErrInvalidInput):
		return invalidInputStatus(err)
	case errors.Is(err, port.ErrInvalidPageToken):
		return badRequest("page_token", "not a token this server returned; start again without a page_token")
	case errors.Is(err, engine.ErrUnloadable):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, port.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, port.ErrVersionConflict), errors.Is(err, port.ErrIdempotencyConflict), errors.Is(err, port.ErrScheduleExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, port.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, engine.ErrInstanceFinished), errors.Is(err, engine.ErrUnknownSignal),
		errors.Is(err, port.ErrInstanceLive), errors.Is(err, port.ErrNotRetryable):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, port.ErrTooManySignals):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, port.ErrStoreUnavailable):
		return storeUnavailableStatus(log, method, err)
	case errors.Is(err, engine.ErrStopped), errors.Is(err, errStopping):
		return status.Error(codes.Unavailable, "the node is shutting down; retry on another node or later")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "request deadline exceeded")
	}
	log.Error("internal error in a gRPC call", zap.String("method", method), zap.Error(err))
	return status.Error(codes.Internal, "internal error (the node's log has the cause)")
}

// The ErrorInfo reasons of UNAVAILABLE answers.
const (
	ErrorDomain = "robonet.dev"
	// ReasonNotLeader: a redirect; metadata leader and leader_grpc.
	ReasonNotLeader = "NOT_LEADER"
	// ReasonStoreUnavailable: the database could not take the call (it is
	// unreachable or failing over). Metadata "outcome": "not_applied"
	// (nothing of the call happened) or "unknown" (the connection was lost
	// after a write was sent: a submission may have been stored; retry it
	// with the same idempotency key to learn its instance).
	ReasonStoreUnavailable = "STORE_UNAVAILABLE"
)

// storeRetryDelay is the RetryInfo of a STORE_UNAVAILABLE answer: about
// the time a replicated database takes to fail over, as documented.
const storeRetryDelay = time.Second

// storeUnavailableStatus is the answer to a call the store could not take
// now.
func storeUnavailableStatus(log *zap.Logger, method string, err error) error {
	outcome, msg := "not_applied", "the database is unavailable (unreachable, or failing over): nothing was done; retry"
	if errors.Is(err, port.ErrOutcomeUnknown) {
		outcome = "unknown"
		msg = "the database became unavailable (it may be failing over) while the call was being written: it may or may not " +
			"have taken effect; retry it (a submission with the same idempotency key answers the instance it started, if any)"
	}
	log.Warn("the store is unavailable", zap.String("method", method), zap.String("outcome", outcome), zap.Error(err))
	return withDetails(status.New(codes.Unavailable, msg),
		&errdetails.ErrorInfo{Reason: ReasonStoreUnavailable, Domain: ErrorDomain, Metadata: map[string]string{"outcome": outcome}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(storeRetryDelay)})
}

// specErrorsStatus reports every problem of a spec that does not compile.
func specErrorsStatus(list spec.ErrorList) error {
	details := &robonetv1.SpecErrors{Errors: make([]*robonetv1.SpecError, 0, len(list))}
	for _, e := range list {
		details.Errors = append(details.Errors, &robonetv1.SpecError{
			File: e.File, Line: int32(e.Line), Column: int32(e.Column), Task: e.Task,
			Field: e.Field, Message: e.Msg, Hint: e.Hint, Text: e.Error(),
		})
	}
	msg := "the workflow spec does not compile: " + list[0].Error()
	if len(list) > 1 {
		msg = fmt.Sprintf("the workflow spec does not compile (%d problems): %s", len(list), list[0].Error())
	}
	return withDetails(status.New(codes.InvalidArgument, msg), details)
}

// invalidInputStatus reports every problem with the submitted inputs, one
// field violation each (BindInputs joins them).
func invalidInputStatus(err error) error {
	errs := joinedErrors(err)
	br := &errdetails.BadRequest{}
	for _, e := range errs {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: "inputs", Description: e.Error()})
	}
	return withDetails(status.New(codes.InvalidArgument, err.Error()), br)
}

// withDetails attaches details to st; if that fails (it cannot for these
// well-formed messages) the status goes out without them.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if withD, err := st.WithDetails(details...); err == nil {
		return withD.Err()
	}
	return st.Err()
}

// joinedErrors returns the errors of the first errors.Join found down err's
// chain of wrappers, or err alone.
func joinedErrors(err error) []error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok { //nolint:errorlint // walking the chain itself
			return j.Unwrap()
		}
	}
	return []error{err}
}
