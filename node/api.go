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
	"google.golang.org/protobuf/types/known/durationpb"

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
	ListSchedules(ctx context.Context) ([]engine.Schedule, error)
}

// Engine is what the gRPC API needs from the workflow engine. The engine
// (package engine) implements it in-process; across a mesh the same
// methods are reached through the Raft leader.
type Engine interface {
	Reads
	RegisterWorkflow(ctx context.Context, file string, src []byte) (engine.WorkflowInfo, error)
	Submit(ctx context.Context, req engine.SubmitRequest) (engine.SubmitResult, error)
	SubmitBatch(ctx context.Context, req engine.SubmitBatchRequest) (engine.SubmitBatchResult, error)
	CancelInstance(ctx context.Context, id uuid.UUID) error
	SignalInstance(ctx context.Context, req engine.SignalRequest) (engine.SignalResult, error)
	PublishEvent(ctx context.Context, req engine.EventRequest) (engine.EventResult, error)
	// RetryInstance runs a failed or cancelled instance again, from the
	// task named from (and what depends on it), or "" from what did not
	// complete.
	RetryInstance(ctx context.Context, id uuid.UUID, from string) (engine.RetryResult, error)
	PauseInstance(ctx context.Context, id uuid.UUID) error
	ResumeInstance(ctx context.Context, id uuid.UUID) error
	CreateSchedule(ctx context.Context, s engine.ScheduleSpec) (engine.Schedule, error)
	PauseSchedule(ctx context.Context, name string) (engine.Schedule, error)
	ResumeSchedule(ctx context.Context, name string) (engine.Schedule, error)
	DeleteSchedule(ctx context.Context, name string) error
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
	// served returns the capabilities some up member serves; nil: the
	// submissions are not checked against the mesh.
	served func() map[string]bool
	apiLimits
}

// unservedWarnings warns of each capability a workflow needs that no up
// member serves: its tasks would wait in silence.
func (s *apiServer) unservedWarnings(info engine.WorkflowInfo) []string {
	if s.served == nil {
		return nil
	}
	served := s.served()
	var out []string
	for _, c := range info.Capabilities {
		if !served[c] {
			out = append(out, fmt.Sprintf("no node serves capability %s: the tasks that need it wait until one does (roboctl members shows what each node serves)", c))
		}
	}
	return out
}

// apiLimits are the configured bounds of client requests (Config).
type apiLimits struct {
	maxSpecBytes   int
	maxInputBytes  int
	maxSignalBytes int
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
	var sub engine.SubmitRequest
	var err error
	sub.Name, sub.Version, sub.Spec, sub.SpecFile, err = s.submitTarget(req.GetRef(), req.GetSpec())
	if err != nil {
		return nil, err
	}
	item, err := s.submitItem("", req.GetInputsJson(), req.GetIdempotencyKey(), req.GetDeadline())
	if err != nil {
		return nil, err
	}
	sub.Inputs, sub.IdempotencyKey, sub.Deadline, sub.Dev = item.Inputs, item.IdempotencyKey, item.Deadline, req.GetDev()
	res, err := s.eng.Submit(ctx, sub)
	if err != nil {
		return nil, err
	}
	return &robonetv1.SubmitWorkflowResponse{
		InstanceId: res.InstanceID.String(),
		Workflow:   workflowInfoToProto(res.Workflow),
		Existing:   res.Existing,
		Warnings:   append(devWarning(res), s.unservedWarnings(res.Workflow)...),
	}, nil
}

func (s *apiServer) SubmitWorkflows(ctx context.Context, req *robonetv1.SubmitWorkflowsRequest) (*robonetv1.SubmitWorkflowsResponse, error) {
	items := req.GetItems()
	switch {
	case len(items) == 0:
		return nil, badRequest("items", "give at least one item (the inputs of one instance)")
	case len(items) > engine.MaxSubmitBatchItems:
		return nil, status.Errorf(codes.ResourceExhausted, "items: %d items, at most %d a call: split them into several calls",
			len(items), engine.MaxSubmitBatchItems)
	}
	var sub engine.SubmitBatchRequest
	var err error
	sub.Name, sub.Version, sub.Spec, sub.SpecFile, err = s.submitTarget(req.GetRef(), req.GetSpec())
	if err != nil {
		return nil, err
	}
	sub.Items = make([]engine.SubmitItem, len(items))
	for i, it := range items {
		sub.Items[i], err = s.submitItem(fmt.Sprintf("items[%d].", i), it.GetInputsJson(), it.GetIdempotencyKey(), it.GetDeadline())
		if err != nil {
			return nil, err
		}
	}
	res, err := s.eng.SubmitBatch(ctx, sub)
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.SubmitWorkflowsResponse{
		Workflow:  workflowInfoToProto(res.Workflow),
		Instances: make([]*robonetv1.SubmittedInstance, len(res.Instances)),
		Warnings:  s.unservedWarnings(res.Workflow),
	}
	for i, q := range res.Instances {
		resp.Instances[i] = &robonetv1.SubmittedInstance{InstanceId: q.ID.String(), Existing: q.Existing}
	}
	return resp, nil
}

// submitTarget checks what a submission runs: a registered workflow
// (name, version) or an inline spec (source, file name).
func (s *apiServer) submitTarget(ref *robonetv1.WorkflowRef, inline *robonetv1.InlineSpec) (string, uint32, []byte, string, error) {
	switch { // a oneof: at most one is set
	case ref != nil:
		if ref.GetName() == "" {
			return "", 0, nil, "", badRequest("ref.name", "name the registered workflow to run")
		}
		if err := checkString("ref.name", ref.GetName(), maxNameBytes); err != nil {
			return "", 0, nil, "", err
		}
		return ref.GetName(), ref.GetVersion(), nil, "", nil
	case inline != nil:
		if err := s.checkSpec(inline, "spec"); err != nil {
			return "", 0, nil, "", err
		}
		return "", 0, inline.GetSource(), inline.GetFilename(), nil
	}
	return "", 0, nil, "", badRequest("workflow", "set either ref (a registered workflow) or spec (an inline spec)")
}

// submitItem checks one instance's inputs, key and deadline; prefix
// names the item in a batch ("items[3].") in the field of an error.
func (s *apiServer) submitItem(prefix, inputsJSON, key string, d *durationpb.Duration) (engine.SubmitItem, error) {
	item := engine.SubmitItem{IdempotencyKey: key}
	if err := checkString(prefix+"idempotency_key", key, maxIdempotencyKeyBytes); err != nil {
		return item, err
	}
	if n := len(inputsJSON); n > s.maxInputBytes {
		return item, badRequest(prefix+"inputs_json", fmt.Sprintf("the inputs are %d bytes of JSON, the limit is %d bytes (the node's max-input-bytes); pass a reference (a path or URL) to large data instead", n, s.maxInputBytes))
	}
	inputs, err := decodeInputs(prefix, inputsJSON)
	if err != nil {
		return item, err
	}
	item.Inputs = inputs
	if d != nil {
		switch {
		case d.GetSeconds() < 0 || d.GetNanos() < 0:
			return item, badRequest(prefix+"deadline", "must not be negative")
		case d.GetSeconds() > int64(engine.MaxDeadline/time.Second) || d.AsDuration() > engine.MaxDeadline:
			return item, badRequest(prefix+"deadline", fmt.Sprintf("is too large; the maximum is %s (10 years)", engine.MaxDeadline))
		case d.CheckValid() != nil:
			return item, badRequest(prefix+"deadline", "is not a valid duration (nanos must be below one second)")
		}
		item.Deadline = d.AsDuration()
	}
	return item, nil
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
	if err := checkString("id_prefix", req.GetIdPrefix(), 36); err != nil {
		return nil, err
	}
	lr := engine.ListRequest{Workflow: req.GetWorkflow(), IDPrefix: req.GetIdPrefix(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if ca := req.GetCreatedAfter(); ca != nil {
		if ca.CheckValid() != nil {
			return nil, badRequest("created_after", "is not a valid timestamp")
		}
		lr.CreatedAfter = ca.AsTime()
	}
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

// decodeInputs reads the inputs JSON object; empty means none. prefix
// names the item of a batch in the error's field.
func decodeInputs(prefix, text string) (map[string]any, error) {
	if text == "" {
		return nil, nil
	}
	v, err := value.Decode([]byte(text))
	if err != nil {
		return nil, badRequest(prefix+"inputs_json", "not valid JSON: "+err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest(prefix+"inputs_json", "want a JSON object of inputs, got "+value.TypeName(v))
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

// maxCronBytes bounds a schedule's cron expression.
const maxCronBytes = 256

func (s *apiServer) CreateSchedule(ctx context.Context, req *robonetv1.CreateScheduleRequest) (*robonetv1.CreateScheduleResponse, error) {
	if err := checkString("name", req.GetName(), engine.MaxScheduleName); err != nil {
		return nil, err
	}
	ref := req.GetWorkflow()
	if ref.GetName() == "" {
		return nil, badRequest("workflow.name", "name the registered workflow to run (roboctl workflows ls)")
	}
	if err := checkString("workflow.name", ref.GetName(), maxNameBytes); err != nil {
		return nil, err
	}
	if err := checkString("cron", req.GetCron(), maxCronBytes); err != nil {
		return nil, err
	}
	item, err := s.submitItem("", req.GetInputsJson(), "", nil)
	if err != nil {
		return nil, err
	}
	spec := engine.ScheduleSpec{Name: req.GetName(), Workflow: ref.GetName(), Version: ref.GetVersion(), Inputs: item.Inputs,
		Cron: req.GetCron(), AllowDuplicate: req.GetAllowDuplicate()}
	for field, d := range map[string]*durationpb.Duration{"interval": req.GetInterval(), "jitter": req.GetJitter()} {
		if d == nil {
			continue
		}
		if d.CheckValid() != nil || d.AsDuration() < 0 {
			return nil, badRequest(field, "is not a valid non-negative duration")
		}
		if field == "interval" {
			spec.Interval = d.AsDuration()
		} else {
			spec.Jitter = d.AsDuration()
		}
	}
	sc, err := s.eng.CreateSchedule(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &robonetv1.CreateScheduleResponse{Schedule: scheduleToProto(sc)}, nil
}

func (s *apiServer) ListSchedules(ctx context.Context, _ *robonetv1.ListSchedulesRequest) (*robonetv1.ListSchedulesResponse, error) {
	list, err := s.reads.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.ListSchedulesResponse{Schedules: make([]*robonetv1.ScheduleInfo, 0, len(list))}
	for _, sc := range list {
		resp.Schedules = append(resp.Schedules, scheduleToProto(sc))
	}
	return resp, nil
}

func (s *apiServer) UpdateSchedule(ctx context.Context, req *robonetv1.UpdateScheduleRequest) (*robonetv1.UpdateScheduleResponse, error) {
	if err := checkString("name", req.GetName(), engine.MaxScheduleName); err != nil {
		return nil, err
	}
	var (
		sc  engine.Schedule
		err error
	)
	switch req.GetOp() {
	case robonetv1.UpdateScheduleRequest_OP_PAUSE:
		sc, err = s.eng.PauseSchedule(ctx, req.GetName())
	case robonetv1.UpdateScheduleRequest_OP_RESUME:
		sc, err = s.eng.ResumeSchedule(ctx, req.GetName())
	default:
		return nil, badRequest("op", "want OP_PAUSE or OP_RESUME")
	}
	if err != nil {
		return nil, err
	}
	return &robonetv1.UpdateScheduleResponse{Schedule: scheduleToProto(sc)}, nil
}

func (s *apiServer) DeleteSchedule(ctx context.Context, req *robonetv1.DeleteScheduleRequest) (*robonetv1.DeleteScheduleResponse, error) {
	if err := checkString("name", req.GetName(), engine.MaxScheduleName); err != nil {
		return nil, err
	}
	if err := s.eng.DeleteSchedule(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &robonetv1.DeleteScheduleResponse{}, nil
}

// devWarning says that a dev submission ran another version than its spec
// names.
func devWarning(res engine.SubmitResult) []string {
	if !res.DevVersion {
		return nil
	}
	return []string{fmt.Sprintf("the spec's version of %s is registered with another definition: it runs as version %d (--dev; registered versions never change)",
		res.Workflow.Name, res.Workflow.Version)}
}
