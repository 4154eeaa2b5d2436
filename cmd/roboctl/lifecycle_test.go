package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// update rewrites the golden files of testdata/ from the output.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// lifecycleServer is a WorkflowService that records the lifecycle calls
// roboctl makes and answers them with fixed results: these tests are of
// roboctl's flags and output, the node's side has its own.
type lifecycleServer struct {
	robonetv1.UnimplementedWorkflowServiceServer

	mu    sync.Mutex
	calls []proto.Message
	err   error // answers every lifecycle call when set
}

func (s *lifecycleServer) record(m proto.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, m)
	return s.err
}

// take returns the calls recorded since the last take.
func (s *lifecycleServer) take() []proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *lifecycleServer) SignalInstance(_ context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	if err := s.record(req); err != nil {
		return nil, err
	}
	return &robonetv1.SignalInstanceResponse{Seq: 7, Delivered: req.GetName() == "approve", Duplicate: req.GetIdempotencyKey() == "seen"}, nil
}

func (s *lifecycleServer) PublishEvent(_ context.Context, req *robonetv1.PublishEventRequest) (*robonetv1.PublishEventResponse, error) {
	if err := s.record(req); err != nil {
		return nil, err
	}
	if req.GetName() == "nobody.listens" {
		return &robonetv1.PublishEventResponse{}, nil
	}
	return &robonetv1.PublishEventResponse{Started: []*robonetv1.EventStart{
		{Workflow: "fulfil", Version: 3, InstanceId: "00000000-0000-4000-8000-000000000001"},
		{Workflow: "notify", Version: 1, InstanceId: "00000000-0000-4000-8000-000000000002", Existing: true},
	}}, nil
}

func (s *lifecycleServer) RetryInstance(_ context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	if err := s.record(req); err != nil {
		return nil, err
	}
	return &robonetv1.RetryInstanceResponse{Run: 2, Tasks: []string{"deploy", "verify"}}, nil
}

func (s *lifecycleServer) PauseInstance(_ context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return &robonetv1.PauseInstanceResponse{}, s.record(req)
}

func (s *lifecycleServer) ResumeInstance(_ context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	return &robonetv1.ResumeInstanceResponse{}, s.record(req)
}

func (s *lifecycleServer) PauseWorkflow(_ context.Context, req *robonetv1.PauseWorkflowRequest) (*robonetv1.PauseWorkflowResponse, error) {
	if err := s.record(req); err != nil {
		return nil, err
	}
	resp := &robonetv1.PauseWorkflowResponse{InstanceIds: []string{"00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"}}
	if req.GetWorkflow() == "flaky" {
		resp.Errors = []string{"00000000-0000-4000-8000-00000000000c: FailedPrecondition: instance finished: it is complete"}
	}
	return resp, nil
}

// The instance of the get and watch tests, at fixed times.
var (
	t0     = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	lifeID = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"
)

func waitingInstance() *robonetv1.Instance {
	return &robonetv1.Instance{
		Id: lifeID, Workflow: "release", Version: 4, State: robonetv1.InstanceState_INSTANCE_STATE_PAUSED, Paused: true, Run: 2,
		CreatedAt: timestamppb.New(t0), StartedAt: timestamppb.New(t0), FinishedAt: timestamppb.New(t0.Add(time.Hour)), // a fixed duration
		Progress: &robonetv1.InstanceProgress{Total: 4, Done: 1, Running: 2},
		Tasks: []*robonetv1.TaskState{
			{Name: "build", Capability: "code.exec", Action: "exec", Status: robonetv1.TaskStatus_TASK_STATUS_COMPLETED, Attempt: 1, MaxAttempts: 1,
				OutputJson: `"ok"`, StartedAt: timestamppb.New(t0), FinishedAt: timestamppb.New(t0.Add(2 * time.Second))},
			{Name: "approve", Needs: []string{"build"}, Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING, Attempt: 1, MaxAttempts: 1,
				WaitSignal: "approve", Waiting: true, WaitUntil: timestamppb.New(t0.Add(48 * time.Hour))},
			{Name: "cool_down", Needs: []string{"build"}, Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING, Attempt: 1, MaxAttempts: 1,
				Waiting: true, WaitUntil: timestamppb.New(t0.Add(10 * time.Minute))},
			{Name: "go_live", Needs: []string{"approve", "cool_down"}, Status: robonetv1.TaskStatus_TASK_STATUS_WAITING, WaitSignal: "go"},
		},
		Signals: []*robonetv1.Signal{
			{Seq: 3, Name: "approve", PayloadJson: `{"by": "ada"}`, At: timestamppb.New(t0.Add(time.Minute)), Consumed: true, By: "approve#1"},
			{Seq: 5, Name: "go", PayloadJson: "null", At: timestamppb.New(t0.Add(2 * time.Minute))},
		},
	}
}

func (s *lifecycleServer) GetInstance(_ context.Context, req *robonetv1.GetInstanceRequest) (*robonetv1.GetInstanceResponse, error) {
	if req.GetInstanceId() != lifeID {
		return nil, status.Error(codes.NotFound, "instance not found")
	}
	return &robonetv1.GetInstanceResponse{Instance: waitingInstance()}, nil
}

func (s *lifecycleServer) WatchInstance(_ *robonetv1.WatchInstanceRequest, stream grpc.ServerStreamingServer[robonetv1.WatchInstanceResponse]) error {
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	running, paused := robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_PAUSED
	for _, ev := range []*robonetv1.Event{
		{Seq: 1, Time: at(0), Kind: robonetv1.EventKind_EVENT_KIND_SNAPSHOT, State: paused, Instance: waitingInstance()},
		{Seq: 2, Time: at(time.Second), Kind: robonetv1.EventKind_EVENT_KIND_RESUMED, State: running},
		{Seq: 3, Time: at(2 * time.Second), Kind: robonetv1.EventKind_EVENT_KIND_SIGNAL, State: running,
			Signal: &robonetv1.Signal{Seq: 6, Name: "go", PayloadJson: `{"when": "now"}`, At: at(2 * time.Second), Consumed: true, By: "go_live#1"}},
		{Seq: 4, Time: at(3 * time.Second), Kind: robonetv1.EventKind_EVENT_KIND_PAUSED, State: paused},
		{Seq: 5, Time: at(4 * time.Second), Kind: robonetv1.EventKind_EVENT_KIND_RETRIED, State: running, Run: 3},
		{Seq: 6, Time: at(5 * time.Second), Kind: robonetv1.EventKind_EVENT_KIND_STATE, State: robonetv1.InstanceState_INSTANCE_STATE_COMPLETE},
	} {
		if err := stream.Send(&robonetv1.WatchInstanceResponse{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

// fakeServer serves s on a free loopback port until the test ends.
func fakeServer(t *testing.T, s robonetv1.WorkflowServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	robonetv1.RegisterWorkflowServiceServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// roboctlIn runs a command line with stdin.
func roboctlIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := runIn(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestSignal(t *testing.T) {
	srv := &lifecycleServer{}
	addr := fakeServer(t, srv)
	dataFile := filepath.Join(t.TempDir(), "approval.json")
	if err := os.WriteFile(dataFile, []byte(`{"ticket": 42}`), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args    []string
		stdin   string
		out     string
		payload string
		key     string
	}{
		{[]string{"signal", lifeID, "approve", "--data", `{"by": "ada"}`}, "",
			"signal approve (#7) sent to " + lifeID + ": a waiting task took it\n", `{"by": "ada"}`, ""},
		{[]string{"signal", lifeID, "later", "--data-file", dataFile, "--idempotency-key", "k1"}, "",
			"signal later (#7) sent to " + lifeID + ": no task waits for it yet; it is kept until one does\n", `{"ticket": 42}`, "k1"},
		{[]string{"signal", lifeID, "approve", "--data-file", "-"}, "\"yes\"\n",
			"signal approve (#7) sent to " + lifeID + ": a waiting task took it\n", "\"yes\"\n", ""},
		{[]string{"signal", lifeID, "approve", "--idempotency-key", "seen"}, "",
			"signal approve (#7) was sent to " + lifeID + " before with this idempotency key: not sent again\n", "", "seen"},
	} {
		r := roboctlIn(t, c.stdin, append([]string{"--addr", addr}, c.args...)...)
		if r.code != exitOK || r.stdout != c.out {
			t.Errorf("%q: exit %d\nstdout %q, want %q\nstderr %s", c.args, r.code, r.stdout, c.out, r.stderr)
		}
		calls := srv.take()
		if len(calls) != 1 {
			t.Fatalf("%q: calls %v", c.args, calls)
		}
		req := calls[0].(*robonetv1.SignalInstanceRequest)
		if req.GetInstanceId() != lifeID || req.GetName() != c.args[2] || req.GetPayloadJson() != c.payload || req.GetIdempotencyKey() != c.key {
			t.Errorf("%q: the node got %v", c.args, req)
		}
	}

	r := roboctl(t, "--addr", addr, "signal", lifeID, "approve", "-o", "json")
	var got map[string]any
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &got) != nil || got["seq"] != 7.0 || got["delivered"] != true || got["signal"] != "approve" {
		t.Errorf("-o json: exit %d: %s", r.code, r.stdout)
	}
	srv.take()

	// Usage errors (exit 2) never reach the node.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"signal", lifeID, "approve", "--data", "1", "--data-file", dataFile}, "--data and --data-file both give the payload: use one of them"},
		{[]string{"signal", lifeID, "approve", "--data", "yes"}, `--data: not valid JSON (quote a string: --data '"yes"')`},
		{[]string{"signal", lifeID, "approve", "--data-file", filepath.Join(t.TempDir(), "missing.json")}, "--data-file: open"},
		{[]string{"signal", lifeID}, "missing the signal name"},
		{[]string{"signal"}, "missing an instance id and a signal name"},
		{[]string{"signal", lifeID, "a", "b"}, "takes an instance id and a signal name, not 3 arguments"},
	} {
		r := roboctl(t, append([]string{"--addr", addr}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := roboctlIn(t, "", "--addr", addr, "signal", lifeID, "approve", "--data-file", "-"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "--data-file - (stdin): empty") {
		t.Errorf("an empty stdin: exit %d, %s", r.code, r.stderr)
	}
	if calls := srv.take(); len(calls) != 0 {
		t.Errorf("usage errors reached the node: %v", calls)
	}

	// The node's refusal is reported as it says it, exit 1.
	srv.err = status.Error(codes.FailedPrecondition, "signal instance x: no task of the workflow waits for this signal")
	r = roboctl(t, "--addr", addr, "signal", lifeID, "aprove")
	if r.code != exitFailed || !strings.Contains(r.stderr, "FAILED_PRECONDITION") || !strings.Contains(r.stderr, "no task of the workflow waits for this signal") {
		t.Errorf("a refused signal: exit %d, %s", r.code, r.stderr)
	}
}

func TestEventsPublish(t *testing.T) {
	srv := &lifecycleServer{}
	addr := fakeServer(t, srv)
	r := roboctl(t, "--addr", addr, "events", "publish", "order.created", "--data", `{"order": 7}`, "--idempotency-key", "o-7")
	want := "instance 00000000-0000-4000-8000-000000000001 of fulfil v3 started\n" +
		"instance 00000000-0000-4000-8000-000000000002 of notify v1 was started by this event before (same idempotency key)\n"
	if r.code != exitOK || r.stdout != want {
		t.Errorf("exit %d\n%s\nwant\n%s%s", r.code, r.stdout, want, r.stderr)
	}
	calls := srv.take()
	if len(calls) != 1 || !proto.Equal(calls[0], &robonetv1.PublishEventRequest{Name: "order.created", PayloadJson: `{"order": 7}`, IdempotencyKey: "o-7"}) {
		t.Errorf("the node got %v", calls)
	}
	r = roboctl(t, "--addr", addr, "events", "publish", "nobody.listens")
	if r.code != exitOK || !strings.Contains(r.stdout, "no workflow is triggered by it (a workflow starts on it with trigger: {events: [nobody.listens]})") {
		t.Errorf("an event nobody listens to: exit %d\n%s", r.code, r.stdout)
	}
	r = roboctl(t, "--addr", addr, "events", "publish", "order.created", "-o", "json")
	var got struct {
		Event   string `json:"event"`
		Started []struct {
			Workflow   string `json:"workflow"`
			InstanceID string `json:"instance_id"`
			Existing   bool   `json:"existing"`
		} `json:"started"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Event != "order.created" || len(got.Started) != 2 || !got.Started[1].Existing {
		t.Errorf("-o json: %v %s", err, r.stdout)
	}
	if r := roboctl(t, "--addr", addr, "events", "publish"); r.code != exitUsage || !strings.Contains(r.stderr, "missing an event name") {
		t.Errorf("no name: exit %d, %s", r.code, r.stderr)
	}
}

func TestRetryPauseResume(t *testing.T) {
	srv := &lifecycleServer{}
	addr := fakeServer(t, srv)
	for _, c := range []struct {
		args []string
		out  string
		call proto.Message
	}{
		{[]string{"retry", lifeID, "--from", "deploy"}, "instance " + lifeID + " runs again (run 2): deploy, verify\n",
			&robonetv1.RetryInstanceRequest{InstanceId: lifeID, FromTask: "deploy"}},
		{[]string{"retry", lifeID}, "instance " + lifeID + " runs again (run 2): deploy, verify\n", &robonetv1.RetryInstanceRequest{InstanceId: lifeID}},
		{[]string{"pause", lifeID}, "instance " + lifeID + " paused\n", &robonetv1.PauseInstanceRequest{InstanceId: lifeID}},
		{[]string{"resume", lifeID}, "instance " + lifeID + " resumed\n", &robonetv1.ResumeInstanceRequest{InstanceId: lifeID}},
		{[]string{"pause", "--workflow", "deploy"}, "2 instances of deploy paused:\n  00000000-0000-4000-8000-00000000000a\n  00000000-0000-4000-8000-00000000000b\n",
			&robonetv1.PauseWorkflowRequest{Workflow: "deploy"}},
		{[]string{"resume", "--workflow", "deploy"}, "2 instances of deploy resumed:\n  00000000-0000-4000-8000-00000000000a\n  00000000-0000-4000-8000-00000000000b\n",
			&robonetv1.PauseWorkflowRequest{Workflow: "deploy", Resume: true}},
	} {
		r := roboctl(t, append([]string{"--addr", addr}, c.args...)...)
		if r.code != exitOK || r.stdout != c.out {
			t.Errorf("%q: exit %d\n%q\nwant %q\n%s", c.args, r.code, r.stdout, c.out, r.stderr)
		}
		if calls := srv.take(); len(calls) != 1 || !proto.Equal(calls[0], c.call) {
			t.Errorf("%q: the node got %v, want %v", c.args, calls, c.call)
		}
	}

	// Instances a bulk pause could not pause are listed, exit 1.
	r := roboctl(t, "--addr", addr, "pause", "--workflow", "flaky")
	if r.code != exitFailed || !strings.Contains(r.stdout, "2 instances of flaky paused") ||
		!strings.Contains(r.stderr, "some instances of flaky could not be paused:\n  00000000-0000-4000-8000-00000000000c: FailedPrecondition") {
		t.Errorf("a partial bulk pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "pause", "--workflow", "flaky", "-o", "json")
	var got struct {
		Workflow string   `json:"workflow"`
		Paused   []string `json:"paused"`
		Errors   []string `json:"errors"`
	}
	if r.code != exitFailed || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Workflow != "flaky" || len(got.Paused) != 2 || len(got.Errors) != 1 {
		t.Errorf("-o json of a partial bulk pause: exit %d %s", r.code, r.stdout)
	}
	r = roboctl(t, "--addr", addr, "retry", lifeID, "-o", "json")
	if r.code != exitOK || !strings.Contains(r.stdout, `"run": 2`) || !strings.Contains(r.stdout, `"deploy"`) {
		t.Errorf("retry -o json: %s", r.stdout)
	}
	srv.take()

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause"}, "missing an instance id (or --workflow NAME"},
		{[]string{"resume", lifeID, "--workflow", "deploy"}, "give an instance id or --workflow NAME, not both"},
		{[]string{"pause", lifeID, lifeID}, "takes an instance id, not 2 arguments"},
		{[]string{"retry"}, "missing an instance id"},
	} {
		r := roboctl(t, append([]string{"--addr", addr}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if calls := srv.take(); len(calls) != 0 {
		t.Errorf("usage errors reached the node: %v", calls)
	}
	srv.err = status.Error(codes.FailedPrecondition, "retry instance x: instance is still running")
	if r := roboctl(t, "--addr", addr, "retry", lifeID); r.code != exitFailed || !strings.Contains(r.stderr, "instance is still running") {
		t.Errorf("a refused retry: exit %d, %s", r.code, r.stderr)
	}
}

// get and watch show PAUSED, the run, waits and signals.
func TestGetWatchShowWaitsAndSignals(t *testing.T) {
	addr := fakeServer(t, &lifecycleServer{})
	r := roboctl(t, "--addr", addr, "get", lifeID)
	if r.code != exitOK {
		t.Fatalf("get: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "get_waits.golden", r.stdout)

	r = roboctl(t, "--addr", addr, "get", lifeID, "-o", "json")
	var got struct {
		State   string `json:"state"`
		Paused  bool   `json:"paused"`
		Run     int    `json:"run"`
		Signals []struct {
			Seq      int64           `json:"seq"`
			Payload  json.RawMessage `json:"payload"`
			Consumed bool            `json:"consumed"`
			By       string          `json:"by"`
		} `json:"signals"`
		Tasks []struct {
			Name string `json:"name"`
			Wait *struct {
				Signal  string     `json:"signal"`
				Waiting bool       `json:"waiting"`
				Until   *time.Time `json:"until"`
			} `json:"wait"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if got.State != "PAUSED" || !got.Paused || got.Run != 2 || len(got.Signals) != 2 || !got.Signals[0].Consumed || got.Signals[0].By != "approve#1" ||
		!bytes.Equal(got.Signals[1].Payload, []byte("null")) {
		t.Errorf("-o json: %+v", got)
	}
	if w := got.Tasks[1].Wait; w == nil || w.Signal != "approve" || !w.Waiting || !w.Until.Equal(t0.Add(48*time.Hour)) {
		t.Errorf("-o json: the approve task's wait is %+v", w)
	}
	if got.Tasks[0].Wait != nil || got.Tasks[3].Wait == nil || got.Tasks[3].Wait.Waiting {
		t.Errorf("-o json: waits %+v / %+v", got.Tasks[0].Wait, got.Tasks[3].Wait)
	}

	r = roboctl(t, "--addr", addr, "watch", lifeID)
	if r.code != exitOK {
		t.Fatalf("watch: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "watch_lifecycle.golden", r.stdout)
	r = roboctl(t, "--addr", addr, "watch", lifeID, "-o", "json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var kinds []string
	for _, l := range lines {
		var ev struct {
			Kind   string `json:"kind"`
			Run    int    `json:"run"`
			Signal *struct {
				Name string `json:"name"`
			} `json:"signal"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("watch -o json: %v: %q", err, l)
		}
		kinds = append(kinds, ev.Kind)
		if (ev.Kind == "signal") != (ev.Signal != nil && ev.Signal.Name == "go") || (ev.Kind == "retried") != (ev.Run == 3) {
			t.Errorf("watch -o json: %s", l)
		}
	}
	if want := []string{"snapshot", "resumed", "signal", "paused", "retried", "state"}; !slices.Equal(kinds, want) {
		t.Errorf("watch -o json kinds %q, want %q", kinds, want)
	}
}
