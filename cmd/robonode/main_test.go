package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	"github.com/robonet/robonet/wag"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a fake environment.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// resolveArgs parses args as robonode's flags and resolves the settings.
func resolveArgs(t *testing.T, e env, args ...string) (settings, error) {
	t.Helper()
	cmd := &cobra.Command{}
	addServerFlags(cmd.Flags())
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return resolve(cmd.Flags(), e.get)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	s, err := resolveArgs(t, env{})
	if err != nil {
		t.Fatal(err)
	}
	want := settings{DataDir: "robonode-data", Bind: "127.0.0.1", GRPC: "127.0.0.1:7233", HTTP: "127.0.0.1:7280",
		Gossip: "127.0.0.1:7301", Raft: "127.0.0.1:7302",
		LogFormat: "console", LogLevel: "info", ShutdownTimeout: 30 * time.Second,
		HeartbeatInterval: wag.DefaultHeartbeatInterval, MissedHeartbeats: wag.DefaultMissedHeartbeats, DispatchTier: "established", Placement: mesh.PlaceBalanced,
		WorkerMinRuntime: node.DefaultWorkerMinRuntime}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", s, want)
	}
}

// TestPrecedence: flag > environment > config file > default, per setting.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "robonode.yaml", `
name: from-file
data_dir: /var/lib/robonode
grpc: 7000
http: 7001
bind: 10.0.0.1
log-level: warn
capabilities: {core: 3, code.exec: 5}
`)
	e := env{"ROBONET_CONFIG": file, "ROBONET_GRPC": "8000", "ROBONET_HTTP": "off", "ROBONET_NAME": "from-env"}
	s, err := resolveArgs(t, e, "--grpc", "0.0.0.0:9000", "--log-format", "json")
	if err != nil {
		t.Fatal(err)
	}
	want := settings{
		Name: "from-env", DataDir: "/var/lib/robonode", Bind: "10.0.0.1",
		GRPC: "0.0.0.0:9000", HTTP: "off", Gossip: "10.0.0.1:7301", Raft: "10.0.0.1:7302",
		Capabilities: map[string]int{"core": 3, "code.exec": 5},
		LogFormat:    "json", LogLevel: "warn", ShutdownTimeout: 30 * time.Second,
		HeartbeatInterval: wag.DefaultHeartbeatInterval, MissedHeartbeats: wag.DefaultMissedHeartbeats,
		DispatchTier: "established", Placement: mesh.PlaceBalanced, WorkerMinRuntime: node.DefaultWorkerMinRuntime,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings:\n got %+v\nwant %+v", s, want)
	}

	// Capabilities: flags replace the file's; the environment's list form.
	s, err = resolveArgs(t, e, "--capability", "net.scan=2", "--capability", "core=1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"net.scan": 2, "core": 1}; !reflect.DeepEqual(s.Capabilities, want) {
		t.Errorf("capabilities from flags: %v, want %v", s.Capabilities, want)
	}
	// --capability none: a node that serves nothing (not the default set).
	if s, err = resolveArgs(t, e, "--capability", "none"); err != nil || s.Capabilities == nil || len(s.Capabilities) != 0 {
		t.Errorf("--capability none: %v, %v; want an empty, non-nil set", s.Capabilities, err)
	}
	e["ROBONET_CAPABILITY"] = "ai.inference=2, code.exec=7"
	s, err = resolveArgs(t, e)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"ai.inference": 2, "code.exec": 7}; !reflect.DeepEqual(s.Capabilities, want) {
		t.Errorf("capabilities from env: %v, want %v", s.Capabilities, want)
	}

	// --config beats ROBONET_CONFIG; a JSON file with a list of capabilities.
	other := writeFile(t, "robonode.json", `{"data_dir": "/srv/robo", "capability": ["core=9"]}`)
	s, err = resolveArgs(t, env{"ROBONET_CONFIG": file}, "--config", other)
	if err != nil {
		t.Fatal(err)
	}
	if s.DataDir != "/srv/robo" || !reflect.DeepEqual(s.Capabilities, map[string]int{"core": 9}) {
		t.Errorf("--config: %+v", s)
	}
}

// TestMeshSettings: --join is repeatable (a list in env and file),
// --server is unset unless given, the gossip key is base64.
func TestMeshSettings(t *testing.T) {
	key := "MDEyMzQ1Njc4OWFiY2RlZg==" // "0123456789abcdef"
	s, err := resolveArgs(t, env{}, "--join", "10.0.0.1:7301", "--join", "10.0.0.2:7301", "--server",
		"--bootstrap-expect", "3", "--gossip", "0", "--raft", "0.0.0.0:9302", "--advertise", "10.0.0.9", "--gossip-key", key)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Join, []string{"10.0.0.1:7301", "10.0.0.2:7301"}) || s.Server == nil || !*s.Server ||
		s.BootstrapExpect != 3 || s.Gossip != "127.0.0.1:0" || s.Raft != "0.0.0.0:9302" || s.Advertise != "10.0.0.9" ||
		string(s.GossipKey) != "0123456789abcdef" {
		t.Errorf("mesh flags: %+v", s)
	}
	s, err = resolveArgs(t, env{"ROBONET_JOIN": "a:1, b:2", "ROBONET_SERVER": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Join, []string{"a:1", "b:2"}) || s.Server == nil || *s.Server {
		t.Errorf("mesh env: %+v", s)
	}
	file := writeFile(t, "robonode.yaml", "join: [c:3]\nserver: true\nbootstrap_expect: 3\n")
	s, err = resolveArgs(t, env{}, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Join, []string{"c:3"}) || s.Server == nil || !*s.Server || s.BootstrapExpect != 3 {
		t.Errorf("mesh file: %+v", s)
	}
	if s, _ := resolveArgs(t, env{}); s.EnableDebug {
		t.Error("--enable-debug is on by default")
	}
	if s, _ := resolveArgs(t, env{"ROBONET_ENABLE_DEBUG": "true"}); !s.EnableDebug {
		t.Error("ROBONET_ENABLE_DEBUG=true did not enable the profiler")
	}
	if s, _ := resolveArgs(t, env{}); s.Server != nil {
		t.Errorf("--server unset resolved to %v, want nil (decided by --join)", *s.Server)
	}
}

// TestWorkerProgramSettings: the built-ins worker programs may claim
// (none by default; repeatable, a list in the environment) and the floor
// of their answers (0 turns it off).
func TestWorkerProgramSettings(t *testing.T) {
	s, err := resolveArgs(t, env{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := nodeConfig(s, zap.NewNop())
	if len(cfg.AllowWorkerBuiltins) != 0 || cfg.WorkerMinRuntime != node.DefaultWorkerMinRuntime {
		t.Errorf("defaults: builtins %v, floor %v; want none and %v", cfg.AllowWorkerBuiltins, cfg.WorkerMinRuntime, node.DefaultWorkerMinRuntime)
	}
	s, err = resolveArgs(t, env{}, "--allow-worker-builtins", "exec", "--allow-worker-builtins", "echo", "--worker-min-runtime", "5ms")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := nodeConfig(s, zap.NewNop()); !reflect.DeepEqual(cfg.AllowWorkerBuiltins, []string{"exec", "echo"}) || cfg.WorkerMinRuntime != 5*time.Millisecond {
		t.Errorf("flags: builtins %v, floor %v", cfg.AllowWorkerBuiltins, cfg.WorkerMinRuntime)
	}
	s, err = resolveArgs(t, env{"ROBONET_ALLOW_WORKER_BUILTINS": "*", "ROBONET_WORKER_MIN_RUNTIME": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := nodeConfig(s, zap.NewNop()); !reflect.DeepEqual(cfg.AllowWorkerBuiltins, []string{"*"}) || cfg.WorkerMinRuntime >= 0 {
		t.Errorf("env: builtins %v, floor %v; want * and none (negative)", cfg.AllowWorkerBuiltins, cfg.WorkerMinRuntime)
	}
}

// TestMeshNeedsPostgres: more than one server on SQLite is refused at
// startup with exit code 2 and a message that says how to fix it.
func TestMeshNeedsPostgres(t *testing.T) {
	for _, args := range [][]string{
		{"--bootstrap-expect", "3"},
		{"--join", "127.0.0.1:1", "--server"},
	} {
		var out, errOut bytes.Buffer
		args = append(args, "--data-dir", t.TempDir(), "--grpc", "0", "--http", "off", "--gossip", "0", "--raft", "0")
		code := run(args, &out, &errOut, env{}.get)
		if code != exitUsage || !strings.Contains(errOut.String(), "needs a shared Postgres store") ||
			!strings.Contains(errOut.String(), "--postgres DSN") {
			t.Errorf("robonode %v: exit %d, want %d with the Postgres message\n%s", args, code, exitUsage, errOut.String())
		}
	}
}

func TestBadSettings(t *testing.T) {
	badFile := writeFile(t, "bad.yaml", "data_dirr: x\n")
	for _, c := range []struct {
		env  env
		args []string
		msg  string
	}{
		{env{}, []string{"--log-format", "xml"}, "log-format"},
		{env{}, []string{"--log-level", "loud"}, "log-level"},
		{env{}, []string{"--capability", "code.exec"}, "NAME=SIZE"},
		{env{}, []string{"--capability", "code.exec=0"}, "NAME=SIZE"},
		{env{}, []string{"--grpc", "nowhere"}, "grpc"},
		{env{}, []string{"--bind", "example.com"}, "bind"},
		{env{}, []string{"--join", "nowhere"}, "join"},
		{env{}, []string{"--gossip-key", "c2hvcnQ="}, "gossip-key"},
		{env{}, []string{"--gossip-key", "!!"}, "base64"},
		{env{"ROBONET_SERVER": "maybe"}, nil, "server"},
		{env{}, []string{"--bootstrap-expect", "-1"}, "bootstrap-expect"},
		{env{"ROBONET_SHUTDOWN_TIMEOUT": "soon"}, nil, "shutdown-timeout"},
		{env{}, []string{"--heartbeat-interval", "0s"}, "heartbeat-interval"},
		{env{"ROBONET_MISSED_HEARTBEATS": "0"}, nil, "missed-heartbeats"},
		{env{"ROBONET_ENABLE_DEBUG": "please"}, nil, "enable-debug"},
		{env{}, []string{"--dispatch-tier", "gold"}, "dispatch-tier \"gold\": want unverified, provisional, established or trusted"},
		{env{}, []string{"--trust-peer", ""}, "trust-peer"},
		{env{}, []string{"--allow-worker-builtins", "rm"}, `allow-worker-builtins "rm": name a built-in action (echo, exec, http, sleep) or *`},
		{env{}, []string{"--worker-min-runtime", "-1ms"}, "worker-min-runtime"},
		{env{}, []string{"--config", badFile}, `unknown key "data_dirr"`},
		{env{}, []string{"--config", "/no/such/file.yaml"}, "config file"},
	} {
		_, err := resolveArgs(t, c.env, c.args...)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), c.msg) || !asUsage(err, &ue) {
			t.Errorf("%v %v: error %v, want a usage error mentioning %q", c.env, c.args, err, c.msg)
		}
	}
}

func asUsage(err error, ue *usageError) bool {
	u, ok := err.(usageError) //nolint:errorlint // resolve returns it unwrapped
	*ue = u
	return ok
}

func TestExitCodes(t *testing.T) {
	run1 := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, env{}.get)
		return code, errOut.String()
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"extra-arg"}, {"--log-format", "xml"}, {"--capability", "Bad Name=2"}} {
		if code, stderr := run1(args...); code != exitUsage {
			t.Errorf("robonode %v: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}

	// A runtime failure: the gRPC port is taken.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	code, stderr := run1("--data-dir", t.TempDir(), "--grpc", lis.Addr().String(), "--http", "off", "--log-format", "json")
	if code != exitRuntime || !strings.Contains(stderr, "node failed to start") {
		t.Errorf("port in use: exit %d, want %d\n%s", code, exitRuntime, stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut, env{}.get); code != exitOK || !strings.HasPrefix(out.String(), "robonode dev (commit ") ||
		!strings.Contains(out.String(), runtime.Version()) {
		t.Fatalf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// Console logs carry the date: a node runs for days.
func TestConsoleLogHasDate(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("console", "info", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("node started")
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\tINFO\tnode started\n$`).MatchString(buf.String()) {
		t.Fatalf("console line %q lacks the date", buf.String())
	}
}
