//go:build unix

package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/connect"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// execNodeConfig is a single node serving code.exec, on loopback.
func execNodeConfig(t *testing.T, name string) Config {
	t.Helper()
	return Config{
		Name: name, DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", HTTPAddr: HTTPDisabled,
		GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Capabilities: map[string]int{"code.exec": 2},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Engine: engine.Config{ClaimInterval: 50 * time.Millisecond},
	}
}

// startExecNode starts a node and returns it with a client of its API.
func startExecNode(t *testing.T, cfg Config) (*Node, robonetv1.WorkflowServiceClient) {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	// The API listens wherever it was bound; a client on this machine
	// reaches it on loopback.
	_, port, err := net.SplitHostPort(n.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := connect.Dial(net.JoinHostPort("127.0.0.1", port), connect.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return n, robonetv1.NewWorkflowServiceClient(conn)
}

// execSpecVersion numbers the specs runExecTask submits: a version
// registered once cannot change.
var execSpecVersion atomic.Int64

// runExecTask submits a workflow of one exec task, tried once, with argv
// and env, and returns the instance once it is terminal.
func runExecTask(t *testing.T, api robonetv1.WorkflowServiceClient, argv, env string) *robonetv1.Instance {
	t.Helper()
	spec := "name: one-exec\nversion: " + strconv.FormatInt(execSpecVersion.Add(1), 10) + "\ndefaults: {retry: {max_attempts: 1}, timeout: 30s}\ntasks:\n" +
		"  run:\n    capability: code.exec\n    action: exec\n    with: {argv: " + argv + ", env: " + env + "}\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
		Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(spec), Filename: "one-exec.yaml"}},
	})
	if err != nil {
		t.Fatalf("SubmitWorkflow: %v", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: resp.GetInstanceId()})
		if err != nil {
			t.Fatalf("GetInstance: %v", err)
		}
		switch got.GetInstance().GetState() {
		case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, robonetv1.InstanceState_INSTANCE_STATE_FAILED, robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
			return got.GetInstance()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("instance %s did not finish: %v", resp.GetInstanceId(), got.GetInstance())
		}
	}
}

// scrape returns the node's /metrics text.
func scrape(t *testing.T, n *Node) string {
	t.Helper()
	rec := httptest.NewRecorder()
	n.metrics.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExecPolicyFollowsExposure: a node only its machine reaches runs any
// program unless told otherwise; one that listens beyond loopback needs a
// policy; a bad policy is a configuration error.
func TestExecPolicyFollowsExposure(t *testing.T) {
	loopback := Config{}.WithDefaults()
	if p := loopback.execPolicy(); p.Required || len(p.Allow) != 0 {
		t.Errorf("a loopback node: %+v, want no policy required", p)
	}
	for _, exposed := range []Config{
		{GRPCAddr: "0.0.0.0:7233", Insecure: true},
		{GossipAddr: "10.0.0.4:7301", Insecure: true},
		{HTTPAddr: "0.0.0.0:7280", EnableDebug: true, Insecure: true},
	} {
		if p := exposed.WithDefaults().execPolicy(); !p.Required {
			t.Errorf("%+v: a policy is not required", exposed)
		}
	}
	// HTTP without the profiler does not count: it runs nothing.
	if p := (Config{HTTPAddr: "0.0.0.0:7280"}).WithDefaults().execPolicy(); p.Required {
		t.Error("an HTTP port without the profiler made a policy required")
	}
	for _, bad := range []Config{
		{ExecAllow: []string{"curl"}},
		{ExecAllow: []string{"*", "/usr/bin/curl"}},
	} {
		if _, err := New(bad); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "exec-allow") {
			t.Errorf("New(%v) = %v, want a config error about exec-allow", bad.ExecAllow, err)
		}
	}
}

// TestExposedNodeWithoutPolicyRefusesExec is issue 38's acceptance test: a
// node that listens beyond loopback (its API on every interface) and was
// given no --exec-allow refuses an exec attempt; the instance shows why,
// naming the program and the node, and the refusal counts in the metrics.
func TestExposedNodeWithoutPolicyRefusesExec(t *testing.T) {
	cfg := execNodeConfig(t, "open")
	cfg.GRPCAddr, cfg.Insecure = "0.0.0.0:0", true
	core, logs := observer.New(zap.InfoLevel)
	cfg.Logger = zap.New(core)
	n, api := startExecNode(t, cfg)
	if len(n.cfg.exposed()) == 0 {
		t.Fatalf("the node does not count as exposed: %+v", n.cfg)
	}
	if got := logs.FilterMessageSnippet("exec refuses every program").Len(); got != 1 {
		t.Errorf("the start logged %d lines saying exec refuses every program, want 1", got)
	}

	in := runExecTask(t, api, "[sh, -c, 'echo should not run']", "{}")
	if in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_FAILED {
		t.Fatalf("instance %v, want FAILED", in.GetState())
	}
	task := in.GetTasks()[0]
	want := "exec refused on node open: this node has no exec policy and listens beyond loopback, so it runs no program (the attempt asked for sh); start it with --exec-allow"
	if !strings.Contains(task.GetError(), want) {
		t.Fatalf("task error %q, want it to say %q", task.GetError(), want)
	}
	if !strings.Contains(in.GetError(), "exec refused on node open") {
		t.Errorf("instance error %q does not say why", in.GetError())
	}
	if m := scrape(t, n); !strings.Contains(m, "\nrobonet_exec_refused_total 1\n") {
		t.Errorf("metrics lack robonet_exec_refused_total 1:\n%s", grepLines(m, "exec_refused"))
	}
}

// TestExecRunsOnlyWhatThePolicyAllows: with --exec-allow naming env, env
// runs and sh is refused, naming both and the fix.
func TestExecRunsOnlyWhatThePolicyAllows(t *testing.T) {
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env program:", err)
	}
	cfg := execNodeConfig(t, "w1")
	cfg.GRPCAddr, cfg.Insecure = "0.0.0.0:0", true
	cfg.ExecAllow = []string{env}
	n, api := startExecNode(t, cfg)
	if in := runExecTask(t, api, "[env]", "{}"); in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		t.Fatalf("env, allowed: %v %q", in.GetState(), in.GetError())
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	in := runExecTask(t, api, "[sh, -c, 'true']", "{}")
	want := "exec refused on node w1: sh (" + sh + ") is not allowed by this node's --exec-allow policy (it allows: " + env + "); add it with --exec-allow " + sh + " on w1"
	if got := in.GetTasks()[0].GetError(); in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_FAILED || !strings.Contains(got, want) {
		t.Fatalf("sh, not allowed: %v %q, want %q", in.GetState(), got, want)
	}
	if m := scrape(t, n); !strings.Contains(m, "\nrobonet_exec_refused_total 1\n") {
		t.Errorf("metrics: %s", grepLines(m, "exec_refused"))
	}
}

// TestExecEnvironmentHoldsNoNodeSecrets: a node started with credentials,
// tokens and keys in its environment runs /usr/bin/env through a
// workflow; the program sees the documented allowlist, the task's env and
// the ROBONET_* variables of its attempt, and nothing else.
func TestExecEnvironmentHoldsNoNodeSecrets(t *testing.T) {
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env program:", err)
	}
	secrets := map[string]string{
		"ROBONET_TOKEN":          "client-token-0123456789abcdef",
		"ROBONET_API_TOKEN_FILE": "/etc/robonet/api-tokens-secret-path",
		"ROBONET_GOSSIP_KEY":     "Z29zc2lwLWtleS1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q=",
		"ROBONET_POSTGRES":       "postgres://robonet:db-password-secret@pg1/robonet",
		"AWS_SECRET_ACCESS_KEY":  "aws-secret-0123456789",
		"GITHUB_TOKEN":           "ghp_secret0123456789",
		"SSH_AUTH_SOCK":          "/tmp/ssh-agent-secret.sock",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("HOME", "/home/robonet")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "Europe/Berlin")
	_, api := startExecNode(t, execNodeConfig(t, "w1"))

	in := runExecTask(t, api, "["+envPath+"]", "{GREETING: hello}")
	if in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		t.Fatalf("env: %v %q", in.GetState(), in.GetError())
	}
	var out string
	if err := json.Unmarshal([]byte(in.GetTasks()[0].GetOutputJson()), &out); err != nil {
		t.Fatalf("env's output %s: %v", in.GetTasks()[0].GetOutputJson(), err)
	}
	for k, v := range secrets {
		if strings.Contains(out, v) {
			t.Errorf("the program saw the node's %s", k)
		}
	}
	var names []string
	vars := map[string]string{}
	for l := range strings.SplitSeq(out, "\n") {
		k, v, _ := strings.Cut(l, "=")
		names = append(names, k)
		vars[k] = v
	}
	slices.Sort(names)
	want := []string{"GREETING", "HOME", "LANG", "PATH", "ROBONET_ATTEMPT", "ROBONET_EXECUTION_ID", "ROBONET_EXEC_TOKEN",
		"ROBONET_IDEMPOTENCY_KEY", "ROBONET_INSTANCE_ID", "ROBONET_TASK", "ROBONET_WORKER", "TZ"}
	if !slices.Equal(names, want) {
		t.Fatalf("the program's variables: %v, want %v", names, want)
	}
	for k, v := range map[string]string{"HOME": "/home/robonet", "LANG": "C.UTF-8", "TZ": "Europe/Berlin", "GREETING": "hello",
		"PATH": os.Getenv("PATH"), "ROBONET_TASK": "run", "ROBONET_INSTANCE_ID": in.GetId(), "ROBONET_ATTEMPT": "1"} {
		if vars[k] != v {
			t.Errorf("%s=%q, want %q", k, vars[k], v)
		}
	}
}

// TestExecAsAnotherUser: a node started with --exec-user nobody runs its
// programs as nobody, with nobody's HOME.
func TestExecAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs a node running as root; this test runs as uid", os.Geteuid())
	}
	cfg := execNodeConfig(t, "w1")
	cfg.ExecUser = "nobody"
	_, api := startExecNode(t, cfg)
	in := runExecTask(t, api, `[sh, -c, 'echo "$(id -u) $USER $HOME"']`, "{}")
	if in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		t.Fatalf("as nobody: %v %q", in.GetState(), in.GetError())
	}
	if got := in.GetTasks()[0].GetOutputJson(); !strings.HasPrefix(got, `"65534 nobody `) {
		t.Fatalf("as nobody, the program printed %s", got)
	}
	// A user that does not exist stops the node from starting.
	cfg = execNodeConfig(t, "w2")
	cfg.ExecUser = "no-such-user-here"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `exec-user "no-such-user-here": no such user`) {
		t.Fatalf("Start with an unknown exec user: %v, want a config error", err)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestExecAnyOnAnExposedNodeWarns: --exec-allow '*' on a node others can
// reach is said loudly at start.
func TestExecAnyOnAnExposedNodeWarns(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		warn bool
	}{
		{Config{GRPCAddr: "0.0.0.0:7233", Insecure: true, ExecAllow: []string{"*"}}, true},
		{Config{GRPCAddr: "0.0.0.0:7233", Insecure: true, ExecAllow: []string{"/usr/bin/curl"}}, false},
		{Config{ExecAllow: []string{"*"}}, false},
	} {
		core, logs := observer.New(zap.InfoLevel)
		c.cfg.Logger = zap.New(core)
		n, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.logExecPolicy(n.cfg.execPolicy())
		warned := logs.FilterLevelExact(zap.WarnLevel).FilterMessageSnippet("whoever may submit workflows to the mesh can run any program here").Len() == 1
		if warned != c.warn {
			t.Errorf("%s %v: warned %v, want %v", c.cfg.GRPCAddr, c.cfg.ExecAllow, warned, c.warn)
		}
	}
}

func grepLines(text, sub string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
