package node

import (
	"context"
	"errors"
	"fmt"
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

// Engine is what the gRPC API needs from the workflow engine. The engine
// (package engine) implements it in-process; across a mesh the same
// methods are reached through the Raft leader.
type Engine interface {
	RegisterWorkflow(ctx context.Context, file string, src []byte) (engine.WorkflowInfo, error)
	ListWorkflows(ctx context.Context, name string) ([]engine.WorkflowInfo, error)
	Submit(ctx context.Context, req engine.SubmitRequest) (engine.SubmitResult, error)
	GetInstance(ctx context.Context, id uuid.UUID) (engine.InstanceView, error)
	// WatchInstance calls fn with the instance's events after afterSeq
	// (a snapshot first when those are not available) until the instance
	// is terminal, fn fails, or ctx ends.
	WatchInstance(ctx context.Context, id uuid.UUID, afterSeq uint64, fn func(engine.Event) error) error
	CancelInstance(ctx context.Context, id uuid.UUID) error
	ListInstances(ctx context.Context, req engine.ListRequest) (engine.ListResult, error)
}

// defaultWorkflowLimit is ListWorkflows' page when the request sets none.
const defaultWorkflowLimit = 100

// apiServer implements robonetv1.WorkflowServiceServer on top of an
// Engine. Its handlers translate protobuf to engine types and back and
// return engine errors as they are: the interceptors of newGRPCServer map
// them to status codes, once, in errorStatus.
type apiServer struct {
	robonetv1.UnimplementedWorkflowServiceServer
	eng          Engine
	maxSpecBytes int
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
	if req.GetLimit() < 0 {
		return nil, badRequest("limit", "must not be negative")
	}
	infos, err := s.eng.ListWorkflows(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultWorkflowLimit
	}
	infos = infos[:min(limit, len(infos))]
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
		sub.Name, sub.Version = w.Ref.GetName(), w.Ref.GetVersion()
	case *robonetv1.SubmitWorkflowRequest_Spec:
		if err := s.checkSpec(w.Spec, "spec"); err != nil {
			return nil, err
		}
		sub.Spec, sub.SpecFile = w.Spec.GetSource(), w.Spec.GetFilename()
	default:
		return nil, badRequest("workflow", "set either ref (a registered workflow) or spec (an inline spec)")
	}
	if len(sub.IdempotencyKey) > 256 || !utf8.ValidString(sub.IdempotencyKey) {
		return nil, badRequest("idempotency_key", "must be valid UTF-8 of at most 256 bytes")
	}
	inputs, err := decodeInputs(req.GetInputsJson())
	if err != nil {
		return nil, err
	}
	sub.Inputs = inputs
	if d := req.GetDeadline(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, badRequest("deadline", "must be a non-negative duration")
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
	view, err := s.eng.GetInstance(ctx, id)
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
	return s.eng.WatchInstance(stream.Context(), id, req.GetAfterSeq(), func(ev engine.Event) error {
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
	if req.GetPageSize() < 0 {
		return nil, badRequest("page_size", "must not be negative")
	}
	lr := engine.ListRequest{Workflow: req.GetWorkflow(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for i, st := range req.GetStates() {
		es, ok := stateFromProto(st)
		if !ok {
			return nil, badRequest(fmt.Sprintf("states[%d]", i), fmt.Sprintf("unknown state %v", st))
		}
		lr.States = append(lr.States, es)
	}
	res, err := s.eng.ListInstances(ctx, lr)
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

// checkSpec rejects a missing or oversized inline spec before it reaches
// the compiler.
func (s *apiServer) checkSpec(sp *robonetv1.InlineSpec, field string) error {
	switch {
	case sp == nil || len(sp.GetSource()) == 0:
		return badRequest(field+".source", "the spec is empty")
	case len(sp.GetSource()) > s.maxSpecBytes:
		return badRequest(field+".source", fmt.Sprintf("the spec is %d bytes; the limit is %d bytes", len(sp.GetSource()), s.maxSpecBytes))
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
		return uuid.Nil, badRequest("instance_id", fmt.Sprintf("%q is not an instance id (a UUID)", s))
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
