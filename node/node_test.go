package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConfig(t *testing.T) {
	yes, no := true, false
	c := Config{}.WithDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.GRPCAddr != DefaultGRPCAddr || c.HTTPAddr != DefaultHTTPAddr || c.DataDir != DefaultDataDir || c.Name == "" {
		t.Errorf("defaults: %+v", c)
	}
	for _, capability := range []string{"core", "code.exec", "net.scan", "net.http", "ai.inference"} {
		if c.Capabilities[capability] < 1 {
			t.Errorf("default capability set lacks %s: %v", capability, c.Capabilities)
		}
	}
	for _, bad := range []Config{
		{GRPCAddr: "nowhere"},
		{Name: "a/b"}, // a worker id "a/b/core/1" would name node a
		{Name: "bad name"},
		{Name: "-flag"},
		{Name: "nul\x00"},
		{Name: strings.Repeat("n", 129)},
		{HTTPAddr: "nowhere"},
		{MaxMessageBytes: 10},
		{MaxSpecBytes: 64 << 20},
		{Wag: wag.Config{MaxOutputBytes: DefaultMaxMessageBytes}}, // no room for the rest of a result
		{Capabilities: map[string]int{"core": 0}},
		{GossipAddr: "nowhere"},
		{GossipKey: []byte("short")},
		{Join: []string{""}},
		{Server: &no, BootstrapExpect: 3},
		{TrustPeers: []string{"w1/"}},
		{TrustPeers: []string{"w1/a/b"}},
		{TrustPeers: []string{"*/gpu"}},
		{AllowWorkerBuiltins: []string{"rm"}},
	} {
		if _, err := New(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", bad, err)
		}
	}

	// Roles: a node of its own is a server; one that joins is a worker
	// unless told otherwise.
	if c := (Config{}).WithDefaults(); !c.IsServer() || c.BootstrapExpect != 1 {
		t.Errorf("no join: server %v, bootstrap-expect %d; want a server expecting 1", c.IsServer(), c.BootstrapExpect)
	}
	if c := (Config{Join: []string{"10.0.0.1:7301"}}).WithDefaults(); c.IsServer() || c.BootstrapExpect != 0 {
		t.Errorf("join: server %v, bootstrap-expect %d; want a worker", c.IsServer(), c.BootstrapExpect)
	}

	// More than one server needs Postgres; workers and single servers do not.
	for _, bad := range []Config{
		{BootstrapExpect: 3},
		{Join: []string{"10.0.0.1:7301"}, Server: &yes},
	} {
		if _, err := New(bad); !errors.Is(err, ErrConfig) || !errors.Is(err, ErrMeshNeedsPostgres) ||
			!strings.Contains(err.Error(), "--postgres") {
			t.Errorf("New(%+v) = %v, want ErrMeshNeedsPostgres", bad, err)
		}
	}
	for _, good := range []Config{
		{BootstrapExpect: 3, PostgresDSN: "postgres://x"},
		{Join: []string{"10.0.0.1:7301"}, Server: &yes, PostgresDSN: "postgres://x"},
		{Join: []string{"10.0.0.1:7301"}},
		{TrustPeers: []string{"*", "w1", "w1/gpu", "w1/*", "*/*"}, AllowWorkerBuiltins: []string{"echo", "*"}},
	} {
		if _, err := New(good); err != nil {
			t.Errorf("New(%+v) = %v", good, err)
		}
	}
}

// TestStartFailsCleanly: a Start that fails half-way stops what it started
// and unlocks the data directory (a second node can use it).
func TestStartFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: "256.0.0.1:1", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(context.Background()); err == nil {
		t.Fatal("Start with an unusable HTTP address succeeded")
	}
	if err := first.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
	if err := first.Start(context.Background()); !errors.Is(err, lifecycle.ErrStopped) {
		t.Errorf("Start after a failed Start: %v, want ErrStopped", err)
	}

	second, err := New(Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: HTTPDisabled, GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(context.Background()); err != nil {
		t.Fatalf("Start on the released directory: %v", err)
	}
	if err := second.Start(context.Background()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Errorf("a second Start: %v, want ErrStarted", err)
	}
	// The directory is locked while the node runs.
	third, _ := New(Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: HTTPDisabled, GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"})
	if err := third.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second node on a locked directory: %v", err)
		_ = third.Stop(context.Background())
	}
	if err := second.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := second.Stop(context.Background()); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	if err := second.Start(context.Background()); !errors.Is(err, lifecycle.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}
}

// The HTTP server bounds every phase of a connection, so idle or slow
// clients cannot hold connections (and goroutines) forever.
func TestHTTPServerTimeouts(t *testing.T) {
	n, err := New(Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	srv := n.httpSrv
	if srv.ReadHeaderTimeout != httpReadHeaderTimeout || srv.ReadTimeout != httpReadTimeout || srv.WriteTimeout != httpWriteTimeout ||
		srv.IdleTimeout != httpIdleTimeout || srv.MaxHeaderBytes != httpMaxHeaderBytes {
		t.Fatalf("HTTP server bounds: %+v", srv)
	}
	for _, d := range []time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout} {
		if d <= 0 || d > time.Minute {
			t.Errorf("a timeout of %s", d)
		}
	}
}

func TestErrorStatus(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	log := zap.New(core)
	specErr := fmt.Errorf("register workflow x.yaml: %w", spec.ErrorList{
		{File: "x.yaml", Line: 3, Column: 5, Task: "probe", Field: "needs[0]", Msg: `unknown task "a"`, Hint: `did you mean "b"?`},
		{File: "x.yaml", Line: 9, Column: 1, Msg: "no tasks"},
	})
	inputErr := fmt.Errorf("submit x v1: %w", errors.Join(
		fmt.Errorf("%w: missing required input %q", graph.ErrInvalidInput, "target"),
		fmt.Errorf("%w: unknown input %q", graph.ErrInvalidInput, "trget"),
	))
	cases := []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{specErr, codes.InvalidArgument, "does not compile (2 problems)"},
		{inputErr, codes.InvalidArgument, `"target"`},
		{fmt.Errorf("get instance: %w", port.ErrNotFound), codes.NotFound, "not found"},
		{fmt.Errorf("x: %w", port.ErrVersionConflict), codes.AlreadyExists, "different definition"},
		{fmt.Errorf("x: %w", port.ErrIdempotencyConflict), codes.AlreadyExists, "idempotency"},
		{fmt.Errorf("x: %w", port.ErrInvalidArgument), codes.InvalidArgument, "invalid"},
		{fmt.Errorf("cancel: %w", engine.ErrInstanceFinished), codes.FailedPrecondition, "finished"},
		{fmt.Errorf("x: %w", engine.ErrStopped), codes.Unavailable, "shutting down"},
		{fmt.Errorf("list instances: %w: bad base64", port.ErrInvalidPageToken), codes.InvalidArgument, "page_token: not a token this server returned"},
		{fmt.Errorf("submit x: %w", engine.ErrUnloadable), codes.FailedPrecondition, "cannot be loaded"},
		{context.Canceled, codes.Canceled, "cancelled"},
		{fmt.Errorf("x: %w", &mesh.NotLeaderError{Leader: "s2", LeaderGRPC: "10.0.0.2:7233"}), codes.Unavailable, "the leader is s2 at 10.0.0.2:7233"},
		{fmt.Errorf("%w within the forwarding window", ErrNoLeader), codes.Unavailable, "no engine leader"},
		{status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied, "no"},
		{errors.New("pq: connection refused at 10.1.2.3"), codes.Internal, "internal error"},
		{fmt.Errorf("register workflow: failed to connect to 10.1.2.3: %w", port.ErrStoreUnavailable), codes.Unavailable,
			"nothing was done; retry"},
		{fmt.Errorf("queue 1 instances: unexpected EOF at 10.1.2.3: %w: %w", port.ErrStoreUnavailable, port.ErrOutcomeUnknown),
			codes.Unavailable, "same idempotency key"},
	}
	for _, c := range cases {
		st, _ := status.FromError(errorStatus(log, "/m", c.err))
		if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
			t.Errorf("%v: got %v %q, want %v with %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
		if strings.Contains(st.Message(), "10.1.2.3") {
			t.Errorf("an internal error leaks its cause: %q", st.Message())
		}
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].ContextMap()["error"].(string), "10.1.2.3") {
		t.Errorf("the internal error's cause is not logged: %v", logs.All())
	}

	st, _ := status.FromError(errorStatus(log, "/m", &mesh.NotLeaderError{Leader: "s2", LeaderGRPC: "10.0.0.2:7233"}))
	if info, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || info.GetReason() != ReasonNotLeader ||
		info.GetMetadata()["leader_grpc"] != "10.0.0.2:7233" {
		t.Errorf("not-leader details: %v", st.Details())
	}

	// A store outage says whether the call may have taken effect, and when
	// to retry; the forwarder retries only what surely did not.
	for outcome, err := range map[string]error{
		"not_applied": fmt.Errorf("x: %w", port.ErrStoreUnavailable),
		"unknown":     fmt.Errorf("x: %w: %w", port.ErrStoreUnavailable, port.ErrOutcomeUnknown),
	} {
		mapped := errorStatus(log, "/m", err)
		st, _ := status.FromError(mapped)
		var (
			info  *errdetails.ErrorInfo
			retry *errdetails.RetryInfo
		)
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				info = d
			case *errdetails.RetryInfo:
				retry = d
			}
		}
		if info.GetReason() != ReasonStoreUnavailable || info.GetMetadata()["outcome"] != outcome || retry.GetRetryDelay().AsDuration() <= 0 {
			t.Errorf("store unavailable (%s): details %v", outcome, st.Details())
		}
		if got, want := retryable(mapped), outcome == "not_applied"; got != want {
			t.Errorf("store unavailable (%s): forwarder retries it: %v, want %v", outcome, got, want)
		}
	}
	if !retryable(errorStatus(log, "/m", &mesh.NotLeaderError{Leader: "s2"})) || retryable(status.Error(codes.NotFound, "x")) {
		t.Errorf("retryable: a redirect must be retried, a NOT_FOUND not")
	}

	st, _ = status.FromError(errorStatus(log, "/m", specErr))
	details, ok := st.Details()[0].(*robonetv1.SpecErrors)
	if !ok || len(details.GetErrors()) != 2 {
		t.Fatalf("spec details: %v", st.Details())
	}
	if e := details.GetErrors()[0]; e.GetLine() != 3 || e.GetColumn() != 5 || e.GetTask() != "probe" ||
		e.GetText() != `x.yaml:3:5: task "probe": needs[0]: unknown task "a"; did you mean "b"?` {
		t.Errorf("spec detail: %v", e)
	}
	st, _ = status.FromError(errorStatus(log, "/m", inputErr))
	br, ok := st.Details()[0].(*errdetails.BadRequest)
	if !ok || len(br.GetFieldViolations()) != 2 || !strings.Contains(br.GetFieldViolations()[1].GetDescription(), "trget") {
		t.Errorf("input details: %v", st.Details())
	}
}

func TestProgress(t *testing.T) {
	p := progressOf([]engine.TaskView{
		{Status: graph.TaskCompleted, Width: -1},
		{Status: graph.TaskRunning, Width: 10, Done: 4, Failed: 1},
		{Status: graph.TaskWaiting, Width: -1}, // a spread not expanded yet counts as one
		{Status: graph.TaskSkipped, Width: -1},
		{Status: graph.TaskRunning, Width: -1},
		{Status: graph.TaskCompleted, Width: 0}, // an empty spread
	})
	want := &robonetv1.InstanceProgress{Total: 15, Done: 8, Running: 6, Failed: 1, Skipped: 1}
	if p.String() != want.String() {
		t.Errorf("progress %v, want %v", p, want)
	}
}

// The API's eta is set when the engine knows one, 0 included ("any moment
// now"), and unset otherwise.
func TestInstanceETAToProto(t *testing.T) {
	for _, c := range []struct {
		v    engine.InstanceView
		want string // "": unset
	}{
		{engine.InstanceView{ETA: 80 * time.Second, ETAKnown: true}, "1m20s"},
		{engine.InstanceView{ETAKnown: true}, "0s"},
		{engine.InstanceView{ETA: 80 * time.Second}, ""},
	} {
		in := instanceToProto(&c.v)
		got := ""
		if in.GetEta() != nil {
			got = in.GetEta().AsDuration().String()
		}
		if got != c.want {
			t.Errorf("ETA %s (known %t): eta %q, want %q", c.v.ETA, c.v.ETAKnown, got, c.want)
		}
	}
}
