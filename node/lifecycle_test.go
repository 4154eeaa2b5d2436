package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// lifecycleEngine records the lifecycle calls that reach the engine and
// answers them with err (when set) or fixed results. Calls outside the
// lifecycle are not part of these tests: the embedded nil Engine makes
// them panic.
type lifecycleEngine struct {
	Engine
	err error

	mu      sync.Mutex
	signals []engine.SignalRequest
	events  []engine.EventRequest
	retries []string // "id from"
	pauses  []string // "pause id", "resume id"
}

func (f *lifecycleEngine) SignalInstance(_ context.Context, req engine.SignalRequest) (engine.SignalResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, req)
	return engine.SignalResult{Seq: 41, Delivered: true}, f.err
}

func (f *lifecycleEngine) PublishEvent(_ context.Context, req engine.EventRequest) (engine.EventResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, req)
	return engine.EventResult{Started: []engine.EventStart{
		{Workflow: "fulfil", Version: 3, InstanceID: uuid.MustParse("00000000-0000-4000-8000-000000000001")},
		{Workflow: "notify", Version: 1, InstanceID: uuid.MustParse("00000000-0000-4000-8000-000000000002"), Existing: true},
	}}, f.err
}

func (f *lifecycleEngine) RetryInstance(_ context.Context, id uuid.UUID, from string) (engine.RetryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retries = append(f.retries, id.String()+" "+from)
	return engine.RetryResult{Run: 2, Tasks: []string{"deploy", "verify"}}, f.err
}

func (f *lifecycleEngine) PauseInstance(_ context.Context, id uuid.UUID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses = append(f.pauses, "pause "+id.String())
	return f.err
}

func (f *lifecycleEngine) ResumeInstance(_ context.Context, id uuid.UUID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses = append(f.pauses, "resume "+id.String())
	return f.err
}

const testID = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"

func lifecycleAPI(eng *lifecycleEngine) *apiServer {
	return &apiServer{reads: eng, eng: eng, apiLimits: apiLimits{maxSpecBytes: 1 << 20, maxInputBytes: 1 << 10, maxSignalBytes: 64}}
}

// checkInvalid fails unless err is INVALID_ARGUMENT naming field with a
// description containing want.
func checkInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
		t.Fatalf("got %v %q, want INVALID_ARGUMENT with %q", st.Code(), st.Message(), want)
	}
	br, ok := st.Details()[0].(*errdetails.BadRequest)
	if !ok || br.GetFieldViolations()[0].GetField() != field {
		t.Fatalf("details %v, want a violation of %s", st.Details(), field)
	}
}

func TestSignalInstanceValidation(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		req         *robonetv1.SignalInstanceRequest
		field, want string
	}{
		{&robonetv1.SignalInstanceRequest{InstanceId: "nope", Name: "approve"}, "instance_id", `"nope" is not an instance id`},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID}, "name", "name the signal"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "Approve"}, "name", `"Approve" is not a valid signal name: use 1 to 128 lower-case letters`},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "-x"}, "name", "starting with a letter or digit"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: strings.Repeat("a", 129)}, "name", "is not a valid signal name"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve", PayloadJson: `{"ok":`}, "payload_json", "not valid JSON"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve", PayloadJson: `"` + strings.Repeat("x", 70) + `"`}, "payload_json",
			"the payload is 72 bytes of JSON, the limit is 64 bytes (the node's signal-bytes limit)"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve", IdempotencyKey: strings.Repeat("k", 257)}, "idempotency_key", "the limit is 256"},
		{&robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve", IdempotencyKey: "a\nb"}, "idempotency_key", "control characters"},
	} {
		eng := &lifecycleEngine{}
		_, err := lifecycleAPI(eng).SignalInstance(ctx, c.req)
		checkInvalid(t, err, c.field, c.want)
		if len(eng.signals) != 0 {
			t.Errorf("%v reached the engine", c.req)
		}
	}

	eng := &lifecycleEngine{}
	api := lifecycleAPI(eng)
	for _, req := range []*robonetv1.SignalInstanceRequest{
		{InstanceId: testID, Name: "approve", PayloadJson: ` { "b" : 1, "a": [1.0, 2.50] } `, IdempotencyKey: "ticket-7"},
		{InstanceId: testID, Name: "order.created_2-x"}, // no payload: null
	} {
		resp, err := api.SignalInstance(ctx, req)
		if err != nil || resp.GetSeq() != 41 || !resp.GetDelivered() || resp.GetDuplicate() {
			t.Fatalf("%v: %v, %v", req, resp, err)
		}
	}
	want := []engine.SignalRequest{
		{InstanceID: uuid.MustParse(testID), Name: "approve", Payload: []byte(`{"a":[1.0,2.5],"b":1}`), IdempotencyKey: "ticket-7"},
		{InstanceID: uuid.MustParse(testID), Name: "order.created_2-x"},
	}
	if !slices.EqualFunc(eng.signals, want, func(a, b engine.SignalRequest) bool {
		return a.InstanceID == b.InstanceID && a.Name == b.Name && string(a.Payload) == string(b.Payload) && a.IdempotencyKey == b.IdempotencyKey
	}) || eng.signals[1].Payload != nil {
		t.Errorf("the engine got %+v, want %+v (a canonical payload, nil for none)", eng.signals, want)
	}
}

func TestPublishEventValidation(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		req         *robonetv1.PublishEventRequest
		field, want string
	}{
		{&robonetv1.PublishEventRequest{}, "name", "name the event"},
		{&robonetv1.PublishEventRequest{Name: "Order Created"}, "name", "is not a valid event name"},
		{&robonetv1.PublishEventRequest{Name: "order.created", PayloadJson: "[1,"}, "payload_json", "not valid JSON"},
		{&robonetv1.PublishEventRequest{Name: "order.created", PayloadJson: `"` + strings.Repeat("x", 1<<10) + `"`}, "payload_json", "input-bytes"},
		{&robonetv1.PublishEventRequest{Name: "order.created", IdempotencyKey: strings.Repeat("k", 257)}, "idempotency_key", "the limit is 256"},
	} {
		eng := &lifecycleEngine{}
		_, err := lifecycleAPI(eng).PublishEvent(ctx, c.req)
		checkInvalid(t, err, c.field, c.want)
		if len(eng.events) != 0 {
			t.Errorf("%v reached the engine", c.req)
		}
	}
	eng := &lifecycleEngine{}
	resp, err := lifecycleAPI(eng).PublishEvent(ctx, &robonetv1.PublishEventRequest{Name: "order.created", PayloadJson: `{"id": 7}`, IdempotencyKey: "o-7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.events) != 1 || eng.events[0].Name != "order.created" || string(eng.events[0].Payload) != `{"id":7}` || eng.events[0].IdempotencyKey != "o-7" {
		t.Errorf("the engine got %+v", eng.events)
	}
	got := resp.GetStarted()
	if len(got) != 2 || got[0].GetWorkflow() != "fulfil" || got[0].GetVersion() != 3 || got[0].GetInstanceId() != "00000000-0000-4000-8000-000000000001" ||
		got[0].GetExisting() || !got[1].GetExisting() {
		t.Errorf("started %v", got)
	}
}

func TestRetryPauseResume(t *testing.T) {
	ctx := context.Background()
	eng := &lifecycleEngine{}
	api := lifecycleAPI(eng)

	_, err := api.RetryInstance(ctx, &robonetv1.RetryInstanceRequest{InstanceId: "x"})
	checkInvalid(t, err, "instance_id", "is not an instance id")
	_, err = api.RetryInstance(ctx, &robonetv1.RetryInstanceRequest{InstanceId: testID, FromTask: strings.Repeat("t", 129)})
	checkInvalid(t, err, "from_task", "the limit is 128")
	_, err = api.PauseInstance(ctx, &robonetv1.PauseInstanceRequest{InstanceId: ""})
	checkInvalid(t, err, "instance_id", "is not an instance id")
	_, err = api.ResumeInstance(ctx, &robonetv1.ResumeInstanceRequest{InstanceId: "y"})
	checkInvalid(t, err, "instance_id", "is not an instance id")

	resp, err := api.RetryInstance(ctx, &robonetv1.RetryInstanceRequest{InstanceId: testID, FromTask: "deploy"})
	if err != nil || resp.GetRun() != 2 || !slices.Equal(resp.GetTasks(), []string{"deploy", "verify"}) {
		t.Fatalf("retry: %v, %v", resp, err)
	}
	if _, err := api.RetryInstance(ctx, &robonetv1.RetryInstanceRequest{InstanceId: testID}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.PauseInstance(ctx, &robonetv1.PauseInstanceRequest{InstanceId: testID}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ResumeInstance(ctx, &robonetv1.ResumeInstanceRequest{InstanceId: testID}); err != nil {
		t.Fatal(err)
	}
	if want := []string{testID + " deploy", testID + " "}; !slices.Equal(eng.retries, want) {
		t.Errorf("retries %q, want %q", eng.retries, want)
	}
	if want := []string{"pause " + testID, "resume " + testID}; !slices.Equal(eng.pauses, want) {
		t.Errorf("pauses %q, want %q", eng.pauses, want)
	}
}

// The engine's refusals reach the client with the codes errorStatus gives
// them, through the interceptor as in a real call.
func TestLifecycleErrorCodes(t *testing.T) {
	icpt := apiInterceptors{log: zaptest.NewLogger(t)}
	id := uuid.MustParse(testID)
	for _, c := range []struct {
		err  error
		code codes.Code
		call func(*apiServer) error
	}{
		{fmt.Errorf("signal instance %s: no wait takes signal aprove: %w", id, engine.ErrUnknownSignal), codes.FailedPrecondition, func(a *apiServer) error {
			_, err := a.SignalInstance(context.Background(), &robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "aprove"})
			return err
		}},
		{fmt.Errorf("signal instance %s: 1000 pending: %w", id, port.ErrTooManySignals), codes.ResourceExhausted, func(a *apiServer) error {
			_, err := a.SignalInstance(context.Background(), &robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve"})
			return err
		}},
		{fmt.Errorf("signal instance %s: it is complete: %w", id, engine.ErrInstanceFinished), codes.FailedPrecondition, func(a *apiServer) error {
			_, err := a.SignalInstance(context.Background(), &robonetv1.SignalInstanceRequest{InstanceId: testID, Name: "approve"})
			return err
		}},
		{fmt.Errorf("retry instance %s: %w", id, port.ErrInstanceLive), codes.FailedPrecondition, func(a *apiServer) error {
			_, err := a.RetryInstance(context.Background(), &robonetv1.RetryInstanceRequest{InstanceId: testID})
			return err
		}},
		{fmt.Errorf("retry instance %s: %w", id, port.ErrNotRetryable), codes.FailedPrecondition, func(a *apiServer) error {
			_, err := a.RetryInstance(context.Background(), &robonetv1.RetryInstanceRequest{InstanceId: testID})
			return err
		}},
		{fmt.Errorf("retry instance %s: no task deplo: %w", id, port.ErrInvalidArgument), codes.InvalidArgument, func(a *apiServer) error {
			_, err := a.RetryInstance(context.Background(), &robonetv1.RetryInstanceRequest{InstanceId: testID, FromTask: "deplo"})
			return err
		}},
		{fmt.Errorf("pause instance %s: %w", id, port.ErrNotFound), codes.NotFound, func(a *apiServer) error {
			_, err := a.PauseInstance(context.Background(), &robonetv1.PauseInstanceRequest{InstanceId: testID})
			return err
		}},
		{fmt.Errorf("resume instance %s: %w", id, engine.ErrInstanceFinished), codes.FailedPrecondition, func(a *apiServer) error {
			_, err := a.ResumeInstance(context.Background(), &robonetv1.ResumeInstanceRequest{InstanceId: testID})
			return err
		}},
		{fmt.Errorf("publish event: %w", engine.ErrStopped), codes.Unavailable, func(a *apiServer) error {
			_, err := a.PublishEvent(context.Background(), &robonetv1.PublishEventRequest{Name: "order.created"})
			return err
		}},
	} {
		api := lifecycleAPI(&lifecycleEngine{err: c.err})
		_, err := icpt.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/robonet.v1.WorkflowService/X"},
			func(context.Context, any) (any, error) { return nil, c.call(api) })
		st, _ := status.FromError(err)
		if st.Code() != c.code {
			t.Errorf("%v: got %v %q, want %v", c.err, st.Code(), st.Message(), c.code)
		}
		if c.code != codes.Unavailable && st.Message() != c.err.Error() {
			t.Errorf("%v: message %q, want the engine's own wording", c.err, st.Message())
		}
	}
}

// fakePauser serves pauseWorkflow: a listing in pages of two, and pauses
// that fail for one instance.
type fakePauser struct {
	ids     []string
	failing string
	listErr error

	mu     sync.Mutex
	lists  []*robonetv1.ListInstancesRequest
	called []string
}

func (f *fakePauser) ListInstances(_ context.Context, req *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	if f.listErr != nil {
		return nil, f.listErr
	}
	start := 0
	if req.GetPageToken() != "" {
		fmt.Sscanf(req.GetPageToken(), "p%d", &start)
	}
	resp := &robonetv1.ListInstancesResponse{}
	for _, id := range f.ids[start:min(start+2, len(f.ids))] {
		resp.Instances = append(resp.Instances, &robonetv1.InstanceSummary{Id: id})
	}
	if start+2 < len(f.ids) {
		resp.NextPageToken = fmt.Sprintf("p%d", start+2)
	}
	return resp, nil
}

func (f *fakePauser) record(op, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.called = append(f.called, op+" "+id)
	if id == f.failing {
		return status.Error(codes.FailedPrecondition, "instance "+id+" finished: it is complete")
	}
	return nil
}

func (f *fakePauser) PauseInstance(_ context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return &robonetv1.PauseInstanceResponse{}, f.record("pause", req.GetInstanceId())
}

func (f *fakePauser) ResumeInstance(_ context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	return &robonetv1.ResumeInstanceResponse{}, f.record("resume", req.GetInstanceId())
}

func TestPauseWorkflow(t *testing.T) {
	ctx := context.Background()
	_, err := pauseWorkflow(ctx, &fakePauser{}, &robonetv1.PauseWorkflowRequest{})
	checkInvalid(t, err, "workflow", "name the workflow")

	f := &fakePauser{ids: []string{"i1", "i2", "i3", "i4", "i5"}, failing: "i4"}
	resp, err := pauseWorkflow(ctx, f, &robonetv1.PauseWorkflowRequest{Workflow: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetInstanceIds(), []string{"i1", "i2", "i3", "i5"}) ||
		!slices.Equal(resp.GetErrors(), []string{"i4: FailedPrecondition: instance i4 finished: it is complete"}) {
		t.Errorf("answer %v", resp)
	}
	// Every page of the workflow's live instances, then each of them.
	var tokens []string
	for _, l := range f.lists {
		if l.GetWorkflow() != "deploy" || !slices.Equal(l.GetStates(), liveStates) {
			t.Errorf("listed %v", l)
		}
		tokens = append(tokens, l.GetPageToken())
	}
	if !slices.Equal(tokens, []string{"", "p2", "p4"}) {
		t.Errorf("page tokens %q", tokens)
	}
	slices.Sort(f.called)
	if want := []string{"pause i1", "pause i2", "pause i3", "pause i4", "pause i5"}; !slices.Equal(f.called, want) {
		t.Errorf("calls %q, want %q", f.called, want)
	}

	f = &fakePauser{ids: []string{"i1"}}
	if resp, err := pauseWorkflow(ctx, f, &robonetv1.PauseWorkflowRequest{Workflow: "deploy", Resume: true}); err != nil ||
		!slices.Equal(resp.GetInstanceIds(), []string{"i1"}) || len(resp.GetErrors()) != 0 || !slices.Equal(f.called, []string{"resume i1"}) {
		t.Errorf("resume: %v, %v, calls %q", resp, err, f.called)
	}

	// A listing that fails fails the call, and nothing is paused.
	f = &fakePauser{ids: []string{"i1"}, listErr: status.Error(codes.Unavailable, "no leader")}
	if _, err := pauseWorkflow(ctx, f, &robonetv1.PauseWorkflowRequest{Workflow: "deploy"}); status.Code(err) != codes.Unavailable || len(f.called) != 0 {
		t.Errorf("a failed listing: %v, calls %q", err, f.called)
	}

	// Many failures: the first hundred are named, the rest counted.
	f = &fakePauser{}
	for i := range pauseWorkflowErrors + 5 {
		f.ids = append(f.ids, fmt.Sprintf("x%03d", i))
	}
	failAll := &failingPauser{f}
	resp, err = pauseWorkflow(ctx, failAll, &robonetv1.PauseWorkflowRequest{Workflow: "deploy"})
	if err != nil || len(resp.GetInstanceIds()) != 0 || len(resp.GetErrors()) != pauseWorkflowErrors+1 ||
		resp.GetErrors()[pauseWorkflowErrors] != "and 5 more instances failed the same way or otherwise" {
		t.Errorf("many failures: %d errors, last %q, %v", len(resp.GetErrors()), resp.GetErrors()[len(resp.GetErrors())-1], err)
	}
}

// failingPauser fails every pause.
type failingPauser struct{ *fakePauser }

func (f *failingPauser) PauseInstance(context.Context, *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return nil, errors.New("boom")
}

func TestLifecycleConversions(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	v := engine.InstanceView{ID: uuid.MustParse(testID), State: port.StatePaused, Paused: true, Run: 2,
		Signals: []engine.SignalInfo{
			{Seq: 3, Name: "approve", Payload: []byte(`{"by":"ada"}`), At: at, Consumed: true, By: "approve#1"},
			{Seq: 5, Name: "approve", At: at},
		},
		Tasks: []engine.TaskView{
			{Name: "approve", Status: graph.TaskRunning, WaitSignal: "approve", Wait: &engine.WaitInfo{Signal: "approve", Until: at.Add(48 * time.Hour)}},
			{Name: "cool", Status: graph.TaskRunning, Wait: &engine.WaitInfo{Until: at.Add(time.Minute)}},
			{Name: "later", Status: graph.TaskWaiting, WaitSignal: "go"},
		}}
	in := instanceToProto(&v)
	if in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_PAUSED || !in.GetPaused() || in.GetRun() != 2 {
		t.Errorf("instance %v", in)
	}
	if s := in.GetSignals(); len(s) != 2 || s[0].GetPayloadJson() != `{"by":"ada"}` || !s[0].GetConsumed() || s[0].GetBy() != "approve#1" ||
		s[0].GetSeq() != 3 || !s[0].GetAt().AsTime().Equal(at) || s[1].GetPayloadJson() != "null" || s[1].GetConsumed() {
		t.Errorf("signals %v", s)
	}
	tasks := in.GetTasks()
	if !tasks[0].GetWaiting() || tasks[0].GetWaitSignal() != "approve" || !tasks[0].GetWaitUntil().AsTime().Equal(at.Add(48*time.Hour)) {
		t.Errorf("a signal wait: %v", tasks[0])
	}
	if !tasks[1].GetWaiting() || tasks[1].GetWaitSignal() != "" || !tasks[1].GetWaitUntil().AsTime().Equal(at.Add(time.Minute)) {
		t.Errorf("a wait for a time: %v", tasks[1])
	}
	if tasks[2].GetWaiting() || tasks[2].GetWaitSignal() != "go" || tasks[2].GetWaitUntil() != nil {
		t.Errorf("a wait not reached: %v", tasks[2])
	}
	if run := instanceToProto(&engine.InstanceView{}).GetRun(); run != 1 {
		t.Errorf("an instance never retried is in run %d, want 1", run)
	}
	if st, ok := stateFromProto(robonetv1.InstanceState_INSTANCE_STATE_PAUSED); !ok || st != port.StatePaused {
		t.Errorf("PAUSED filters as %q, %v", st, ok)
	}

	for _, c := range []struct {
		ev   engine.Event
		kind robonetv1.EventKind
	}{
		{engine.Event{Kind: engine.EventSignal, Signal: &v.Signals[0]}, robonetv1.EventKind_EVENT_KIND_SIGNAL},
		{engine.Event{Kind: engine.EventPaused, State: port.StatePaused}, robonetv1.EventKind_EVENT_KIND_PAUSED},
		{engine.Event{Kind: engine.EventResumed, State: port.StateRunning}, robonetv1.EventKind_EVENT_KIND_RESUMED},
		{engine.Event{Kind: engine.EventRetried, Run: 3, State: port.StateRunning}, robonetv1.EventKind_EVENT_KIND_RETRIED},
	} {
		ev := eventToProto(&c.ev)
		if ev.GetKind() != c.kind {
			t.Errorf("%s: kind %v", c.ev.Kind, ev.GetKind())
		}
		switch c.kind {
		case robonetv1.EventKind_EVENT_KIND_SIGNAL:
			if ev.GetSignal().GetName() != "approve" || ev.GetSignal().GetSeq() != 3 {
				t.Errorf("signal event %v", ev)
			}
		case robonetv1.EventKind_EVENT_KIND_RETRIED:
			if ev.GetRun() != 3 {
				t.Errorf("retried event %v", ev)
			}
		}
	}
}
