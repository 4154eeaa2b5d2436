package e2e_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

var requiredInputSpec = testdataSpec("required_input.yaml")

const brokenSpec = `name: broken
version: 1
tasks:
  probe:
    needs: [discovr]
    capability: core
    action: echo
  discover:
    capability: core
    action: echo
    timeout: 5 minutes
`

func inline(src, file string) *robonetv1.SubmitWorkflowRequest_Spec {
	return &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(src), Filename: file}}
}

// TestAPIErrors: bad requests get the right status code, a message that
// says what is wrong, details a client can act on, and leave no instance
// behind.
func TestAPIErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		ctx := ctxFor(t, 60*time.Second)

		// One finished instance, for the cancel case and the final count.
		done := run(t, tn, helloSpec, "")
		wantOutputs(t, done, `{"greeting": "Hello, world!"}`)

		cases := []struct {
			name string
			call func() error
			code codes.Code
			msg  string // a substring of the message
		}{
			{"malformed inputs JSON", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(helloSpec, "hello.yaml"), InputsJson: `{"name": `})
				return err
			}, codes.InvalidArgument, "inputs_json"},
			{"inputs not an object", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(helloSpec, "hello.yaml"), InputsJson: `[1, 2]`})
				return err
			}, codes.InvalidArgument, "object"},
			{"missing required input", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(requiredInputSpec, "needs.yaml")})
				return err
			}, codes.InvalidArgument, `"target"`},
			{"mistyped input", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(requiredInputSpec, "needs.yaml"),
					InputsJson: `{"target": "x", "count": "three"}`})
				return err
			}, codes.InvalidArgument, `count`},
			{"unknown workflow", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "no-such-workflow"}}})
				return err
			}, codes.NotFound, "no-such-workflow"},
			{"unknown version", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "hello", Version: 9}}})
				return err
			}, codes.NotFound, "hello"},
			{"no workflow", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{})
				return err
			}, codes.InvalidArgument, "workflow"},
			{"oversized spec", func() error {
				big := helloSpec + "\n#" + strings.Repeat("x", node.DefaultMaxSpecBytes) + "\n"
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(big, "big.yaml")})
				return err
			}, codes.InvalidArgument, "limit"},
			{"negative deadline", func() error {
				_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(helloSpec, "hello.yaml"), Deadline: durationpb.New(-time.Second)})
				return err
			}, codes.InvalidArgument, "deadline"},
			{"version conflict", func() error {
				_, err := tn.api.RegisterWorkflow(ctx, &robonetv1.RegisterWorkflowRequest{Spec: &robonetv1.InlineSpec{
					Source: []byte(strings.Replace(helloSpec, "Hello", "Goodbye", 1)), Filename: "hello2.yaml"}})
				return err
			}, codes.AlreadyExists, "version"},
			{"unknown instance", func() error {
				_, err := tn.api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: uuid.NewString()})
				return err
			}, codes.NotFound, "not found"},
			{"malformed instance id", func() error {
				_, err := tn.api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: "1234"})
				return err
			}, codes.InvalidArgument, "instance_id"},
			{"cancel unknown instance", func() error {
				_, err := tn.api.CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: uuid.NewString()})
				return err
			}, codes.NotFound, "not found"},
			{"cancel finished instance", func() error {
				_, err := tn.api.CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: done.GetId()})
				return err
			}, codes.FailedPrecondition, "already complete"},
			{"watch unknown instance", func() error {
				stream, err := tn.api.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: uuid.NewString()})
				if err != nil {
					return err
				}
				_, err = stream.Recv()
				return err
			}, codes.NotFound, "not found"},
		}
		for _, c := range cases {
			err := c.call()
			st, _ := status.FromError(err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
				t.Errorf("%s: got %v %q, want %v with %q", c.name, st.Code(), st.Message(), c.code, c.msg)
			}
			if c.code == codes.InvalidArgument && len(st.Details()) == 0 {
				t.Errorf("%s: INVALID_ARGUMENT without details", c.name)
			}
		}

		// Nothing half-written: the only instance is the one that ran.
		list, err := tn.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetInstances()); n != 1 {
			t.Errorf("%d instances after the rejected requests, want 1 (the finished one)", n)
		}
	})
}

// TestSpecErrorDetails: a spec that does not compile comes back with every
// problem, each with its file, line, column and task.
func TestSpecErrorDetails(t *testing.T) {
	tn := startNode(t, sqliteStore)
	_, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), &robonetv1.SubmitWorkflowRequest{Workflow: inline(brokenSpec, "broken.yaml")})
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v %q, want INVALID_ARGUMENT", st.Code(), st.Message())
	}
	var details *robonetv1.SpecErrors
	for _, d := range st.Details() {
		if se, ok := d.(*robonetv1.SpecErrors); ok {
			details = se
		}
	}
	if details == nil || len(details.GetErrors()) != 2 {
		t.Fatalf("details %v, want SpecErrors with 2 problems", st.Details())
	}
	want := []struct {
		line, col int32
		task      string
		field     string
	}{{5, 13, "probe", "needs[0]"}, {11, 14, "discover", "timeout"}}
	for i, w := range want {
		e := details.GetErrors()[i]
		if e.GetFile() != "broken.yaml" || e.GetLine() != w.line || e.GetColumn() != w.col || e.GetTask() != w.task || e.GetField() != w.field || e.GetMessage() == "" {
			t.Errorf("problem %d: %v, want broken.yaml:%d:%d task %s field %s", i, e, w.line, w.col, w.task, w.field)
		}
		if !strings.HasPrefix(e.GetText(), "broken.yaml:") {
			t.Errorf("problem %d: text %q does not start with the position", i, e.GetText())
		}
	}
	// Nothing was registered.
	wfs, err := tn.api.ListWorkflows(ctxFor(t, 10*time.Second), &robonetv1.ListWorkflowsRequest{})
	if err != nil || len(wfs.GetWorkflows()) != 0 {
		t.Fatalf("workflows after a failed compile: %v %v", wfs.GetWorkflows(), err)
	}
}

// TestIdempotencyKeyConflict: a key reused for another workflow is refused.
func TestIdempotencyKeyConflict(t *testing.T) {
	tn := startNode(t, sqliteStore)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(helloSpec, "hello.yaml"), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	_, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: inline(emptySpreadSpec, "e.yaml"), IdempotencyKey: "k"})
	if st, _ := status.FromError(err); st.Code() != codes.AlreadyExists {
		t.Fatalf("got %v, want ALREADY_EXISTS", err)
	}
}

// TestWatchResumes: a watch reopened after a sequence number continues
// with the next event, without a snapshot and without repeating events.
func TestWatchResumes(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		id := submitSpec(t, tn.api, spreadSpec, "")
		ctx := ctxFor(t, 60*time.Second)

		first, cancel := context.WithCancel(ctx)
		stream, err := tn.api.WatchInstance(first, &robonetv1.WatchInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		var seen []*robonetv1.Event
		for len(seen) < 4 {
			msg, err := stream.Recv()
			if err != nil {
				t.Fatalf("first stream: %v", err)
			}
			seen = append(seen, msg.GetEvent())
			if isTerminal(msg.GetEvent().GetState()) {
				t.Fatalf("the instance finished within %d events", len(seen))
			}
		}
		cancel()
		if seen[0].GetKind() != robonetv1.EventKind_EVENT_KIND_SNAPSHOT || seen[0].GetInstance() == nil {
			t.Fatalf("a watch from 0 starts with %v, want a snapshot", seen[0].GetKind())
		}
		last := seen[len(seen)-1].GetSeq()

		stream, err = tn.api.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: id, AfterSeq: last})
		if err != nil {
			t.Fatal(err)
		}
		prev := last
		for n := 0; ; n++ {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				t.Fatal("the resumed stream ended before the instance finished")
			}
			if err != nil {
				t.Fatalf("resumed stream: %v", err)
			}
			ev := msg.GetEvent()
			if ev.GetKind() == robonetv1.EventKind_EVENT_KIND_SNAPSHOT {
				t.Fatalf("resumed event %d is a snapshot, want the event after %d", n, last)
			}
			if ev.GetSeq() != prev+1 {
				t.Fatalf("resumed event %d has seq %d, want %d", n, ev.GetSeq(), prev+1)
			}
			prev = ev.GetSeq()
			if isTerminal(ev.GetState()) {
				break
			}
		}
		in := waitDone(t, tn.api, id, 30*time.Second)
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	})
}

// TestServingSurface: health, reflection (what grpcurl needs), /healthz,
// /readyz, and /debug/pprof/ only with EnableDebug.
func TestServingSurface(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	ctx := ctxFor(t, 10*time.Second)

	for _, svc := range []string{"", "robonet.v1.WorkflowService"} {
		resp, err := healthpb.NewHealthClient(tn.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", svc, resp.GetStatus(), err)
		}
	}

	refl, err := reflectionpb.NewServerReflectionClient(tn.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := refl.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = refl.CloseSend()
	services := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		services[s.GetName()] = true
	}
	for _, want := range []string{"robonet.v1.WorkflowService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !services[want] {
			t.Errorf("reflection lists %v, missing %s", services, want)
		}
	}

	get := func(addr, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if code, body := get(tn.node.HTTPAddr(), "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz: %d %q, want 200 ok", code, body)
	}
	// Ready once the node has elected itself (a 503 naming why until then).
	var code int
	var body string
	eventually(t, 10*time.Second, "/readyz to answer 200", func() bool {
		code, body = get(tn.node.HTTPAddr(), "/readyz")
		if code != http.StatusOK && !strings.HasPrefix(body, "not ready: no engine leader known") {
			t.Fatalf("GET /readyz before the election: %d %q", code, body)
		}
		return code == http.StatusOK
	})
	if !strings.HasPrefix(body, "ready (leader e2e, term ") {
		t.Errorf("GET /readyz: %q, want it to name the leader and its term", body)
	}
	// The profiler only when asked for.
	if code, _ := get(tn.node.HTTPAddr(), "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ without EnableDebug: %d, want 404", code)
	}
	dcfg := testConfig(t, sqliteStore)
	dcfg.HTTPAddr, dcfg.EnableDebug = "127.0.0.1:0", true
	debug := startNodeWith(t, dcfg)
	if code, body := get(debug.node.HTTPAddr(), "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine with EnableDebug: %d %.80q, want 200 and a goroutine profile", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
}
