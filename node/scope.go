package node

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/internal/access"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// scopedAPI is the WorkflowService as a client sees it: the forwarder,
// narrowed for a token scoped to some workflows (workflows=GLOB,…). Such a
// token names, submits, reads and acts on the instances of those workflows
// only: a call naming another is refused (PERMISSION_DENIED), a call by
// instance id looks the instance up first, and lists leave the others out.
// A token that is not scoped passes straight through, at no cost.
//
// The check is made on the node the client calls, before forwarding: a
// node that receives a forwarded call trusts the one that forwarded it.
type scopedAPI struct {
	*forwarder
}

var _ robonetv1.WorkflowServiceServer = scopedAPI{}

// scopeOf returns the caller's principal when it is scoped, nil otherwise.
func scopeOf(ctx context.Context) *access.Principal {
	if p := principalOf(ctx); p.Scoped() {
		return p
	}
	return nil
}

// mayWorkflow refuses p a workflow outside its scope.
func mayWorkflow(p *access.Principal, name string) error {
	if p == nil || p.MayWorkflow(name) {
		return nil
	}
	return errOutOfScope(p, name)
}

// mayInstance looks the instance up and refuses p when its workflow is
// outside p's scope.
func (s scopedAPI) mayInstance(ctx context.Context, p *access.Principal, id string) error {
	if p == nil {
		return nil
	}
	resp, err := s.forwarder.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
	if err != nil {
		return err
	}
	return mayWorkflow(p, resp.GetInstance().GetWorkflow())
}

// mayTarget checks what a submission or registration runs: the workflow it names, or the
// inline spec's name and the child workflows its tasks start.
func mayTarget(p *access.Principal, ref *robonetv1.WorkflowRef, inline *robonetv1.InlineSpec) error {
	if p == nil {
		return nil
	}
	if inline == nil {
		return mayWorkflow(p, ref.GetName())
	}
	wf, err := spec.Compile(inline.GetFilename(), inline.GetSource(), spec.Options{})
	if err != nil {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("the spec must compile for the node to check it against the token's workflows: %v", err))
	}
	if err := mayWorkflow(p, wf.GetName()); err != nil {
		return err
	}
	for _, t := range wf.GetTasks() {
		if c := t.GetWorkflow(); c != nil {
			if err := mayWorkflow(p, c.GetName()); err != nil {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("task %s starts workflow %s: %s", t.GetName(), c.GetName(), status.Convert(err).Message()))
			}
		}
	}
	return nil
}

func (s scopedAPI) RegisterWorkflow(ctx context.Context, req *robonetv1.RegisterWorkflowRequest) (*robonetv1.RegisterWorkflowResponse, error) {
	if err := mayTarget(scopeOf(ctx), nil, req.GetSpec()); err != nil {
		return nil, err
	}
	return s.forwarder.RegisterWorkflow(ctx, req)
}

func (s scopedAPI) SubmitWorkflow(ctx context.Context, req *robonetv1.SubmitWorkflowRequest) (*robonetv1.SubmitWorkflowResponse, error) {
	if err := mayTarget(scopeOf(ctx), req.GetRef(), req.GetSpec()); err != nil {
		return nil, err
	}
	return s.forwarder.SubmitWorkflow(ctx, req)
}

func (s scopedAPI) SubmitWorkflows(ctx context.Context, req *robonetv1.SubmitWorkflowsRequest) (*robonetv1.SubmitWorkflowsResponse, error) {
	if err := mayTarget(scopeOf(ctx), req.GetRef(), req.GetSpec()); err != nil {
		return nil, err
	}
	return s.forwarder.SubmitWorkflows(ctx, req)
}

// PublishEvent starts whichever workflows listen for the event: a scoped
// token may not publish, since its scope could not bound what starts.
func (s scopedAPI) PublishEvent(ctx context.Context, req *robonetv1.PublishEventRequest) (*robonetv1.PublishEventResponse, error) {
	if p := scopeOf(ctx); p != nil {
		return nil, status.Errorf(codes.PermissionDenied, "the token %s is scoped to workflows %v: an event starts every workflow that listens for it, so a scoped token may not publish events", p.Name, p.Workflows)
	}
	return s.forwarder.PublishEvent(ctx, req)
}

func (s scopedAPI) GetInstance(ctx context.Context, req *robonetv1.GetInstanceRequest) (*robonetv1.GetInstanceResponse, error) {
	resp, err := s.forwarder.GetInstance(ctx, req)
	if err == nil {
		err = mayWorkflow(scopeOf(ctx), resp.GetInstance().GetWorkflow())
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s scopedAPI) WatchInstance(req *robonetv1.WatchInstanceRequest, stream grpc.ServerStreamingServer[robonetv1.WatchInstanceResponse]) error {
	if err := s.mayInstance(stream.Context(), scopeOf(stream.Context()), req.GetInstanceId()); err != nil {
		return err
	}
	return s.forwarder.WatchInstance(req, stream)
}

func (s scopedAPI) TaskLogs(req *robonetv1.TaskLogsRequest, stream grpc.ServerStreamingServer[robonetv1.TaskLogsResponse]) error {
	if err := s.mayInstance(stream.Context(), scopeOf(stream.Context()), req.GetInstanceId()); err != nil {
		return err
	}
	return s.forwarder.TaskLogs(req, stream)
}

func (s scopedAPI) CancelInstance(ctx context.Context, req *robonetv1.CancelInstanceRequest) (*robonetv1.CancelInstanceResponse, error) {
	if err := s.mayInstance(ctx, scopeOf(ctx), req.GetInstanceId()); err != nil {
		return nil, err
	}
	return s.forwarder.CancelInstance(ctx, req)
}

func (s scopedAPI) SignalInstance(ctx context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	if err := s.mayInstance(ctx, scopeOf(ctx), req.GetInstanceId()); err != nil {
		return nil, err
	}
	return s.forwarder.SignalInstance(ctx, req)
}

func (s scopedAPI) RetryInstance(ctx context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	if err := s.mayInstance(ctx, scopeOf(ctx), req.GetInstanceId()); err != nil {
		return nil, err
	}
	return s.forwarder.RetryInstance(ctx, req)
}

func (s scopedAPI) PauseInstance(ctx context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	if err := s.mayInstance(ctx, scopeOf(ctx), req.GetInstanceId()); err != nil {
		return nil, err
	}
	return s.forwarder.PauseInstance(ctx, req)
}

func (s scopedAPI) ResumeInstance(ctx context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	if err := s.mayInstance(ctx, scopeOf(ctx), req.GetInstanceId()); err != nil {
		return nil, err
	}
	return s.forwarder.ResumeInstance(ctx, req)
}

func (s scopedAPI) PauseWorkflow(ctx context.Context, req *robonetv1.PauseWorkflowRequest) (*robonetv1.PauseWorkflowResponse, error) {
	if err := mayWorkflow(scopeOf(ctx), req.GetWorkflow()); err != nil {
		return nil, err
	}
	return s.forwarder.PauseWorkflow(ctx, req)
}

// ListInstances of one workflow is checked; a list of every workflow
// leaves out the others (a page may then hold fewer than page_size, and
// its next_page_token still goes on).
func (s scopedAPI) ListInstances(ctx context.Context, req *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error) {
	p := scopeOf(ctx)
	if p != nil && req.GetWorkflow() != "" {
		if err := mayWorkflow(p, req.GetWorkflow()); err != nil {
			return nil, err
		}
		p = nil
	}
	resp, err := s.forwarder.ListInstances(ctx, req)
	if err != nil || p == nil {
		return resp, err
	}
	kept := resp.Instances[:0]
	for _, in := range resp.GetInstances() {
		if p.MayWorkflow(in.GetWorkflow()) {
			kept = append(kept, in)
		}
	}
	resp.Instances = kept
	return resp, nil
}

func (s scopedAPI) ListWorkflows(ctx context.Context, req *robonetv1.ListWorkflowsRequest) (*robonetv1.ListWorkflowsResponse, error) {
	resp, err := s.forwarder.ListWorkflows(ctx, req)
	p := scopeOf(ctx)
	if err != nil || p == nil {
		return resp, err
	}
	kept := resp.Workflows[:0]
	for _, wf := range resp.GetWorkflows() {
		if p.MayWorkflow(wf.GetName()) {
			kept = append(kept, wf)
		}
	}
	resp.Workflows = kept
	return resp, nil
}

func (s scopedAPI) ListSchedules(ctx context.Context, req *robonetv1.ListSchedulesRequest) (*robonetv1.ListSchedulesResponse, error) {
	resp, err := s.forwarder.ListSchedules(ctx, req)
	p := scopeOf(ctx)
	if err != nil || p == nil {
		return resp, err
	}
	kept := resp.Schedules[:0]
	for _, sc := range resp.GetSchedules() {
		if p.MayWorkflow(sc.GetWorkflow().GetName()) {
			kept = append(kept, sc)
		}
	}
	resp.Schedules = kept
	return resp, nil
}

func (s scopedAPI) CreateSchedule(ctx context.Context, req *robonetv1.CreateScheduleRequest) (*robonetv1.CreateScheduleResponse, error) {
	if err := mayWorkflow(scopeOf(ctx), req.GetWorkflow().GetName()); err != nil {
		return nil, err
	}
	return s.forwarder.CreateSchedule(ctx, req)
}

func (s scopedAPI) UpdateSchedule(ctx context.Context, req *robonetv1.UpdateScheduleRequest) (*robonetv1.UpdateScheduleResponse, error) {
	if err := s.maySchedule(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return s.forwarder.UpdateSchedule(ctx, req)
}

func (s scopedAPI) DeleteSchedule(ctx context.Context, req *robonetv1.DeleteScheduleRequest) (*robonetv1.DeleteScheduleResponse, error) {
	if err := s.maySchedule(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return s.forwarder.DeleteSchedule(ctx, req)
}

// maySchedule looks the schedule up and refuses a scoped caller when it
// starts a workflow outside its scope. An unknown schedule passes: the
// call itself answers NOT_FOUND.
func (s scopedAPI) maySchedule(ctx context.Context, name string) error {
	p := scopeOf(ctx)
	if p == nil {
		return nil
	}
	resp, err := s.forwarder.ListSchedules(ctx, &robonetv1.ListSchedulesRequest{})
	if err != nil {
		return err
	}
	for _, sc := range resp.GetSchedules() {
		if sc.GetName() == name {
			return mayWorkflow(p, sc.GetWorkflow().GetName())
		}
	}
	return nil
}
