package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/connect"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// robonodeBin is the robonode binary the crash tests run, built on first
// use into binDir (removed by TestMain).
var (
	binDir      string
	buildOnce   sync.Once
	robonodeBin string
	buildErr    error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "robonet-e2e-bin-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		binDir = dir
		defer os.RemoveAll(dir)
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				return 1
			}
		}
		return code
	}())
}

// buildRobonode builds cmd/robonode once per test binary.
func buildRobonode(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		robonodeBin = filepath.Join(binDir, "robonode")
		cmd := exec.Command("go", "build", "-o", robonodeBin, "github.com/robonet/robonet/cmd/robonode")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build robonode: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return robonodeBin
}

// storeKind selects the store a test node runs on.
type storeKind string

const (
	sqliteStore   storeKind = "sqlite"
	postgresStore storeKind = "postgres"
)

var allStores = []storeKind{sqliteStore, postgresStore}

// forEachStore runs fn as parallel subtests, one per store.
func forEachStore(t *testing.T, fn func(t *testing.T, store storeKind)) {
	t.Helper()
	for _, st := range allStores {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			fn(t, st)
		})
	}
}

// testNode is a node started in-process with a client of its API.
type testNode struct {
	node *node.Node
	conn *grpc.ClientConn
	api  robonetv1.WorkflowServiceClient
}

// testdataSpec reads a spec of testdata/, failing the whole run if it is
// missing (every spec a test submits lives there, unless the test fills it
// in with fmt).
func testdataSpec(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testConfig is a node configuration with timings tightened for tests.
func testConfig(t *testing.T, store storeKind) node.Config {
	t.Helper()
	cfg := node.Config{
		Name:         "e2e",
		DataDir:      t.TempDir(),
		GRPCAddr:     "127.0.0.1:0",
		HTTPAddr:     node.HTTPDisabled,
		GossipAddr:   "127.0.0.1:0",
		RaftAddr:     "127.0.0.1:0",
		Capabilities: map[string]int{"core": 8, "code.exec": 8},
		Logger:       failureLogger(t),
		StopTimeout:  5 * time.Second,
		Engine: engine.Config{
			Shards:            2,
			ClaimInterval:     50 * time.Millisecond,
			Lease:             5 * time.Second,
			WatchPollInterval: 50 * time.Millisecond,
		},
		Wag: wag.Config{
			HeartbeatInterval: 100 * time.Millisecond,
			CancelGrace:       2 * time.Second,
		},
	}
	if store == postgresStore {
		cfg.PostgresDSN, cfg.PostgresSchema = pgtest.Schema(t)
	}
	return cfg
}

// startNode starts a node on store and stops it when the test ends.
func startNode(t *testing.T, store storeKind) *testNode {
	t.Helper()
	return startNodeWith(t, testConfig(t, store))
}

func startNodeWith(t *testing.T, cfg node.Config) *testNode {
	t.Helper()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("node.Start: %v", err)
	}
	conn := dialAs(t, n.GRPCAddr(), clientOf(cfg))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("node.Stop: %v", err)
		}
	})
	return &testNode{node: n, conn: conn, api: robonetv1.NewWorkflowServiceClient(conn)}
}

// clientOf is what a client of a node configured with cfg presents: the
// node's CA and its first API token, if it has them.
func clientOf(cfg node.Config) connect.Credentials {
	c := connect.Credentials{CAFile: cfg.TLS.CA}
	if len(cfg.APITokens) > 0 {
		c.Token = cfg.APITokens[0]
	}
	return c
}

// dialAs connects to addr with c and closes the connection when the test
// ends.
func dialAs(t testing.TB, addr string, c connect.Credentials) *grpc.ClientConn {
	t.Helper()
	conn, err := connect.Dial(addr, c)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// dial connects to addr and closes the connection when the test ends
// (cleanups run last-in first-out: before the node stops).
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// submitSpec submits an inline spec with inputs (a JSON object or "").
func submitSpec(t testing.TB, api robonetv1.WorkflowServiceClient, spec, inputs string) string {
	t.Helper()
	resp, err := api.SubmitWorkflow(ctxFor(t, 30*time.Second), &robonetv1.SubmitWorkflowRequest{
		Workflow:   &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(spec), Filename: "test.yaml"}},
		InputsJson: inputs,
	})
	if err != nil {
		t.Fatalf("SubmitWorkflow: %v", err)
	}
	return resp.GetInstanceId()
}

// waitDone follows the instance until it is terminal and returns its final
// view. It fails the test after timeout.
func waitDone(t *testing.T, api robonetv1.WorkflowServiceClient, id string, timeout time.Duration) *robonetv1.Instance {
	t.Helper()
	ctx := ctxFor(t, timeout)
	var after uint64
	for {
		stream, err := api.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: id, AfterSeq: after})
		if err != nil {
			t.Fatalf("WatchInstance %s: %v", id, err)
		}
		terminal := false
		for !terminal {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("instance %s did not finish within %s: %v", id, timeout, err)
				}
				t.Fatalf("watching %s: %v", id, err)
			}
			after = msg.GetEvent().GetSeq()
			terminal = isTerminal(msg.GetEvent().GetState())
		}
		if terminal {
			break
		}
	}
	resp, err := api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
	if err != nil {
		t.Fatalf("GetInstance %s: %v", id, err)
	}
	return resp.GetInstance()
}

func isTerminal(s robonetv1.InstanceState) bool {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, robonetv1.InstanceState_INSTANCE_STATE_FAILED,
		robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		return true
	}
	return false
}

// run submits spec and waits for the instance to finish.
func run(t *testing.T, tn *testNode, spec, inputs string) *robonetv1.Instance {
	t.Helper()
	return waitDone(t, tn.api, submitSpec(t, tn.api, spec, inputs), 60*time.Second)
}

// canonical re-encodes a JSON text in canonical form, so that texts can be
// compared exactly (key order and spacing aside, and 1 is not 1.0).
func canonical(t *testing.T, text string) string {
	t.Helper()
	v, err := value.Decode([]byte(text))
	if err != nil {
		t.Fatalf("not JSON: %q: %v", text, err)
	}
	return string(value.MustEncode(v))
}

// wantState fails the test unless in is in state want; it shows the
// instance's tasks and errors when it is not.
func wantState(t *testing.T, in *robonetv1.Instance, want robonetv1.InstanceState) {
	t.Helper()
	if in.GetState() != want {
		t.Fatalf("instance %s: state %v, want %v; error %q\n%s", in.GetId(), in.GetState(), want, in.GetError(), describeTasks(in))
	}
}

// wantOutputs checks an instance completed with exactly these outputs.
func wantOutputs(t *testing.T, in *robonetv1.Instance, want string) {
	t.Helper()
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	if got, w := canonical(t, in.GetOutputsJson()), canonical(t, want); got != w {
		t.Fatalf("outputs:\n got %s\nwant %s", got, w)
	}
}

func describeTasks(in *robonetv1.Instance) string {
	var b strings.Builder
	for _, tk := range in.GetTasks() {
		fmt.Fprintf(&b, "  %s: %v attempt %d/%d output %s error %q\n", tk.GetName(), tk.GetStatus(), tk.GetAttempt(),
			tk.GetMaxAttempts(), tk.GetOutputJson(), tk.GetError())
	}
	return b.String()
}

// task returns the named task of an instance.
func task(t *testing.T, in *robonetv1.Instance, name string) *robonetv1.TaskState {
	t.Helper()
	for _, tk := range in.GetTasks() {
		if tk.GetName() == name {
			return tk
		}
	}
	t.Fatalf("instance has no task %q:\n%s", name, describeTasks(in))
	return nil
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
