package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/audit"
	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

func TestMain(m *testing.M) {
	// Times print in UTC whatever the machine's zone, as golden files
	// need (set before any goroutine reads it).
	time.Local = time.UTC
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is one roboctl run.
type result struct {
	code           int
	stdout, stderr string
}

// roboctl runs the command line in-process.
func roboctl(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// testdataSpec reads a spec of testdata/ (failing the whole run if it is
// missing: every test reads its specs from there).
func testdataSpec(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testNode starts a node in-process on SQLite in dir (a temporary one if
// empty) at addr (a free port if empty).
func testNode(t *testing.T, dir, addr string) *node.Node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	n, err := node.New(node.Config{
		Name: "roboctl-test", DataDir: dir, GRPCAddr: addr, HTTPAddr: node.HTTPDisabled,
		GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Capabilities: map[string]int{"core": 4, "code.exec": 4},
		Logger:       zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
		StopTimeout:  5 * time.Second,
		Engine:       engine.Config{ClaimInterval: 50 * time.Millisecond, WatchPollInterval: 50 * time.Millisecond},
		Wag:          wag.Config{HeartbeatInterval: 100 * time.Millisecond, CancelGrace: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	return n
}

// writeSpec writes a spec into a temporary directory and returns its path.
func writeSpec(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The specs the tests share, in testdata/.
var (
	helloSpec   = testdataSpec("hello.yaml")
	failingSpec = testdataSpec("failing.yaml")
	brokenSpec  = testdataSpec("broken.yaml")  // three problems with positions
	slowSpec    = testdataSpec("slow.yaml")    // two tasks of half a second each
	sleepySpec  = testdataSpec("sleepy.yaml")  // a task that sleeps 30 s
	retriedSpec = testdataSpec("retried.yaml") // fails its first two attempts
	logsSpec    = testdataSpec("logs.yaml")    // exec tasks writing to stderr and stdout
)

func TestSubmitWait(t *testing.T) {
	n := testNode(t, "", "")
	spec := writeSpec(t, "hello.yaml", helloSpec)

	r := roboctl(t, "--addr", n.GRPCAddr(), "submit", spec, "--input", "name=Ada", "--wait")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"instance ", "of hello v1", "COMPLETE", `"greeting": "Hello, Ada!"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "progress: 1/1 done, 0 running, 0 failed") {
		t.Errorf("stderr shows no final progress line:\n%s", r.stderr)
	}

	// -o json: one JSON document with the outputs embedded as JSON.
	r = roboctl(t, "--addr", n.GRPCAddr(), "submit", spec, "--wait", "-o", "json")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got struct {
		State   string         `json:"state"`
		Outputs map[string]any `json:"outputs"`
		Tasks   []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, r.stdout)
	}
	if got.State != "COMPLETE" || got.Outputs["greeting"] != "Hello, world!" || len(got.Tasks) != 1 || got.Tasks[0].Status != "completed" {
		t.Errorf("-o json: %+v", got)
	}
}

func TestSubmitFailures(t *testing.T) {
	n := testNode(t, "", "")
	addr := n.GRPCAddr()

	r := roboctl(t, "--addr", addr, "submit", writeSpec(t, "failing.yaml", failingSpec), "--wait")
	if r.code != exitFailed {
		t.Errorf("a failing workflow: exit %d, want %d", r.code, exitFailed)
	}
	if !strings.Contains(r.stdout, "FAILED") || !strings.Contains(r.stdout, "the disk is on fire") {
		t.Errorf("a failing workflow does not show its state and error:\n%s", r.stdout)
	}

	r = roboctl(t, "--addr", addr, "submit", writeSpec(t, "broken.yaml", brokenSpec))
	if r.code != exitFailed {
		t.Errorf("an invalid spec: exit %d, want %d", r.code, exitFailed)
	}
	for _, want := range []string{"INVALID_ARGUMENT", `broken.yaml:5:13: task "probe": needs[0]: unknown task "discovr"; did you mean "discover"?`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("an invalid spec: stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	r = roboctl(t, "--addr", addr, "submit", writeSpec(t, "hello.yaml", helloSpec), "--input", "nickname=x")
	if r.code != exitFailed || !strings.Contains(r.stderr, "nickname") {
		t.Errorf("an unknown input: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	r = roboctl(t, "--addr", addr, "submit", "--workflow", "nope@3")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("an unknown workflow: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"submit"},
		{"submit", "a.yaml", "--workflow", "hello"},
		{"submit", "a.yaml", "--input", "novalue"},
		{"submit", "--workflow", "hello@x"},
		{"get"},
		{"get", "a", "b"},
		{"get", "id", "-o", "xml"},
		{"ls", "--state", "sleeping"},
		{"ls", "--limit", "0"},
		{"frobnicate"},
		{"watch", "--no-such-flag", "x"},
	} {
		if r := roboctl(t, args...); r.code != exitUsage {
			t.Errorf("roboctl %v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

func TestUnreachableNode(t *testing.T) {
	r := roboctl(t, "--addr", "127.0.0.1:1", "--timeout", "5s", "get", "0b6f3c9e-3f0a-4a43-9d7e-2f1c5d8e9a10")
	if r.code != exitFailed || !strings.Contains(r.stderr, "cannot reach robonode at 127.0.0.1:1") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestGetListAndWorkflows(t *testing.T) {
	n := testNode(t, "", "")
	addr := n.GRPCAddr()
	spec := writeSpec(t, "hello.yaml", helloSpec)

	r := roboctl(t, "--addr", addr, "workflows", "register", spec)
	if r.code != exitOK || !strings.Contains(r.stdout, "registered hello v1") {
		t.Fatalf("register: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "workflows", "register", spec, "-o", "json")
	var regs []registration
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &regs) != nil || len(regs) != 1 || !regs[0].Existing {
		t.Fatalf("register again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "workflows", "ls", "-o", "json")
	var wfs []map[string]any
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &wfs) != nil || len(wfs) != 1 || wfs[0]["name"] != "hello" {
		t.Fatalf("workflows ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = roboctl(t, "--addr", addr, "submit", "--workflow", "hello@1", "--input", "name=Bob", "--wait", "-o", "json")
	var inst map[string]any
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &inst) != nil {
		t.Fatalf("submit --workflow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := inst["instance_id"].(string)

	// get in the three formats: the same data.
	r = roboctl(t, "--addr", addr, "get", id)
	if r.code != exitOK || !strings.Contains(r.stdout, "greet") || !strings.Contains(r.stdout, `"greeting": "Hello, Bob!"`) {
		t.Errorf("get: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var fromJSON, fromYAML map[string]any
	r = roboctl(t, "--addr", addr, "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &fromJSON); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, r.stdout)
	}
	r = roboctl(t, "--addr", addr, "get", id, "-o", "yaml")
	if err := yaml.Unmarshal([]byte(r.stdout), &fromYAML); err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, r.stdout)
	}
	if !reflect.DeepEqual(fromJSON["outputs"], map[string]any{"greeting": "Hello, Bob!"}) ||
		!reflect.DeepEqual(fromYAML["outputs"], fromJSON["outputs"]) || fromYAML["state"] != "COMPLETE" {
		t.Errorf("get: json %v, yaml %v", fromJSON["outputs"], fromYAML["outputs"])
	}

	r = roboctl(t, "--addr", addr, "ls", "--workflow", "hello", "--state", "complete,failed", "-o", "json")
	var list struct {
		Instances []map[string]any `json:"instances"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Instances) != 1 || list.Instances[0]["instance_id"] != id {
		t.Errorf("ls -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "ls")
	if r.code != exitOK || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "COMPLETE") {
		t.Errorf("ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "get", "0b6f3c9e-3f0a-4a43-9d7e-2f1c5d8e9a10")
	if r.code != exitFailed || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("get unknown: exit %d\n%s", r.code, r.stderr)
	}
}

func TestCancelAndWatch(t *testing.T) {
	n := testNode(t, "", "")
	addr := n.GRPCAddr()

	r := roboctl(t, "--addr", addr, "submit", writeSpec(t, "sleepy.yaml", sleepySpec), "-o", "json")
	var sub submitView
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &sub) != nil {
		t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := roboctl(t, "--addr", addr, "cancel", sub.InstanceID); r.code != exitOK {
		t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
	}
	r = roboctl(t, "--addr", addr, "watch", sub.InstanceID, "-o", "json")
	if r.code != exitFailed {
		t.Errorf("watch of a cancelled instance: exit %d, want %d", r.code, exitFailed)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last map[string]any
	for _, line := range lines {
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatalf("watch -o json line is not JSON: %v: %q", err, line)
		}
	}
	if last["state"] != "CANCELLED" {
		t.Errorf("the last event is %v, want state CANCELLED", last)
	}
	r = roboctl(t, "--addr", addr, "cancel", sub.InstanceID)
	if r.code != exitFailed || !strings.Contains(r.stderr, "FAILED_PRECONDITION") {
		t.Errorf("cancelling a finished instance: exit %d\n%s", r.code, r.stderr)
	}
}

// TestWatchReconnects: the node stops mid-workflow and another starts on
// the same data directory and port; watch reconnects, resumes and ends
// with the instance.
func TestWatchReconnects(t *testing.T) {
	dir := t.TempDir()
	first := testNode(t, dir, "")
	addr := first.GRPCAddr()
	r := roboctl(t, "--addr", addr, "submit", writeSpec(t, "slow.yaml", slowSpec), "-o", "json")
	var sub submitView
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &sub) != nil {
		t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	var out, errOut syncBuffer
	codeCh := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() { codeCh <- run(ctx, []string{"--addr", addr, "watch", sub.InstanceID}, &out, &errOut) }()

	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), "task_started") {
		if time.Now().After(deadline) {
			t.Fatalf("watch printed no task_started:\n%s", out.String())
		}
		<-tick.C
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	if err := first.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	testNode(t, dir, addr)

	if code := <-codeCh; code != exitOK {
		t.Fatalf("watch: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "reconnecting") {
		t.Errorf("watch did not report the reconnection:\n%s", errOut.String())
	}
	if !strings.Contains(out.String(), "COMPLETE") {
		t.Errorf("watch did not show the end:\n%s", out.String())
	}
}

func TestInputs(t *testing.T) {
	for in, want := range map[string]any{
		"5": int64(5), "2.5": 2.5, "true": true, "null": nil, "Ada": "Ada", `"5"`: "5",
		"[1, 2]": []any{int64(1), int64(2)}, `{"a": 1}`: map[string]any{"a": int64(1)}, "": "", "1 2": "1 2",
	} {
		if got := parseInputValue(in); !reflect.DeepEqual(got, want) {
			t.Errorf("parseInputValue(%q) = %#v, want %#v", in, got, want)
		}
	}

	file := filepath.Join(t.TempDir(), "inputs.json")
	if err := os.WriteFile(file, []byte(`{"name": "from file", "count": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := submitOptions{inputsFile: file, inputs: []string{"name=from flag", "extra=[1]"}}
	got, err := o.collectInputs()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"count":3,"extra":[1],"name":"from flag"}`; got != want {
		t.Errorf("inputs %s, want %s", got, want)
	}
}

func TestValidateStillOffline(t *testing.T) {
	r := roboctl(t, "--addr", "127.0.0.1:1", "validate", "../../examples/hello.yaml")
	if r.code != exitOK || !strings.Contains(r.stdout, "✓ ../../examples/hello.yaml") {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestValidateShowsJoins: the plan shows a task's join after its needs, and
// -o json carries it.
func TestValidateShowsJoins(t *testing.T) {
	r := roboctl(t, "validate", "../../examples/quorum.yaml")
	if r.code != exitOK {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +\d+ +decide +core/echo +needs vote_a, vote_b, vote_c \(join: 2 of 3\)$`),
		regexp.MustCompile(`(?m)^ +\d+ +fetch +core/echo +needs mirror_far, mirror_near, mirror_slow \(join: 1 of 3, cancel the rest\)$`),
		regexp.MustCompile(`(?m)^ +\d+ +vote_a +core/echo +$`), // no needs, no join
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("the plan has no line matching %s:\n%s", want, r.stdout)
		}
	}

	r = roboctl(t, "validate", "-o", "json", "../../examples/quorum.yaml")
	var got []struct {
		Tasks []struct {
			Name string          `json:"name"`
			Join json.RawMessage `json:"join"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 {
		t.Fatalf("validate -o json: %v\n%s", err, r.stdout)
	}
	joins := map[string]string{}
	for _, task := range got[0].Tasks {
		joins[task.Name] = string(task.Join)
	}
	want := map[string]string{"decide": `{"min":2}`, "fetch": `{"min":1,"cancel_rest":true}`, "vote_a": ""}
	for name, w := range want {
		if g := strings.Join(strings.Fields(joins[name]), ""); g != w {
			t.Errorf("%s: join %q, want %q", name, g, w)
		}
	}
}

// TestValidateShowsLoops: the plan shows a task's loop, and -o json
// carries it.
func TestValidateShowsLoops(t *testing.T) {
	r := roboctl(t, "validate", "../../examples/loop-poll.yaml", "../../examples/foreach.yaml")
	if r.code != exitOK {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +\d+ +poll +code.exec/exec +needs start · loop until output.state == "done" \(at most 30, every 1s\)$`),
		regexp.MustCompile(`(?m)^ +\d+ +each +code.exec/exec +needs list · loop over tasks.list.output$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("the plan has no line matching %s:\n%s", want, r.stdout)
		}
	}
	r = roboctl(t, "validate", "-o", "json", "../../examples/loop-poll.yaml")
	var got []struct {
		Tasks []struct {
			Name string          `json:"name"`
			Loop json.RawMessage `json:"loop"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 {
		t.Fatalf("validate -o json: %v\n%s", err, r.stdout)
	}
	loops := map[string]string{}
	for _, task := range got[0].Tasks {
		loops[task.Name] = strings.Join(strings.Fields(string(task.Loop)), "")
	}
	if w := `{"until":"output.state==\"done\"","max":30,"every":"1s"}`; loops["poll"] != w || loops["start"] != "" {
		t.Errorf("loops %q, want poll: %s", loops, w)
	}
}

// TestValidateShowsEveryNode: the plan says a task with on: every_node
// runs once on every node serving its capability; -o json has on.
func TestValidateShowsEveryNode(t *testing.T) {
	r := roboctl(t, "validate", "../../examples/every-node.yaml")
	if r.code != exitOK {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := regexp.MustCompile(`(?m)^ +\d+ +inventory +code.exec/exec +once on every node serving code.exec$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("the plan has no line matching %s:\n%s", want, r.stdout)
	}
	r = roboctl(t, "validate", "-o", "json", "../../examples/every-node.yaml")
	var got []struct {
		Tasks []struct {
			Name string `json:"name"`
			On   string `json:"on"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 {
		t.Fatalf("validate -o json: %v\n%s", err, r.stdout)
	}
	on := map[string]string{}
	for _, task := range got[0].Tasks {
		on[task.Name] = task.On
	}
	if on["inventory"] != "every_node" || on["report"] != "" {
		t.Errorf("on %q, want inventory: every_node", on)
	}
}

// TestMembersAndLeader: a single node is a mesh of one: it lists itself,
// marked leader, and names itself leader with its term.
func TestMembersAndLeader(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	var r result
	eventually(t, func() bool {
		r = roboctl(t, addr, "leader")
		return r.code == exitOK
	})
	if want := fmt.Sprintf("roboctl-test at %s, term ", n.GRPCAddr()); !strings.HasPrefix(r.stdout, want) {
		t.Errorf("leader: %q, want it to start with %q", r.stdout, want)
	}
	// The node leads, and holds the Waggler role of both its capabilities
	// once the leader placed them and its gossip metadata says so.
	eventually(t, func() bool {
		r = roboctl(t, addr, "members")
		return strings.Contains(r.stdout, "waggler of code.exec, core")
	})
	if r.code != exitOK || !strings.Contains(r.stdout, "roboctl-test *") || !strings.Contains(r.stdout, "alive") ||
		!strings.Contains(r.stdout, "leader") || !strings.Contains(r.stdout, "code.exec=4") {
		t.Errorf("members: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "members", "-o", "json")
	var members []struct {
		Name     string            `json:"name"`
		Leader   bool              `json:"leader"`
		Role     string            `json:"role"`
		Wagglers map[string]uint64 `json:"wagglers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &members); err != nil || len(members) != 1 || !members[0].Leader ||
		members[0].Role != "leader" || members[0].Wagglers["core"] == 0 || members[0].Wagglers["code.exec"] == 0 {
		t.Errorf("members -o json: %v\n%s", err, r.stdout)
	}
	// -o wide adds each node's worker pools; --pools puts them in the data.
	r = roboctl(t, addr, "members", "-o", "wide")
	if r.code != exitOK || !strings.Contains(r.stdout, "NODE          POOL       CAPABILITY  BUSY") || !strings.Contains(r.stdout, "roboctl-test  core       core        0/4 (0%)") {
		t.Errorf("members -o wide: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "members", "--pools", "-o", "json")
	var withPools []struct {
		Pools []struct {
			Pool  string `json:"pool"`
			Slots int    `json:"slots"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &withPools); err != nil || len(withPools) != 1 || len(withPools[0].Pools) != 2 || withPools[0].Pools[1].Slots != 4 {
		t.Errorf("members --pools -o json: %v\n%s", err, r.stdout)
	}
	r = roboctl(t, addr, "leader", "-o", "json")
	if !strings.Contains(r.stdout, `"name": "roboctl-test"`) {
		t.Errorf("leader -o json:\n%s", r.stdout)
	}
}

// eventually polls cond every 20 ms for up to 10 s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		<-tick.C
	}
}

func TestWagglers(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	type row struct {
		Capability string   `json:"capability"`
		Node       string   `json:"node"`
		Epoch      uint64   `json:"epoch"`
		State      string   `json:"state"`
		Workers    int32    `json:"workers"`
		InFlight   int32    `json:"in_flight"`
		Queued     int32    `json:"queued"`
		Standbys   []string `json:"standbys"`
		Live       bool     `json:"live"`
		Note       string   `json:"note"`
	}
	var rows []row
	var r result
	eventually(t, func() bool {
		r = roboctl(t, addr, "wagglers", "-o", "json")
		rows = nil
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 2 {
			return false
		}
		// The node's own workers register with each Waggler a moment
		// after it takes the role; wait for that rather than read a
		// Waggler that has none yet.
		for _, w := range rows {
			if w.Node == "" || w.Live && w.Workers == 0 {
				return false
			}
		}
		return true
	})
	for i, c := range []string{"code.exec", "core"} {
		got := rows[i]
		if got.Capability != c || got.Node != "roboctl-test" || got.Epoch == 0 || got.Standbys == nil || len(got.Standbys) != 0 {
			t.Errorf("row %d: %+v, want %s held by roboctl-test, no standbys", i, got, c)
		}
		// The live numbers themselves are checked in package node; here,
		// that the command shows them, or says why it cannot.
		if got.Live && (got.Workers != 4 || got.State == "unknown") || !got.Live && (got.State != "unknown" || got.Note == "") {
			t.Errorf("row %d: %+v", i, got)
		}
	}
	for _, format := range []string{"table", "yaml"} {
		r = roboctl(t, addr, "wagglers", "-o", format)
		if r.code != exitOK || !strings.Contains(r.stdout, "code.exec") || !strings.Contains(r.stdout, "roboctl-test") {
			t.Errorf("wagglers -o %s: exit %d\n%s%s", format, r.code, r.stdout, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "in_flight:") {
		t.Errorf("wagglers -o yaml lacks in_flight:\n%s", r.stdout)
	}
}

func TestGetListsAttempts(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "retried.yaml", retriedSpec), "--wait", "-o", "json")
	var inst struct {
		ID    string `json:"instance_id"`
		State string `json:"state"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &inst) != nil || inst.State != "COMPLETE" {
		t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = roboctl(t, addr, "get", inst.ID, "-o", "json")
	var got struct {
		Tasks []struct {
			Name     string           `json:"name"`
			Error    string           `json:"error"`
			Attempts []map[string]any `json:"attempts"`
		} `json:"tasks"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got.Tasks) != 1 {
		t.Fatalf("get -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	flaky := got.Tasks[0]
	if flaky.Error != "" {
		t.Errorf("the completed task shows an earlier attempt's error: %q", flaky.Error)
	}
	if len(flaky.Attempts) != 3 {
		t.Fatalf("%d attempts, want 3:\n%s", len(flaky.Attempts), r.stdout)
	}
	for i, a := range flaky.Attempts {
		for _, key := range []string{"attempt", "node", "worker", "started_at", "finished_at", "ok", "error"} {
			if _, ok := a[key]; !ok {
				t.Errorf("attempt %d lacks %q: %v", i+1, key, a)
			}
		}
		if _, ok := a["index"]; ok {
			t.Errorf("attempt %d of a plain task has an index: %v", i+1, a)
		}
		ok := i == 2
		if a["attempt"] != float64(i+1) || a["ok"] != ok || a["node"] != "roboctl-test" ||
			!strings.HasPrefix(a["worker"].(string), "roboctl-test/code.exec/") || a["started_at"] == nil || a["finished_at"] == nil {
			t.Errorf("attempt %d: %v", i+1, a)
		}
		if errText, _ := a["error"].(string); ok != (errText == "") || (!ok && !strings.Contains(errText, fmt.Sprintf("boom %d", i+1))) {
			t.Errorf("attempt %d error %q", i+1, errText)
		}
	}

	// The table shows a line per attempt under a task that took several.
	r = roboctl(t, addr, "get", inst.ID)
	for _, want := range []string{"flaky", "completed", "3/3", "  #1", "  #2", "  #3", "error: ", "boom 1", "roboctl-test/code.exec/"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestSubmitInputsFile: one instance per line of a JSON Lines file, in
// batches; a bad line stops everything before anything is sent; with a
// key, running the file again starts nothing new.
func TestSubmitInputsFile(t *testing.T) {
	n := testNode(t, "", "")
	spec := writeSpec(t, "hello.yaml", helloSpec)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"name\": \"a\"}\n[1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := roboctl(t, "--addr", n.GRPCAddr(), "submit", spec, "--inputs-file", bad)
	if r.code == exitOK || !strings.Contains(r.stderr, "bad.jsonl:2: want a JSON object") {
		t.Fatalf("a bad line: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	file := filepath.Join(dir, "people.jsonl")
	if err := os.WriteFile(file, []byte("{\"name\": \"Ada\"}\n\n{\"name\": \"Grace\"}\n{}\n{\"name\": \"Edsger\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = roboctl(t, "--addr", n.GRPCAddr(), "submit", spec, "--inputs-file", file, "--batch-size", "2",
		"--idempotency-key", "import", "-o", "json")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var got []submittedView
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if len(got) != 4 || got[0].Line != 1 || got[1].Line != 3 || got[3].Line != 5 || got[0].Existing {
		t.Fatalf("submitted %+v, want lines 1, 3, 4, 5, new", got)
	}
	if !strings.Contains(r.stderr, "4 instances of hello v1") {
		t.Errorf("no summary on stderr:\n%s", r.stderr)
	}
	conn, err := client.Dial(n.GRPCAddr(), client.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	wf := robonetv1.NewWorkflowServiceClient(conn)
	for i, who := range []string{"Ada", "Grace", "world", "Edsger"} {
		in, err := client.Wait(context.Background(), wf, got[i].InstanceID, client.WaitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Greeting string }
		if err := json.Unmarshal(client.Instance(in).Outputs, &out); err != nil || out.Greeting != "Hello, "+who+"!" {
			t.Errorf("line %d: outputs %s (%v), want the greeting Hello, %s!", got[i].Line, client.Instance(in).Outputs, err, who)
		}
	}

	// Again with the same key: the same instances, nothing new.
	r = roboctl(t, "--addr", n.GRPCAddr(), "submit", "--workflow", "hello", "--inputs-file", file, "--idempotency-key", "import")
	if r.code != exitOK || !strings.Contains(r.stderr, "4 already submitted with their keys") {
		t.Fatalf("again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if ids := strings.Fields(r.stdout); len(ids) != 4 || ids[0] != got[0].InstanceID || ids[3] != got[3].InstanceID {
		t.Errorf("again: ids %v, want those of the first run", ids)
	}
}

// TestSchedules: create, list, the runs it fires (every second), pause,
// resume and delete through roboctl, and the errors a user meets.
func TestSchedules(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	if r := roboctl(t, addr, "workflows", "register", writeSpec(t, "hello.yaml", helloSpec)); r.code != exitOK {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	r := roboctl(t, addr, "schedules", "create", "greet", "--workflow", "hello", "--every", "1s", "--input", "name=Ada")
	if r.code != exitOK || !strings.Contains(r.stdout, "schedule greet created (next run ") {
		t.Fatalf("create: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	type view struct {
		Name           string         `json:"name"`
		Workflow       string         `json:"workflow"`
		Inputs         map[string]any `json:"inputs"`
		Interval       string         `json:"interval"`
		Paused         bool           `json:"paused"`
		NextRunAt      *time.Time     `json:"next_run_at"`
		LastInstanceID string         `json:"last_instance_id"`
	}
	var list []view
	eventually(t, func() bool {
		r = roboctl(t, addr, "schedules", "ls", "-o", "json")
		list = nil
		return r.code == exitOK && json.Unmarshal([]byte(r.stdout), &list) == nil && len(list) == 1 && list[0].LastInstanceID != ""
	})
	if s := list[0]; s.Name != "greet" || s.Workflow != "hello" || s.Inputs["name"] != "Ada" || s.Interval != "1s" || s.Paused || s.NextRunAt == nil {
		t.Fatalf("ls -o json: %+v", s)
	}
	// The run it fired is a real instance of hello with the schedule's inputs.
	if r = roboctl(t, addr, "get", list[0].LastInstanceID, "-o", "json"); r.code != exitOK || !strings.Contains(r.stdout, `"Ada"`) {
		t.Fatalf("get the fired instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "schedules", "ls"); r.code != exitOK || !strings.Contains(r.stdout, "greet") || !strings.Contains(r.stdout, "NEXT RUN") {
		t.Fatalf("ls: exit %d\n%s", r.code, r.stdout)
	}
	if r = roboctl(t, addr, "schedules", "pause", "greet"); r.code != exitOK || !strings.Contains(r.stdout, "schedule greet paused (paused)") {
		t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "schedules", "resume", "greet"); r.code != exitOK || !strings.Contains(r.stdout, "schedule greet resumed (next run") {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schedules", "create", "greet", "--workflow", "hello", "--every", "1m", "--input", "name=Bo"}, exitFailed, "already exists"},
		{[]string{"schedules", "create", "bad", "--workflow", "hello", "--cron", "every day", "--input", "name=Bo"}, exitFailed, "five fields"},
		{[]string{"schedules", "create", "bad", "--workflow", "hello", "--every", "1m", "--input", "name=5"}, exitFailed, `input "name": must be a string`},
		{[]string{"schedules", "create", "bad", "--workflow", "nope", "--every", "1m"}, exitFailed, "no version of this workflow"},
		{[]string{"schedules", "create", "bad", "--every", "1m"}, exitUsage, "--workflow is required"},
		{[]string{"schedules", "pause", "nope"}, exitFailed, "not found"},
	} {
		r := roboctl(t, append([]string{addr}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
	if r = roboctl(t, addr, "schedules", "delete", "greet"); r.code != exitOK || !strings.Contains(r.stdout, "schedule greet deleted") {
		t.Fatalf("delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "schedules", "ls"); r.code != exitOK || !strings.Contains(r.stdout, "no schedules") {
		t.Fatalf("ls after delete: exit %d\n%s", r.code, r.stdout)
	}
}

func TestVersionFlag(t *testing.T) {
	r := roboctl(t, "--version")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "roboctl dev (commit ") || !strings.Contains(r.stdout, runtime.Version()) {
		t.Fatalf("--version: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// submit -q prints the instance id alone, for $(...).
func TestSubmitQuiet(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "hello.yaml", helloSpec), "-q")
	id := strings.TrimSuffix(r.stdout, "\n")
	if _, err := uuid.Parse(id); r.code != exitOK || err != nil || strings.Contains(id, "\n") || r.stderr != "" {
		t.Fatalf("submit -q: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "get", id); r.code != exitOK {
		t.Fatalf("get of the -q id: exit %d\n%s", r.code, r.stderr)
	}
	if r = roboctl(t, addr, "submit", "--workflow", "hello", "-q", "--wait"); r.code != exitUsage || !strings.Contains(r.stderr, "goes without --wait") {
		t.Fatalf("-q --wait: exit %d, %q", r.code, r.stderr)
	}
}

// A workflow that needs a capability no node serves is accepted, with a
// warning that says so (on stderr: -q's stdout stays the id alone).
func TestSubmitWarnsOfUnservedCapability(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	spec := writeSpec(t, "train.yaml", `name: train
version: 1
tasks:
  prep: {capability: core, action: echo, with: {x: 1}}
  fit: {capability: gpu.train, action: echo, needs: [prep], with: {x: 2}}
`)
	r := roboctl(t, addr, "submit", spec, "-q")
	if _, err := uuid.Parse(strings.TrimSpace(r.stdout)); r.code != exitOK || err != nil ||
		!strings.Contains(r.stderr, "warning: no node serves capability gpu.train") || strings.Contains(r.stderr, "capability core") {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "submit", "--workflow", "train", "-o", "json")
	var v struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "gpu.train") {
		t.Fatalf("submit -o json: %v\n%s", err, r.stdout)
	}
	if r = roboctl(t, addr, "submit", writeSpec(t, "hello.yaml", helloSpec)); r.code != exitOK || strings.Contains(r.stderr, "warning") {
		t.Fatalf("a workflow the node serves: exit %d, stderr %q", r.code, r.stderr)
	}
}

// get, cancel and watch take a unique id prefix, and say which instances
// an ambiguous one matches; ls pages, lists everything, and filters by age.
func TestIDPrefixesAndListPaging(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	if r := roboctl(t, addr, "workflows", "register", writeSpec(t, "hello.yaml", helloSpec)); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	lines := strings.Repeat(`{"name": "x"}`+"\n", 40)
	r := roboctl(t, addr, "submit", "--workflow", "hello", "--inputs-file", writeSpec(t, "in.jsonl", lines))
	ids := strings.Fields(r.stdout)
	if r.code != exitOK || len(ids) != 40 {
		t.Fatalf("submitting 40: exit %d, %d ids\n%s", r.code, len(ids), r.stderr)
	}
	// A unique prefix: the shortest that names one id.
	byFirst := map[byte][]string{}
	for _, id := range ids {
		byFirst[id[0]] = append(byFirst[id[0]], id)
	}
	var shared []string
	for _, group := range byFirst {
		if len(group) >= 2 {
			shared = group
		}
	}
	r = roboctl(t, addr, "get", ids[0][:13], "-o", "json")
	if r.code != exitOK || !strings.Contains(r.stdout, ids[0]) {
		t.Fatalf("get by a 13-character prefix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An ambiguous prefix: the matches are listed (at most five of them),
	// each an id of ours that starts with it.
	prefix := shared[0][:1]
	r = roboctl(t, addr, "get", prefix)
	listed := 0
	for _, line := range strings.Split(r.stderr, "\n") {
		if f := strings.Fields(line); len(f) > 0 && slices.Contains(ids, f[0]) && strings.HasPrefix(f[0], prefix) {
			listed++
		}
	}
	if r.code != exitFailed || !strings.Contains(r.stderr, "is the start of several instance ids") || listed != min(len(shared), 5) {
		t.Fatalf("an ambiguous prefix %q matching %d ids: exit %d, %d listed\n%s", prefix, len(shared), r.code, listed, r.stderr)
	}
	if r = roboctl(t, addr, "watch", "ffffffff-ffff-ffff-ffff-fffffff"); r.code != exitFailed || !strings.Contains(r.stderr, "no instance id starts with") {
		t.Fatalf("a prefix nothing starts with: exit %d\n%s", r.code, r.stderr)
	}
	if r = roboctl(t, addr, "cancel", "zz"); r.code != exitFailed || !strings.Contains(r.stderr, "want hex digits") {
		t.Fatalf("a prefix that is no id: exit %d\n%s", r.code, r.stderr)
	}

	type page struct {
		Instances []struct {
			ID string `json:"instance_id"`
		} `json:"instances"`
		Next string `json:"next_page_token"`
	}
	list := func(args ...string) page {
		t.Helper()
		r := roboctl(t, append([]string{addr, "ls", "-o", "json"}, args...)...)
		var p page
		if err := json.Unmarshal([]byte(r.stdout), &p); r.code != exitOK || err != nil {
			t.Fatalf("ls %v: exit %d, %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
		}
		return p
	}
	first := list("--limit", "15")
	second := list("--limit", "15", "--page-token", first.Next)
	if len(first.Instances) != 15 || first.Next == "" || len(second.Instances) != 15 || second.Instances[0].ID == first.Instances[0].ID {
		t.Fatalf("two pages of 15: %d then %d", len(first.Instances), len(second.Instances))
	}
	if all := list("--all", "--since", "1h"); len(all.Instances) != 40 || all.Next != "" {
		t.Fatalf("--all --since 1h: %d instances, next %q; want 40", len(all.Instances), all.Next)
	}
	time.Sleep(10 * time.Millisecond) // the last submission is now well over a millisecond old
	if none := list("--since", "1ms"); len(none.Instances) != 0 {
		t.Fatalf("--since 1ms: %d instances", len(none.Instances))
	}
	if r = roboctl(t, addr, "ls", "--all", "--limit", "3"); r.code != exitUsage {
		t.Fatalf("--all with --limit: exit %d", r.code)
	}
}

// submit --dev: an edited spec whose version is registered with another
// definition runs as the next version (or as the version that has its
// definition) instead of being refused; registered versions never change.
func TestSubmitDev(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	original := writeSpec(t, "hello.yaml", helloSpec)
	edited := writeSpec(t, "hello-edited.yaml", strings.Replace(helloSpec, "Hello, ", "Hi, ", 1))
	again := writeSpec(t, "hello-again.yaml", strings.Replace(helloSpec, "Hello, ", "Hey, ", 1))
	version := func(args ...string) (uint32, string) {
		t.Helper()
		r := roboctl(t, append([]string{addr, "submit", "-o", "json"}, args...)...)
		var v struct {
			Workflow struct {
				Version uint32 `json:"version"`
			} `json:"workflow"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); r.code != exitOK || err != nil {
			t.Fatalf("submit %v: exit %d, %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
		}
		return v.Workflow.Version, r.stderr
	}
	if v, _ := version(original); v != 1 {
		t.Fatalf("the original: version %d", v)
	}
	if r := roboctl(t, addr, "submit", edited); r.code != exitFailed || !strings.Contains(r.stderr, "bump `version`") {
		t.Fatalf("an edited spec without --dev: exit %d\n%s", r.code, r.stderr)
	}
	if v, stderr := version(edited, "--dev"); v != 2 || !strings.Contains(stderr, "it runs as version 2 (--dev") {
		t.Fatalf("the edit with --dev: version %d, stderr %q", v, stderr)
	}
	if v, _ := version(edited, "--dev"); v != 2 {
		t.Fatalf("the same edit again: version %d, want 2 (its definition is registered there)", v)
	}
	if v, _ := version(again, "--dev"); v != 3 {
		t.Fatalf("another edit: version %d, want 3", v)
	}
	if v, stderr := version(original, "--dev"); v != 1 || stderr != "" {
		t.Fatalf("the original with --dev: version %d, stderr %q", v, stderr)
	}
	if r := roboctl(t, addr, "submit", "--workflow", "hello", "--dev"); r.code != exitUsage || !strings.Contains(r.stderr, "--dev works with a spec FILE") {
		t.Fatalf("--dev with --workflow: exit %d, %q", r.code, r.stderr)
	}
}

// A missing argument names what is missing, with the command's usage.
func TestMissingArgumentShowsUsage(t *testing.T) {
	r := roboctl(t, "get")
	if r.code != exitUsage || !strings.Contains(r.stderr, "roboctl get: missing an instance id") || !strings.Contains(r.stderr, "Usage: roboctl get ID") {
		t.Fatalf("get without an id: exit %d\n%s", r.code, r.stderr)
	}
	r = roboctl(t, "schedules", "delete", "a", "b")
	if r.code != exitUsage || !strings.Contains(r.stderr, "takes the schedule's name, not 2 arguments") {
		t.Fatalf("delete with two names: exit %d\n%s", r.code, r.stderr)
	}
}

// An error says what failed once, not once per layer it crossed.
func TestErrorsDoNotRepeatThemselves(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	const id = "0b9c6f3e-4a52-4d6b-9d9e-6f1f0c2a7e11"
	for cmd, op := range map[string]string{"get": "get instance", "cancel": "cancel instance"} {
		r := roboctl(t, addr, cmd, id)
		if r.code != exitFailed || strings.Count(r.stderr, id) != 1 || strings.Count(r.stderr, op) != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
			t.Errorf("%s of an unknown instance: exit %d, %q", cmd, r.code, r.stderr)
		}
	}
}

// watch on a finished instance shows its whole history, as recorded.
func TestWatchFinishedReplaysHistory(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "hello.yaml", helloSpec), "-q")
	id := strings.TrimSpace(r.stdout)
	if r = roboctl(t, addr, "watch", id); r.code != exitOK { // follows it to its end
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	r = roboctl(t, addr, "watch", id[:8])
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitOK || len(lines) != 4 || !strings.Contains(lines[0], "snapshot") || !strings.Contains(lines[1], "task_started") ||
		!strings.Contains(lines[2], "task_completed  greet attempt 1") || !strings.Contains(lines[3], "state           COMPLETE") {
		t.Fatalf("watch of a finished instance: exit %d\n%s", r.code, r.stdout)
	}
}

// Shell completion offers instance ids (with workflow and state), workflow
// names and each command's output formats, asking the node at --addr.
func TestCompletion(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "hello.yaml", helloSpec), "-q")
	id := strings.TrimSpace(r.stdout)
	if r = roboctl(t, addr, "__complete", "get", id[:4]); !strings.Contains(r.stdout, id+"\thello v1, ") {
		t.Errorf("completing an id: %q", r.stdout)
	}
	if r = roboctl(t, addr, "__complete", "submit", "--workflow", ""); !strings.Contains(r.stdout, "hello\n") {
		t.Errorf("completing --workflow: %q", r.stdout)
	}
	if r = roboctl(t, addr, "__complete", "submit", "--workflow", "hello@"); !strings.Contains(r.stdout, "hello@1") {
		t.Errorf("completing --workflow NAME@: %q", r.stdout)
	}
	if r = roboctl(t, addr, "__complete", "members", "-o", ""); !strings.Contains(r.stdout, "wide\n") {
		t.Errorf("completing members -o: %q", r.stdout)
	}
	// With no node to ask, nothing is offered (and no file names).
	if r = roboctl(t, "--addr=127.0.0.1:1", "__complete", "get", ""); r.code != exitOK || strings.TrimSpace(r.stdout) != ":4" {
		t.Errorf("completing with no node to ask: exit %d, %q", r.code, r.stdout)
	}
}

// roboctl logs: a task's stderr to stderr and stdout to stdout; every
// task of an instance prefixed; JSON lines; an id prefix; clear errors.
func TestLogs(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "logs.yaml", logsSpec), "-q")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK {
		t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
	}
	if r = roboctl(t, addr, "watch", id); r.code != exitOK {
		t.Fatalf("watch: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = roboctl(t, addr, "logs", id[:8], "build")
	if r.code != exitOK || r.stdout != "out: 1\n" || r.stderr != "compiling\n" {
		t.Fatalf("logs build: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "logs", id, "build", "--stdout", "--timestamps")
	if fields := strings.Fields(r.stdout); r.code != exitOK || r.stderr != "" || len(fields) != 3 || fields[1] != "out:" {
		t.Fatalf("logs build --stdout -t: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	} else if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
		t.Fatalf("timestamp %q: %v", fields[0], err)
	}

	// Every task: the spread's instances and the plain task, prefixed; the
	// echo task writes no log and is not an error.
	r = roboctl(t, addr, "logs", id)
	want := []string{"build: compiling", "fan[0]: part 1", "fan[1]: part 2"}
	got := strings.Split(strings.TrimSpace(r.stderr), "\n")
	slices.Sort(got)
	if r.code != exitOK || r.stdout != "build: out: 1\n" || !slices.Equal(got, want) {
		t.Fatalf("logs (every task): exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "logs", id, "fan[1]"); r.code != exitOK || r.stderr != "part 2\n" {
		t.Fatalf("logs fan[1]: exit %d, stderr %q", r.code, r.stderr)
	}

	r = roboctl(t, addr, "logs", id, "build", "--stderr", "-o", "json")
	var line struct {
		InstanceID string `json:"instance_id"`
		Task       string `json:"task"`
		Node       string `json:"node"`
		Stream     string `json:"stream"`
		Text       string `json:"text"`
		Attempt    uint32 `json:"attempt"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &line); r.code != exitOK || err != nil {
		t.Fatalf("-o json: exit %d, %v, stdout %q", r.code, err, r.stdout)
	}
	if line.InstanceID != id || line.Task != "build" || line.Attempt != 1 || line.Node != "roboctl-test" || line.Stream != "stderr" || line.Text != "compiling" {
		t.Fatalf("-o json: %+v", line)
	}

	// Following a finished task prints its log and returns.
	if r = roboctl(t, addr, "logs", id, "build", "-f", "--stderr"); r.code != exitOK || r.stderr != "compiling\n" {
		t.Fatalf("logs -f of a finished task: exit %d, stderr %q", r.code, r.stderr)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"logs", id, "--follow"}, exitUsage, "--follow follows one task"},
		{[]string{"logs", id, "build", "--stdout", "--stderr"}, exitUsage, "leave both off"},
		{[]string{"logs", id, "build", "--attempt", "5"}, exitFailed, "no attempt 5"},
		{[]string{"logs", id, "greet"}, exitFailed, "only exec actions and worker programs that send their lines write logs"},
		{[]string{"logs", id, "fan[7]"}, exitFailed, "no fan[7]"},
	} {
		r := roboctl(t, append([]string{addr}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// napSpec sleeps 10 minutes, reporting an ETA in its heartbeats; with
// "after: true" a task waits for the nap.
const napSpec = `
name: nap%s
version: 1
tasks:
  nap:
    capability: core
    action: sleep
    with: {duration: 10m}
%s`

const napAfter = `  after:
    needs: [nap]
    capability: core
    action: echo
    with: {}
`

// get shows the instance's ETA while it runs: from the nap's heartbeats
// when only the nap is left; "unknown" (and no eta key) when a task waits
// for it, since nothing says how long that one will take.
func TestGetShowsETA(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	submit := func(name, spec string) string {
		t.Helper()
		r := roboctl(t, addr, "submit", writeSpec(t, name+".yaml", spec), "-o", "json")
		var sub submitView
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &sub) != nil {
			t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Cleanup(func() { roboctl(t, addr, "cancel", sub.InstanceID) })
		return sub.InstanceID
	}
	getJSON := func(id string) map[string]any {
		t.Helper()
		r := roboctl(t, addr, "get", id, "-o", "json")
		var v map[string]any
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &v) != nil {
			t.Fatalf("get -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return v
	}
	running := func(v map[string]any) bool {
		tasks, _ := v["tasks"].([]any)
		nap, _ := tasks[0].(map[string]any)
		p, _ := nap["progress"].(map[string]any)
		return p["eta"] != nil
	}

	alone := submit("nap", fmt.Sprintf(napSpec, "", ""))
	var v map[string]any
	eventually(t, func() bool { v = getJSON(alone); return v["eta"] != nil })
	eta, err := time.ParseDuration(fmt.Sprint(v["eta"]))
	if err != nil || eta <= 9*time.Minute || eta > 10*time.Minute {
		t.Fatalf("eta %v (%v), want a duration just under 10m", v["eta"], err)
	}
	r := roboctl(t, addr, "get", alone)
	if r.code != exitOK || !regexp.MustCompile(`(?m)^eta +(9m[0-9]+s|10m0s)$`).MatchString(r.stdout) {
		t.Errorf("get: exit %d, want an eta line of about 10m:\n%s%s", r.code, r.stdout, r.stderr)
	}

	chained := submit("nap-after", fmt.Sprintf(napSpec, "-after", napAfter))
	eventually(t, func() bool { v = getJSON(chained); return running(v) })
	if eta, ok := v["eta"]; ok {
		t.Errorf("a task waits for the nap, yet eta %v", eta)
	}
	if r := roboctl(t, addr, "get", chained); !regexp.MustCompile(`(?m)^eta +unknown$`).MatchString(r.stdout) {
		t.Errorf("get: want an eta line saying unknown:\n%s%s", r.stdout, r.stderr)
	}
}

func TestPartitions(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	spec := writeSpec(t, "hello.yaml", helloSpec)
	for range 4 {
		if r := roboctl(t, addr, "submit", spec, "--wait", "-o", "json"); r.code != exitOK {
			t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
		}
	}
	type row struct {
		Partition  uint32  `json:"partition"`
		Owner      string  `json:"owner"`
		Epoch      uint64  `json:"epoch"`
		Term       uint64  `json:"term"`
		MovedAt    string  `json:"moved_at"`
		Reason     string  `json:"reason"`
		Live       bool    `json:"live"`
		Tasks      uint64  `json:"tasks_total"`
		TasksPerS  float64 `json:"tasks_per_second"`
		WritesRefd uint64  `json:"writes_refused"`
	}
	r := roboctl(t, addr, "partitions", "-o", "json")
	var rows []row
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &rows) != nil {
		t.Fatalf("partitions -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(rows) != 16 {
		t.Fatalf("%d partitions, want the default 16:\n%s", len(rows), r.stdout)
	}
	var tasks uint64
	for i, p := range rows {
		if p.Partition != uint32(i) || p.Owner != "roboctl-test" || p.Epoch <= p.Term || p.Term == 0 || p.MovedAt == "" || p.Reason == "" || !p.Live {
			t.Errorf("partition %d: %+v, want it owned by the node at an epoch above its term, with its numbers", i, p)
		}
		tasks += p.Tasks
	}
	// The submissions went round the partitions, one task each.
	if tasks != 4 {
		t.Errorf("the partitions count %d tasks, want the 4 run", tasks)
	}
	r = roboctl(t, addr, "partitions")
	for _, want := range []string{"16 partitions, placed on the Raft leader", "PARTITION", "roboctl-test", "first placement"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("partitions (table) lacks %q: exit %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
}

// TestValidateShowsChildWorkflow: the plan names the child workflow a task
// runs instead of a capability; -o json has workflow.
func TestValidateShowsChildWorkflow(t *testing.T) {
	r := roboctl(t, "validate", "../../examples/child.yaml")
	want := regexp.MustCompile(`(?m)^ +\d+ +sum_halves +workflow child +needs halves · fan-out over tasks.halves.output.halves$`)
	if r.code != exitOK || !want.MatchString(r.stdout) || !strings.Contains(r.stdout, "workflow child ×1") {
		t.Fatalf("validate: exit %d, want a line matching %s:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	r = roboctl(t, "validate", "-o", "json", writeSpec(t, "p.yaml", "name: p\nversion: 1\ntasks:\n  c: {workflow: scan-host@2}\n"))
	if r.code != exitOK || !strings.Contains(r.stdout, `"workflow": "scan-host@2"`) {
		t.Fatalf("validate -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// registrationOrder registers a workflow after the child workflows it
// runs that other files define; the rest keep their order.
func TestRegistrationOrder(t *testing.T) {
	spec := func(name, child string) []byte {
		task := "{capability: core, action: echo}"
		if child != "" {
			task = "{workflow: " + child + "}"
		}
		return []byte("name: " + name + "\nversion: 1\ntasks:\n  t: " + task + "\n")
	}
	files := []string{"a.yaml", "broken.yaml", "b.yaml", "c.yaml", "self.yaml"}
	srcs := [][]byte{spec("a", "b"), []byte("name: [\n"), spec("b", "c@1"), spec("c", ""), spec("self", "self")}
	if got := registrationOrder(files, srcs); !slices.Equal(got, []int{1, 3, 4, 2, 0}) {
		t.Fatalf("order %v, want broken, c, self, b, a", got)
	}
}

// TestChildWorkflowWithRoboctl: files registered in any order (children
// first), a parent that runs a child per host, get of the parent naming
// its children and of a child naming its parent, and ls marking children.
func TestChildWorkflowWithRoboctl(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	child := writeSpec(t, "host.yaml", "name: host\nversion: 1\ninputs:\n  host: {type: string}\ntasks:\n"+
		"  look: {capability: core, action: echo, with: {seen: '${{ inputs.host }}'}}\noutputs:\n  seen: ${{ tasks.look.output.seen }}\n")
	parent := writeSpec(t, "hosts.yaml", "name: hosts\nversion: 1\ntasks:\n"+
		"  each:\n    workflow: host@1\n    spread: ${{ ['a', 'b'] }}\n    with: {host: '${{ item }}'}\noutputs:\n  seen: ${{ tasks.each.output }}\n")
	if r := roboctl(t, addr, "workflows", "register", parent, child); r.code != exitOK ||
		strings.Index(r.stdout, "registered host v1") > strings.Index(r.stdout, "registered hosts v1") {
		t.Fatalf("register: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := roboctl(t, addr, "submit", "--workflow", "hosts", "--wait", "-o", "json")
	var (
		inst    client.InstanceView
		outputs bytes.Buffer
	)
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &inst) != nil || json.Compact(&outputs, inst.Outputs) != nil ||
		outputs.String() != `{"seen":[{"seen":"a"},{"seen":"b"}]}` {
		t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	each := inst.Tasks[0]
	if each.Workflow != "host" || each.WorkflowVersion != 1 || len(each.Attempts) != 2 || each.Attempts[1].Child == "" {
		t.Fatalf("each: %+v", each)
	}
	r = roboctl(t, addr, "get", inst.ID)
	if r.code != exitOK || !strings.Contains(r.stdout, "workflow host v1") || !strings.Contains(r.stdout, "child "+each.Attempts[1].Child) {
		t.Fatalf("get the parent: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "get", each.Attempts[1].Child)
	if r.code != exitOK || !strings.Contains(r.stdout, "parent    "+inst.ID+" (task each[1], attempt 1)") {
		t.Fatalf("get the child: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = roboctl(t, addr, "ls")
	if r.code != exitOK || strings.Count(r.stdout, "(child of "+inst.ID[:8]+")") != 2 {
		t.Fatalf("ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The logs of a child task are its child's: the node says which.
	r = roboctl(t, addr, "logs", inst.ID, "each[1]")
	if r.code == exitOK || !strings.Contains(r.stderr, "runs the child workflow host, not a program") ||
		!strings.Contains(r.stderr, "roboctl logs "+each.Attempts[1].Child) {
		t.Fatalf("logs of a child task: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// roboctl audit: the calls that changed something, as a table, as JSON,
// and since a time.
func TestAudit(t *testing.T) {
	n := testNode(t, "", "")
	addr := "--addr=" + n.GRPCAddr()
	r := roboctl(t, addr, "submit", writeSpec(t, "hello.yaml", helloSpec), "-q")
	if r.code != exitOK {
		t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if r = roboctl(t, addr, "quarantine", "add", "ghost", "--reason", "drill"); r.code != exitOK {
		t.Fatalf("quarantine add: exit %d\n%s", r.code, r.stderr)
	}
	roboctl(t, addr, "quarantine", "ls")
	roboctl(t, addr, "get", id)

	// The table: the two calls that changed something, oldest first; the
	// reads are not there.
	r = roboctl(t, addr, "audit")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitOK || len(lines) != 3 || !regexp.MustCompile(`^TIME +NODE +TOKEN +ROLE +PEER +METHOD +TARGET +OUTCOME$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^\S+Z +roboctl-test +anonymous +admin +127\.0\.0\.1:\d+ +SubmitWorkflow +workflow=hello@1 instance=`+id+` +ok$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^\S+Z +roboctl-test +anonymous +admin +127\.0\.0\.1:\d+ +Quarantine +op=add node=ghost +ok$`).MatchString(lines[2]) {
		t.Fatalf("audit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// -o json: the records' fields, as the node's file has them.
	r = roboctl(t, addr, "audit", "-o", "json")
	var recs []audit.Record
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("audit -o json: %v\n%s", err, r.stdout)
	}
	if a := recs[0]; a.Node != "roboctl-test" || a.TokenName != "anonymous" || a.Role != "admin" || !strings.HasPrefix(a.Peer, "127.0.0.1:") ||
		a.Method != "/robonet.v1.WorkflowService/SubmitWorkflow" || a.Target != "workflow=hello@1 instance="+id || a.Outcome != "ok" || a.DurationMS <= 0 {
		t.Errorf("audit -o json, the submission: %+v", a)
	}
	if a := recs[1]; a.Method != "/robonet.v1.MeshService/Quarantine" || a.Target != "op=add node=ghost" || a.Time.Before(recs[0].Time) {
		t.Errorf("audit -o json, the quarantine: %+v", a)
	}

	// --since: a time keeps the calls made at or after it; a duration
	// back from now; a time to come finds nothing.
	after := recs[0].Time.Add(time.Nanosecond).Format(time.RFC3339Nano)
	r = roboctl(t, addr, "audit", "--since", after, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 1 || recs[0].Target != "op=add node=ghost" {
		t.Errorf("audit --since %s: %v\n%s", after, err, r.stdout)
	}
	if r = roboctl(t, addr, "audit", "--since", "1h", "--node", "roboctl-test"); r.code != exitOK || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("audit --since 1h --node roboctl-test: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "audit", "--since", time.Now().Add(time.Hour).Format(time.RFC3339)); r.code != exitOK || r.stdout != "no audit records\n" {
		t.Errorf("audit --since in an hour: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = roboctl(t, addr, "audit", "--since", "yesterday"); r.code != exitUsage || !strings.Contains(r.stderr, "RFC 3339") {
		t.Errorf("audit --since yesterday: exit %d\n%s", r.code, r.stderr)
	}
	if r = roboctl(t, addr, "audit", "--node", "nowhere"); r.code != exitFailed || !strings.Contains(r.stderr, "nowhere is not a member of the mesh") {
		t.Errorf("audit --node nowhere: exit %d\n%s", r.code, r.stderr)
	}
}
