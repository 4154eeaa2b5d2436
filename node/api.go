package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Reads is what the gRPC API's read calls need: the engine's read side
// (engine.Query) on any server, and the engine of the term on the leader,
// which adds the live state of what it runs.
type Reads interface {
	// ListWorkflows lists up to limit versions (0: a default page).
	ListWorkflows(ctx context.Context, name string, limit int) ([]engine.WorkflowInfo, error)
	GetInstance(ctx context.Context, id uuid.UUID) (engine.InstanceView, error)
	// WatchInstance calls fn with the instance's events after afterSeq
	// (a snapshot first when those are not available) until the instance
	// is terminal, fn fails, or ctx ends.
	WatchInstance(ctx context.Context, id uuid.UUID, afterSeq uint64, fn func(engine.Event) error) error
	ListInstances(ctx context.Context, req engine.ListRequest) (engine.ListResult, error)
}

// Engine is what the gRPC API needs from the workflow engine. The engine
// (package engine) implements it in-process; across a mesh the same
// methods are reached through the Raft leader.
type Engine interface {
	Reads
	RegisterWorkflow(ctx context.Context, file string, src []byte) (engine.WorkflowInfo, error)
	Submit(ctx context.Context, req engine.SubmitRequest) (engine.SubmitResult, error)
	CancelInstance(ctx context.Context, id uuid.UUID) error
}

// Bounds of what a client sends besides specs and inputs (whose limits are
// in Config). They are documented in docs/limits.md. A string over its
// bound is refused, and no error quotes more than maxEchoBytes of it.
const (
	defaultWorkflowLimit   = 100  // ListWorkflows' page when the request sets none
	maxPageSize            = 1000 // ListWorkflows.limit, ListInstances.page_size
	maxNameBytes           = 128  // workflow names (ref.name, filters)
	maxFilenameBytes       = 256  // InlineSpec.filename
	maxIdempotencyKeyBytes = 256
	maxPageTokenBytes      = 512
	maxStates              = 16 // ListInstances.states
	maxEchoBytes           = 64
)

// apiServer implements robonetv1.WorkflowServiceServer on top of an
// Engine. Its handlers translate protobuf to engine types and back and
// return engine errors as they are: the interceptors of newGRPCServer map
// them to status codes, once, in errorStatus.
type apiServer struct {
	robonetv1.UnimplementedWorkflowServiceServer
	reads Reads
	eng   Engine // nil on a read-only server (a follower's store reads)
	apiLimits
}

// apiLimits are the configured bounds of client requests (Config).
type apiLimits struct {
	maxSpecBytes  int
	maxInputBytes int
}

var _ robonetv1.WorkflowServiceServer = (*apiServer)(nil)

func (s *apiServer) RegisterWorkflow(ctx context.Context, req *robonetv1.RegisterWorkflowRequest) (*robonetv1.RegisterWorkflowResponse, error) {
	if err := s.checkSpec(req.GetSpec(), "spec"); err != nil {
		return nil, err
	}
	info, err := s.eng.RegisterWorkflow(ctx, req.GetSpec().GetFilename(), req.GetSpec().GetSource())
	if err != nil {
		return nil, err
	}
	return &robonetv1.RegisterWorkflowResponse{Workflow: workflowInfoToProto(info), Existing: info.Existing}, nil
}

func (s *apiServer) ListWorkflows(ctx context.Context, req *robonetv1.ListWorkflowsRequest) (*robonetv1.ListWorkflowsResponse, error) {
	if req.GetLimit() < 0 || req.GetLimit() > maxPageSize {
		return nil, badRequest("limit", fmt.Sprintf("must be between 0 (a default of %d) and %d", defaultWorkflowLimit, maxPageSize))
	}
	if err := checkString("name", req.GetName(), maxNameBytes); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultWorkflowLimit
	}
	infos, err := s.reads.ListWorkflows(ctx, req.GetName(), limit)
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.ListWorkflowsResponse{Workflows: make([]*robonetv1.WorkflowInfo, 0, len(infos))}
	for _, info := range infos {
		resp.Workflows = append(resp.Workflows, workflowInfoToProto(info))
	}
	return resp, nil
}

func (s *apiServer) SubmitWorkflow(ctx context.Context, req *robonetv1.SubmitWorkflowRequest) (*robonetv1.SubmitWorkflowResponse, error) {
	sub := engine.SubmitRequest{IdempotencyKey: req.GetIdempotencyKey()}
	switch w := req.GetWorkflow().(type) {
	case *robonetv1.SubmitWorkflowRequest_Ref:
		if w.Ref.GetName() == "" {
			return nil, badRequest("ref.name", "name the registered workflow to run")
		}
		if err := checkString("ref.name", w.Ref.GetName(), maxNameBytes); err != nil {
			return nil, err
		}
		sub.Name, sub.Version = w.Ref.GetName(), w.Ref.GetVersion()
	case *robonetv1.SubmitWorkflowRequest_Spec:
		if err := s.checkSpec(w.Spec, "spec"); err != nil {
			return nil, err
		}
		sub.Spec, sub.SpecFile = w.Spec.GetSource(), w.Spec.GetFilename()
	default:
		return nil, badRequest("workflow", "set either ref (a registered workflow) or spec (an inline spec)")
	}
	if err := checkString("idempotency_key", sub.IdempotencyKey, maxIdempotencyKeyBytes); err != nil {
		return nil, err
	}
	if n := len(req.GetInputsJson()); n > s.maxInputBytes {
		return nil, badRequest("inputs_json", fmt.Sprintf("the inputs are %d bytes of JSON, the limit is %d bytes (the node's max-input-bytes); pass a reference (a path or URL) to large data instead", n, s.maxInputBytes))
	}
	inputs, err := decodeInputs(req.GetInputsJson())
	if err != nil {
		return nil, err
	}
	sub.Inputs = inputs
	if d := req.GetDeadline(); d != nil {
		switch {
		case d.GetSeconds() < 0 || d.GetNanos() < 0:
			return nil, badRequest("deadline", "must not be negative")
		case d.GetSeconds() > int64(engine.MaxDeadline/time.Second) || d.AsDuration() > engine.MaxDeadline:
			return nil, badRequest("deadline", fmt.Sprintf("is too large; the maximum is %s (10 years)", engine.MaxDeadline))
		case d.CheckValid() != nil:
			return nil, badRequest("deadline", "is not a valid duration (nanos must be below one second)")
		}
		sub.Deadline = d.AsDuration()
	}
	res, err := s.eng.Submit(ctx, sub)
	if err != nil {
		return nil, err
	}
	return &robonetv1.SubmitWorkflowResponse{
		InstanceId: res.InstanceID.String(),
		Workflow:   workflowInfoToProto(res.Workflow),
		Existing:   res.Existing,
	}, nil
}

func (s *apiServer) GetInstance(ctx context.Context, req *robonetv1.GetInstanceRequest) (*robonetv1.GetInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	view, err := s.reads.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	return &robonetv1.GetInstanceResponse{Instance: instanceToProto(&view)}, nil
}

func (s *apiServer) WatchInstance(req *robonetv1.WatchInstanceRequest, stream grpc.ServerStreamingServer[robonetv1.WatchInstanceResponse]) error {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return err
	}
	return s.reads.WatchInstance(stream.Context(), id, req.GetAfterSeq(), func(ev engine.Event) error {
		return stream.Send(&robonetv1.WatchInstanceResponse{Event: eventToProto(&ev)})
	})
}

func (s *apiServer) CancelInstance(ctx context.Context, req *robonetv1.CancelInstanceRequest) (*robonetv1.CancelInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.eng.CancelInstance(ctx, id); err != nil {
		return nil, err
	}
	return &robonetv1.CancelInstanceResponse{}, nil
}

func (s *apiServer) ListInstances(ctx context.Context, req *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error) {
	if req.GetPageSize() < 0 || req.GetPageSize() > maxPageSize {
		return nil, badRequest("page_size", fmt.Sprintf("must be between 0 (a default page) and %d", maxPageSize))
	}
	if err := checkString("workflow", req.GetWorkflow(), maxNameBytes); err != nil {
		return nil, err
	}
	if err := checkString("page_token", req.GetPageToken(), maxPageTokenBytes); err != nil {
		return nil, err
	}
	if n := len(req.GetStates()); n > maxStates {
		return nil, badRequest("states", fmt.Sprintf("%d states given, the limit is %d", n, maxStates))
	}
	lr := engine.ListRequest{Workflow: req.GetWorkflow(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for i, st := range req.GetStates() {
		es, ok := stateFromProto(st)
		if !ok {
			return nil, badRequest(fmt.Sprintf("states[%d]", i), fmt.Sprintf("unknown state %v", st))
		}
		lr.States = append(lr.States, es)
	}
	res, err := s.reads.ListInstances(ctx, lr)
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.ListInstancesResponse{
		Instances:     make([]*robonetv1.InstanceSummary, 0, len(res.Instances)),
		NextPageToken: res.NextPageToken,
	}
	for i := range res.Instances {
		resp.Instances = append(resp.Instances, summaryToProto(&res.Instances[i]))
	}
	return resp, nil
}

// checkSpec rejects a missing or oversized inline spec, or an unusable file
// name, before they reach the compiler.
func (s *apiServer) checkSpec(sp *robonetv1.InlineSpec, field string) error {
	switch {
	case sp == nil || len(sp.GetSource()) == 0:
		return badRequest(field+".source", "the spec is empty")
	case len(sp.GetSource()) > s.maxSpecBytes:
		return badRequest(field+".source", fmt.Sprintf("the spec is %d bytes; the limit is %d bytes (the node's max-spec-bytes)", len(sp.GetSource()), s.maxSpecBytes))
	}
	return checkString(field+".filename", sp.GetFilename(), maxFilenameBytes)
}

// checkString refuses a client string that is not UTF-8, holds control
// characters, or is longer than limit bytes. The error does not quote it.
func checkString(field, v string, limit int) error {
	switch {
	case len(v) > limit:
		return badRequest(field, fmt.Sprintf("is %d bytes long, the limit is %d", len(v), limit))
	case !utf8.ValidString(v):
		return badRequest(field, "is not valid UTF-8")
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return badRequest(field, "contains control characters")
	}
	return nil
}

// decodeInputs reads the inputs JSON object; empty means none.
func decodeInputs(text string) (map[string]any, error) {
	if text == "" {
		return nil, nil
	}
	v, err := value.Decode([]byte(text))
	if err != nil {
		return nil, badRequest("inputs_json", "not valid JSON: "+err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("inputs_json", "want a JSON object of inputs, got "+value.TypeName(v))
	}
	return m, nil
}

func parseInstanceID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, badRequest("instance_id", value.QuoteClipped(s, maxEchoBytes)+" is not an instance id (a UUID)")
	}
	return id, nil
}

// badRequest is an InvalidArgument status naming the offending field.
func badRequest(field, description string) error {
	st := status.New(codes.InvalidArgument, field+": "+description)
	return withDetails(st, &errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: description}},
	})
}

// apiInterceptors map handler errors to statuses and contain panics.
type apiInterceptors struct {
	log *zap.Logger
}

func (a apiInterceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer a.recover(info.FullMethod, &err)
	resp, err = handler(ctx, req)
	if err != nil {
		return nil, errorStatus(a.log, info.FullMethod, err)
	}
	return resp, nil
}

func (a apiInterceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer a.recover(info.FullMethod, &err)
	if err := handler(srv, ss); err != nil {
		return errorStatus(a.log, info.FullMethod, err)
	}
	return nil
}

// recover turns a handler panic into an Internal error: one bad request
// must not take the node down.
func (a apiInterceptors) recover(method string, err *error) {
	if r := recover(); r != nil {
		a.log.Error("panic in a gRPC handler", zap.String("method", method), zap.Any("panic", r), zap.Stack("stack"))
		*err = status.Error(codes.Internal, "internal error")
	}
}

// errStopping reports a call that arrived while the node shuts down.
var errStopping = errors.New("the node is shutting down")
