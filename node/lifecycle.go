package node

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/google/uuid"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// This file serves the calls on an instance's life beyond submit and
// cancel: signals, events, retry, pause and resume (issue 36).

// signalNameRE is the charset of signal and event names, the one the spec
// compiler enforces on wait: {signal: …} and trigger: {events: […]}.
var signalNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// checkSignalName refuses an empty name or one outside the charset; what
// says whose name it is ("signal", "event").
func checkSignalName(field, what, name string) error {
	if name == "" {
		return badRequest(field, "name the "+what+" (as the workflow spec names it)")
	}
	if !signalNameRE.MatchString(name) {
		return badRequest(field, fmt.Sprintf("%s is not a valid %s name: use 1 to 128 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. approve, order.created)",
			value.QuoteClipped(name, maxEchoBytes), what))
	}
	return nil
}

// decodePayload reads a JSON payload of any type, at most limit bytes
// (limitName is the node's limit, for the error), into canonical JSON;
// empty means null (nil).
func decodePayload(field, text string, limit int, limitName string) ([]byte, error) {
	if n := len(text); n > limit {
		return nil, badRequest(field, fmt.Sprintf("the payload is %d bytes of JSON, the limit is %d bytes (the node's %s limit); pass a reference (a path or URL) to large data instead", n, limit, limitName))
	}
	if text == "" {
		return nil, nil
	}
	v, err := value.Decode([]byte(text))
	if err != nil {
		return nil, badRequest(field, "not valid JSON: "+err.Error())
	}
	data, err := value.Encode(v)
	if err != nil {
		return nil, badRequest(field, "not representable as JSON: "+err.Error())
	}
	return data, nil
}

func (s *apiServer) SignalInstance(ctx context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := checkSignalName("name", "signal", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkString("idempotency_key", req.GetIdempotencyKey(), maxIdempotencyKeyBytes); err != nil {
		return nil, err
	}
	payload, err := decodePayload("payload_json", req.GetPayloadJson(), s.maxSignalBytes, "signal-bytes")
	if err != nil {
		return nil, err
	}
	res, err := s.eng.SignalInstance(ctx, engine.SignalRequest{InstanceID: id, Name: req.GetName(), Payload: payload, IdempotencyKey: req.GetIdempotencyKey()})
	if err != nil {
		return nil, err
	}
	return &robonetv1.SignalInstanceResponse{Seq: res.Seq, Duplicate: res.Duplicate, Delivered: res.Delivered}, nil
}

func (s *apiServer) PublishEvent(ctx context.Context, req *robonetv1.PublishEventRequest) (*robonetv1.PublishEventResponse, error) {
	if err := checkSignalName("name", "event", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkString("idempotency_key", req.GetIdempotencyKey(), maxIdempotencyKeyBytes); err != nil {
		return nil, err
	}
	// The payload becomes each started instance's event input: it is
	// bounded as inputs are.
	payload, err := decodePayload("payload_json", req.GetPayloadJson(), s.maxInputBytes, "input-bytes")
	if err != nil {
		return nil, err
	}
	res, err := s.eng.PublishEvent(ctx, engine.EventRequest{Name: req.GetName(), Payload: payload, IdempotencyKey: req.GetIdempotencyKey()})
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.PublishEventResponse{Started: make([]*robonetv1.EventStart, 0, len(res.Started))}
	for _, st := range res.Started {
		resp.Started = append(resp.Started, &robonetv1.EventStart{Workflow: st.Workflow, Version: st.Version,
			InstanceId: st.InstanceID.String(), Existing: st.Existing})
	}
	return resp, nil
}

func (s *apiServer) RetryInstance(ctx context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := checkString("from_task", req.GetFromTask(), maxNameBytes); err != nil {
		return nil, err
	}
	res, err := s.eng.RetryInstance(ctx, id, req.GetFromTask())
	if err != nil {
		return nil, err
	}
	return &robonetv1.RetryInstanceResponse{Run: clampInt32(res.Run), Tasks: res.Tasks}, nil
}

func (s *apiServer) PauseInstance(ctx context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.eng.PauseInstance(ctx, id); err != nil {
		return nil, err
	}
	return &robonetv1.PauseInstanceResponse{}, nil
}

func (s *apiServer) ResumeInstance(ctx context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.eng.ResumeInstance(ctx, id); err != nil {
		return nil, err
	}
	return &robonetv1.ResumeInstanceResponse{}, nil
}

// Bounds of PauseWorkflow.
const (
	// pauseWorkflowParallel is how many instances it pauses at once.
	pauseWorkflowParallel = 16
	// pauseWorkflowErrors bounds the per-instance errors it reports; one
	// more entry counts the rest.
	pauseWorkflowErrors = 100
)

// liveStates are the states of an instance that pause and resume apply
// to.
var liveStates = []robonetv1.InstanceState{
	robonetv1.InstanceState_INSTANCE_STATE_PENDING, robonetv1.InstanceState_INSTANCE_STATE_RUNNING,
	robonetv1.InstanceState_INSTANCE_STATE_GATHERING, robonetv1.InstanceState_INSTANCE_STATE_PAUSED,
}

// workflowPauser is what pauseWorkflow calls: the listing and the
// per-instance pause and resume, each routed as a client's call is.
type workflowPauser interface {
	ListInstances(context.Context, *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error)
	PauseInstance(context.Context, *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error)
	ResumeInstance(context.Context, *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error)
}

// pauseWorkflow lists every live instance of the request's workflow (all
// pages, first) and pauses or resumes each through api, a few at a time.
// An instance that could not be is reported in the answer's errors; only
// a failed listing fails the call.
func pauseWorkflow(ctx context.Context, api workflowPauser, req *robonetv1.PauseWorkflowRequest) (*robonetv1.PauseWorkflowResponse, error) {
	if req.GetWorkflow() == "" {
		return nil, badRequest("workflow", "name the workflow whose instances to pause or resume (roboctl workflows ls)")
	}
	if err := checkString("workflow", req.GetWorkflow(), maxNameBytes); err != nil {
		return nil, err
	}
	var ids []string
	for token := ""; ; {
		page, err := api.ListInstances(ctx, &robonetv1.ListInstancesRequest{Workflow: req.GetWorkflow(), States: liveStates,
			PageSize: maxPageSize, PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, in := range page.GetInstances() {
			ids = append(ids, in.GetId())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, pauseWorkflowParallel)
	for i, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if req.GetResume() {
				_, errs[i] = api.ResumeInstance(ctx, &robonetv1.ResumeInstanceRequest{InstanceId: id})
			} else {
				_, errs[i] = api.PauseInstance(ctx, &robonetv1.PauseInstanceRequest{InstanceId: id})
			}
		}()
	}
	wg.Wait()
	resp := &robonetv1.PauseWorkflowResponse{}
	failed := 0
	for i, id := range ids {
		if errs[i] == nil {
			resp.InstanceIds = append(resp.InstanceIds, id)
			continue
		}
		if failed++; failed <= pauseWorkflowErrors {
			resp.Errors = append(resp.Errors, id+": "+errText(errs[i]))
		}
	}
	if more := failed - pauseWorkflowErrors; more > 0 {
		resp.Errors = append(resp.Errors, fmt.Sprintf("and %d more instances failed the same way or otherwise", more))
	}
	return resp, nil
}

// errText is an error's message as a client reads it: a status's
// message, without the gRPC wrapping.
func errText(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

func (r *forwarder) SignalInstance(ctx context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	rt := instanceRoute(req.GetInstanceId())
	if !r.ownsHere(rt) && req.GetIdempotencyKey() == "" {
		// Forwarding retries on UNAVAILABLE, which may come after the
		// owner recorded the signal: a key delivers it once.
		req = proto.CloneOf(req)
		req.IdempotencyKey = "forwarded:" + uuid.NewString()
	}
	return leaderCall(ctx, r, rt, req, (*apiServer).SignalInstance, robonetv1.WorkflowServiceClient.SignalInstance)
}

func (r *forwarder) PublishEvent(ctx context.Context, req *robonetv1.PublishEventRequest) (*robonetv1.PublishEventResponse, error) {
	if r.active() == nil && req.GetIdempotencyKey() == "" {
		// As for SubmitWorkflow: a retried forward must find the instances
		// the first try may have started.
		req = proto.CloneOf(req)
		req.IdempotencyKey = "forwarded:" + uuid.NewString()
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).PublishEvent, robonetv1.WorkflowServiceClient.PublishEvent)
}

func (r *forwarder) RetryInstance(ctx context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	return leaderCall(ctx, r, instanceRoute(req.GetInstanceId()), req, (*apiServer).RetryInstance, robonetv1.WorkflowServiceClient.RetryInstance)
}

func (r *forwarder) PauseInstance(ctx context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return leaderCall(ctx, r, instanceRoute(req.GetInstanceId()), req, (*apiServer).PauseInstance, robonetv1.WorkflowServiceClient.PauseInstance)
}

func (r *forwarder) ResumeInstance(ctx context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	return leaderCall(ctx, r, instanceRoute(req.GetInstanceId()), req, (*apiServer).ResumeInstance, robonetv1.WorkflowServiceClient.ResumeInstance)
}

// PauseWorkflow is answered by the node that receives it, never
// forwarded: it lists the workflow's instances as ListInstances does and
// sends each pause (resume) to the owner of that instance's partition.
func (r *forwarder) PauseWorkflow(ctx context.Context, req *robonetv1.PauseWorkflowRequest) (*robonetv1.PauseWorkflowResponse, error) {
	return pauseWorkflow(ctx, r, req)
}
