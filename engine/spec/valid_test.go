package spec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine/spec"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// mustCompile compiles src or fails the test with every error.
func mustCompile(t *testing.T, src string) *robonetv1.Workflow {
	t.Helper()
	wf, err := spec.Compile("flow.yaml", []byte(src), spec.Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return wf
}

func task(t *testing.T, wf *robonetv1.Workflow, name string) *robonetv1.Task {
	t.Helper()
	for _, tk := range wf.GetTasks() {
		if tk.GetName() == name {
			return tk
		}
	}
	t.Fatalf("no task %q", name)
	return nil
}

// Template constructors, to write expected IR briefly.
func lit(json string) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_LiteralJson{LiteralJson: []byte(json)}}
}

func ex(src string) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_Expr{Expr: &robonetv1.Expr{Source: src}}}
}

func text(s string) *robonetv1.InterpolationPart {
	return &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Text{Text: s}}
}

func exPart(src string) *robonetv1.InterpolationPart {
	return &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Expr{Expr: &robonetv1.Expr{Source: src}}}
}

func interp(parts ...*robonetv1.InterpolationPart) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_Interpolation{Interpolation: &robonetv1.Interpolation{Parts: parts}}}
}

func list(items ...*robonetv1.Template) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_List{List: &robonetv1.TemplateList{Items: items}}}
}

// tmap takes key, value, key, value, ...
func tmap(kv ...any) *robonetv1.Template {
	m := &robonetv1.TemplateMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Entries = append(m.Entries, &robonetv1.TemplateEntry{Key: kv[i].(string), Value: kv[i+1].(*robonetv1.Template)})
	}
	return &robonetv1.Template{Kind: &robonetv1.Template_Map{Map: m}}
}

func assertProto(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func retry(attempts uint32, initial time.Duration, factor float64, max time.Duration, jitter float64) *robonetv1.RetryPolicy {
	return &robonetv1.RetryPolicy{MaxAttempts: attempts, Initial: durationpb.New(initial), Factor: factor,
		Max: durationpb.New(max), Jitter: jitter}
}

const fullSpec = `
name: full.example_1
version: 7
description: every construct
inputs:
  targets: {type: list, description: hosts to scan}
  port: {type: int, default: 8080}
  ratio: {type: number, default: 2}
  verbose: {type: bool, required: false}
  anything:
  cfg: {type: map, default: {b: [1, 2.5, "x"], a: null}}
defaults:
  retry: {max_attempts: 3, backoff: {initial: 2s, factor: 3, max: 1m, jitter: 0.25}}
  timeout: 5m
  on_failure: skip
tasks:
  zeta:
    capability: core
    action: echo
    needs: [beta, alpha, beta]
    with: {n: 1}
  alpha:
    description: first
    capability: net.scan
    action: exec
    with:
      argv: [scan, "${{ inputs.targets }}", --port, "${{inputs.port}}"]
      env: {B: "2", A: 1}
      stdin: "ports ${{ inputs.port }} and ${{ inputs.port + 1 }}!"
    retry: {max_attempts: 5}
  beta:
    needs: alpha
    spread: ${{ tasks.alpha.output.hosts }}
    when: ${{ size(tasks.alpha.output.hosts) > 0 }}
    capability: net.scan
    action: http
    with: {url: "http://${{ item }}:${{ index }}/", method: GET}
    on_failure: retry
    retry: {backoff: {max: 10s}}
    timeout: 30s
  gamma:
    needs: [beta]
    when: false
    capability: core
    action: sleep
    on_failure: abort
    with:
  delta:
    needs: [gamma]
    when: true
    capability: core
    action: echo
    with: "${{ tasks.alpha.output }}"
outputs:
  summary: "${{ size(tasks.beta.output) }} hosts"
  constant: {a: [1, 2]}
  raw: ${{ tasks.zeta.output }}
`

func TestValidSpecLandsInIR(t *testing.T) {
	wf := mustCompile(t, fullSpec)
	if wf.Name != "full.example_1" || wf.Version != 7 || wf.Description != "every construct" {
		t.Errorf("header = %q %d %q", wf.Name, wf.Version, wf.Description)
	}

	// Inputs: sorted, types, required rules, canonical default JSON.
	wantInputs := []*robonetv1.Input{
		{Name: "anything", Type: robonetv1.ValueType_VALUE_TYPE_ANY, Required: true},
		{Name: "cfg", Type: robonetv1.ValueType_VALUE_TYPE_MAP, DefaultJson: []byte(`{"a":null,"b":[1,2.5,"x"]}`)},
		{Name: "port", Type: robonetv1.ValueType_VALUE_TYPE_INT, DefaultJson: []byte(`8080`)},
		{Name: "ratio", Type: robonetv1.ValueType_VALUE_TYPE_NUMBER, DefaultJson: []byte(`2`)},
		{Name: "targets", Type: robonetv1.ValueType_VALUE_TYPE_LIST, Required: true, Description: "hosts to scan"},
		{Name: "verbose", Type: robonetv1.ValueType_VALUE_TYPE_BOOL},
	}
	if len(wf.Inputs) != len(wantInputs) {
		t.Fatalf("inputs = %v", wf.Inputs)
	}
	for i := range wantInputs {
		assertProto(t, "input "+wantInputs[i].Name, wf.Inputs[i], wantInputs[i])
	}

	// Tasks sorted by name.
	var names []string
	for _, tk := range wf.Tasks {
		names = append(names, tk.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,beta,delta,gamma,zeta" {
		t.Errorf("task order = %s", got)
	}

	alpha := task(t, wf, "alpha")
	assertProto(t, "alpha", alpha, &robonetv1.Task{
		Name: "alpha", Capability: "net.scan", Action: "exec", Description: "first",
		With: tmap(
			"argv", list(lit(`"scan"`), ex("inputs.targets"), lit(`"--port"`), ex("inputs.port")),
			"env", lit(`{"A":1,"B":"2"}`),
			"stdin", interp(text("ports "), exPart("inputs.port"), text(" and "), exPart("inputs.port + 1"), text("!")),
		),
		// Field-by-field: max_attempts from the task, backoff from defaults.
		OnFailure: robonetv1.FailurePolicy_FAILURE_POLICY_SKIP,
		Retry:     retry(5, 2*time.Second, 3, time.Minute, 0.25),
		Timeout:   durationpb.New(5 * time.Minute),
	})

	beta := task(t, wf, "beta")
	assertProto(t, "beta", beta, &robonetv1.Task{
		Name: "beta", Capability: "net.scan", Action: "http", Needs: []string{"alpha"},
		Spread: &robonetv1.Expr{Source: "tasks.alpha.output.hosts"},
		When:   &robonetv1.Expr{Source: "size(tasks.alpha.output.hosts) > 0"},
		With: tmap(
			"method", lit(`"GET"`),
			"url", interp(text("http://"), exPart("item"), text(":"), exPart("index"), text("/")),
		),
		OnFailure: robonetv1.FailurePolicy_FAILURE_POLICY_RETRY,
		Retry:     retry(3, 2*time.Second, 3, 10*time.Second, 0.25),
		Timeout:   durationpb.New(30 * time.Second),
	})

	// Abort: a single attempt and built-in backoff, whatever the defaults;
	// `with:` left empty is no input; a YAML false guard is the expression false.
	gamma := task(t, wf, "gamma")
	assertProto(t, "gamma", gamma, &robonetv1.Task{
		Name: "gamma", Capability: "core", Action: "sleep", Needs: []string{"beta"},
		When:      &robonetv1.Expr{Source: "false"},
		OnFailure: robonetv1.FailurePolicy_FAILURE_POLICY_ABORT,
		Retry:     retry(1, time.Second, 2, 5*time.Minute, 0),
		Timeout:   durationpb.New(5 * time.Minute),
	})

	// A task may read any transitive upstream task (alpha through gamma,
	// beta); a whole-string expression is an Expr, not an interpolation.
	delta := task(t, wf, "delta")
	assertProto(t, "delta with", delta.With, ex("tasks.alpha.output"))
	assertProto(t, "delta when", delta.When, &robonetv1.Expr{Source: "true"})

	// needs sorted and de-duplicated; constant with folded to one literal.
	zeta := task(t, wf, "zeta")
	if got := strings.Join(zeta.Needs, ","); got != "alpha,beta" {
		t.Errorf("zeta needs = %s", got)
	}
	assertProto(t, "zeta with", zeta.With, lit(`{"n":1}`))

	wantOutputs := []*robonetv1.Output{
		{Name: "constant", Value: lit(`{"a":[1,2]}`)},
		{Name: "raw", Value: ex("tasks.zeta.output")},
		{Name: "summary", Value: interp(exPart("size(tasks.beta.output)"), text(" hosts"))},
	}
	if len(wf.Outputs) != len(wantOutputs) {
		t.Fatalf("outputs = %v", wf.Outputs)
	}
	for i := range wantOutputs {
		assertProto(t, "output "+wantOutputs[i].Name, wf.Outputs[i], wantOutputs[i])
	}
	compilesForExecution(t, wf)
}

func TestBuiltinDefaults(t *testing.T) {
	wf := mustCompile(t, "name: d\nversion: 1\ntasks:\n  a: {capability: core, action: echo}\n")
	assertProto(t, "a", task(t, wf, "a"), &robonetv1.Task{
		Name: "a", Capability: "core", Action: "echo",
		OnFailure: robonetv1.FailurePolicy_FAILURE_POLICY_RETRY,
		Retry:     retry(1, time.Second, 2, 5*time.Minute, 0),
	})
}

func TestScalarsInTemplates(t *testing.T) {
	wf := mustCompile(t, `name: s
version: 1
tasks:
  a:
    capability: core
    action: echo
    with:
      hex: 0x10
      float: 1.0
      exp: 1e3
      big: 99999999999999999999
      yes: yes
      date: 2024-01-02
      null_value: ~
      quoted: "42"
      braces: "${{ {'k': '}}'} }}"
`)
	with := task(t, wf, "a").With
	m := with.GetMap()
	if m == nil {
		t.Fatalf("with = %v", with)
	}
	got := map[string]string{}
	for _, e := range m.Entries {
		if l := e.Value.GetLiteralJson(); l != nil {
			got[e.Key] = string(l)
		} else {
			got[e.Key] = "expr:" + e.Value.GetExpr().GetSource()
		}
	}
	want := map[string]string{
		"hex": "16", "float": "1.0", "exp": "1000.0", "big": "1e+20", "yes": `"yes"`, "date": `"2024-01-02"`,
		"null_value": "null", "quoted": `"42"`, "braces": `expr:{"k": "}}"}`,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("with.%s = %s, want %s", k, got[k], v)
		}
	}
}

func TestErrorsAreCollectedAndSorted(t *testing.T) {
	src := `name: demo
version: 0
tasks:
  b:
    capability: core
    action: echo
    needs: [nope]
  a:
    capability: BAD
    action: echo
    timeout: never
outputs:
  x: ${{ tasks.zz.output }}
`
	_, err := spec.Compile("f.yaml", []byte(src), spec.Options{})
	list := spec.AsErrorList(err)
	want := []string{
		`f.yaml:2:10: version: version must be between 1 and 4294967295, not 0; versions are whole numbers from 1 up, e.g. version: 2`,
		`f.yaml:7:13: task "b": needs[0]: unknown task "nope"`,
		`f.yaml:9:17: task "a": capability: invalid capability "BAD"`,
		`f.yaml:11:14: task "a": timeout: invalid duration "never"`,
		`f.yaml:13:10: outputs.x: unknown task "zz"`,
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(list[i].Error(), w) {
			t.Errorf("error %d = %s\n want prefix %s", i, list[i], w)
		}
	}
	if !strings.Contains(err.Error(), "\n") {
		t.Errorf("ErrorList.Error() should have one line per error: %q", err)
	}
}

func TestMaxErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: demo\nversion: 1\ntasks:\n")
	for i := range 20 {
		b.WriteString("  t" + string(rune('a'+i)) + ": {capability: core, action: echo, timeout: bad}\n")
	}
	_, err := spec.Compile("f.yaml", []byte(b.String()), spec.Options{Limits: spec.Limits{MaxErrors: 5}})
	list := spec.AsErrorList(err)
	if len(list) != 6 || !strings.Contains(list[5].Msg, "too many errors; stopped after 5") {
		t.Fatalf("got %d errors:\n%v", len(list), err)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    spec.Error
		want string
	}{
		{spec.Error{File: "f.yaml", Line: 3, Column: 5, Task: "probe", Field: "needs[0]", Msg: `unknown task "discovr"`, Hint: `did you mean "discover"?`},
			`f.yaml:3:5: task "probe": needs[0]: unknown task "discovr"; did you mean "discover"?`},
		{spec.Error{File: "f.yaml", Line: 3, Msg: "invalid YAML: x"}, `f.yaml:3: invalid YAML: x`},
		{spec.Error{File: "f.yaml", Msg: "spec is empty"}, `f.yaml: spec is empty`},
		{spec.Error{Line: 2, Column: 1, Field: "name", Msg: "m"}, `2:1: name: m`},
		{spec.Error{Msg: "m"}, `m`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %s, want %s", got, tc.want)
		}
	}
	var err error = spec.ErrorList{{Msg: "a"}, {Msg: "b"}}
	var list spec.ErrorList
	if !errors.As(err, &list) || err.Error() != "a\nb" {
		t.Errorf("ErrorList = %v", err)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	l := spec.Limits{MaxTasks: 7}.WithDefaults()
	if l.MaxTasks != 7 || l.MaxSpecBytes != 1<<20 || l.MaxDepth != 32 || l.MaxNodes != 200_000 || l.MaxErrors != 50 || l.Expr.MaxCost == 0 {
		t.Errorf("WithDefaults = %+v", l)
	}
}

// TestRealisticMistakes shows what a user sees for a spec with several
// typical mistakes: one line per problem, in source order, each with a fix.
// A typo in needs is reported once, not again at every read of the task.
func TestRealisticMistakes(t *testing.T) {
	src := `name: scan-and-summarize
version: 1
inputs:
  targets: {type: lst}
defaults:
  retry: {max_attempts: 3, backoff: {initial: 1s, factor: 2, max: 30s}}
  timeout: 5m
tasks:
  discover:
    capability: net.scan
    action: exec
    with: {argv: [scan, "${{ inputs.target }}"]}
  probe:
    needs: [discovr]
    spread: ${{ tasks.discover.output.hosts }}
    capability: net.scan
    action: http
    with: {url: "http://${{ item) }}/health"}
    on_failure: skipp
  summarize:
    needs: [probe]
    when: ${{ size(tasks.probe.output) }}
    capability: ai.inference
    action: exec
    with: {argv: [summarize], stdin: "${{ tasks.discover.output }}"}
outputs:
  report: ${{ tasks.summarise.output }}
`
	want := `bad.yaml:4:19: inputs.targets.type: unknown type "lst"; did you mean "list"?
bad.yaml:12:30: task "discover": with.argv[1]: unknown input "target"; did you mean "targets"?
bad.yaml:14:13: task "probe": needs[0]: unknown task "discovr"; did you mean "discover"?
bad.yaml:18:33: task "probe": with.url: syntax error: extraneous input ')' expecting <EOF>
bad.yaml:19:17: task "probe": on_failure: unknown failure policy "skipp"; did you mean "skip"?
bad.yaml:22:11: task "summarize": when: must be a single ${{ expression }} of type bool, but this expression has type int; write e.g. when: ${{ size(tasks.probe.output) > 0 }}
bad.yaml:27:15: outputs.report: unknown task "summarise"; did you mean "summarize"?`
	_, err := spec.Compile("bad.yaml", []byte(src), spec.Options{})
	if err == nil || err.Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", err, want)
	}
}

// verify lands in the IR when it asks for more than one run; verify: 1 is
// the default and leaves the IR (and its hash) as without it.
func TestVerifyLandsInIR(t *testing.T) {
	base := "name: v\nversion: 1\ntasks:\n  a:\n    capability: core\n    action: echo\n"
	if got := task(t, mustCompile(t, base+"    verify: 2\n"), "a").GetVerify(); got != 2 {
		t.Fatalf("verify: 2 compiled to %d", got)
	}
	once, plain := mustCompile(t, base+"    verify: 1\n"), mustCompile(t, base)
	if task(t, once, "a").GetVerify() != 0 || !proto.Equal(once, plain) {
		t.Fatalf("verify: 1 changed the IR: %v", once)
	}
}

// accept lands in the IR as a canonical expression and as written; it may
// read inputs, upstream outputs and, in a spread task, item and index.
func TestAcceptLandsInIR(t *testing.T) {
	src := "name: v\nversion: 1\ninputs: {min: {type: number, default: 0.5}}\ntasks:\n" +
		"  a: {capability: core, action: echo}\n" +
		"  b:\n    needs: [a]\n    capability: core\n    action: echo\n    spread: ${{ [1, 2] }}\n" +
		"    accept: ${{output.score>=inputs.min && index < size(tasks.a.output) && item > 0}}\n"
	b := task(t, mustCompile(t, src), "b")
	if got, want := b.GetAccept().GetSource(), "output.score >= inputs.min && index < size(tasks.a.output) && item > 0"; got != want {
		t.Errorf("accept = %q, want %q", got, want)
	}
	if got, want := b.GetAcceptText(), "${{output.score>=inputs.min && index < size(tasks.a.output) && item > 0}}"; got != want {
		t.Errorf("accept_text = %q, want %q", got, want)
	}
	if a := task(t, mustCompile(t, src), "a"); a.GetAccept() != nil || a.GetAcceptText() != "" {
		t.Errorf("a task without accept has one: %v", a)
	}
}

// join lands in the IR as written; min may equal the number of needs.
func TestJoinLandsInIR(t *testing.T) {
	base := "name: v\nversion: 1\ntasks:\n  a: {capability: core, action: echo}\n  b: {capability: core, action: echo}\n  c: {capability: core, action: echo}\n" +
		"  j:\n    capability: core\n    action: echo\n    needs: [a, b, c]\n"
	j := task(t, mustCompile(t, base+"    join: {min: 2, cancel_rest: true}\n"), "j").GetJoin()
	if j.GetMin() != 2 || !j.GetCancelRest() {
		t.Fatalf("join compiled to %v", j)
	}
	j = task(t, mustCompile(t, base+"    join: {min: 3}\n"), "j").GetJoin()
	if j.GetMin() != 3 || j.GetCancelRest() {
		t.Fatalf("join: {min: 3} compiled to %v", j)
	}
	if task(t, mustCompile(t, base), "j").GetJoin() != nil {
		t.Fatal("a task without join has one in the IR")
	}
}

// loop lands in the IR: until with max and every, over with max or without
// (the engine's loop limit bounds it); with, accept and until read the loop's
// names.
func TestLoopLandsInIR(t *testing.T) {
	src := "name: v\nversion: 1\ninputs: {job: {type: string, default: j1}}\ntasks:\n" +
		"  list: {capability: core, action: echo, with: [a, b]}\n" +
		"  poll:\n    capability: net.http\n    action: http\n" +
		"    with: {url: \"https://api.example/jobs/${{ inputs.job }}?n=${{ iteration }}\", prev: \"${{ previous }}\"}\n" +
		"    loop:\n      until: ${{ output.body.state == \"done\" }}\n      max: 30\n      every: 10s\n" +
		"  each:\n    needs: list\n    loop:\n      over: ${{ tasks.list.output }}\n    capability: code.exec\n    action: exec\n" +
		"    with: {argv: [process, \"${{ item }}\"], stdin: \"${{ iteration == 0 ? '' : string(previous) }}\"}\n" +
		"    accept: ${{ output != item || iteration >= 0 }}\n" +
		"  bounded:\n    needs: list\n    loop: {over: '${{ tasks.list.output }}', max: 5, every: 0s}\n    capability: core\n    action: echo\n"
	wf := mustCompile(t, src)
	assertProto(t, "poll.loop", task(t, wf, "poll").GetLoop(), &robonetv1.Loop{
		Until: &robonetv1.Expr{Source: `output.body.state == "done"`}, Max: 30, Every: durationpb.New(10 * time.Second)})
	assertProto(t, "each.loop", task(t, wf, "each").GetLoop(), &robonetv1.Loop{
		Over: &robonetv1.Expr{Source: "tasks.list.output"}})
	assertProto(t, "bounded.loop", task(t, wf, "bounded").GetLoop(), &robonetv1.Loop{
		Over: &robonetv1.Expr{Source: "tasks.list.output"}, Max: 5})
	if task(t, wf, "list").GetLoop() != nil {
		t.Fatal("a task without loop has one in the IR")
	}
}

// on: every_node lands in the IR; its with and accept read item (the
// node's name) and index.
func TestOnEveryNode(t *testing.T) {
	wf := mustCompile(t, "name: inv\nversion: 1\ntasks:\n"+
		"  inventory:\n    capability: net.scan\n    action: exec\n    on: every_node\n"+
		"    with: {argv: [hostname], env: {NODE: '${{ item }}'}}\n    accept: ${{ index >= 0 && output.node == item }}\n"+
		"  plain: {capability: core, action: echo}\n")
	if got := task(t, wf, "inventory").GetOn(); got != robonetv1.TaskOn_TASK_ON_EVERY_NODE {
		t.Fatalf("inventory.on = %v", got)
	}
	if got := task(t, wf, "plain").GetOn(); got != robonetv1.TaskOn_TASK_ON_UNSPECIFIED {
		t.Fatalf("plain.on = %v", got)
	}
}

// workflow: lands in the IR as Task.workflow, with no capability or action;
// a spread or a loop of child workflows reads item, index and iteration in
// its with (the child's inputs) as any task does.
func TestChildWorkflowLandsInIR(t *testing.T) {
	wf := mustCompile(t, "name: parent\nversion: 1\ninputs:\n  hosts: {type: list}\ntasks:\n"+
		"  scan:\n    workflow: scan-host@2\n    spread: ${{ inputs.hosts }}\n    with: {host: '${{ item }}', n: '${{ index }}'}\n"+
		"  again:\n    needs: scan\n    workflow: scan-host\n    loop: {over: '${{ inputs.hosts }}'}\n    with: {host: '${{ item }}'}\n"+
		"    retry: {max_attempts: 2}\n    timeout: 1m\n")
	scan := task(t, wf, "scan")
	assertProto(t, "scan.workflow", scan.GetWorkflow(), &robonetv1.ChildWorkflow{Name: "scan-host", Version: 2})
	if scan.GetCapability() != "" || scan.GetAction() != "" {
		t.Fatalf("scan has capability %q and action %q", scan.GetCapability(), scan.GetAction())
	}
	again := task(t, wf, "again")
	assertProto(t, "again.workflow", again.GetWorkflow(), &robonetv1.ChildWorkflow{Name: "scan-host"})
	if again.GetRetry().GetMaxAttempts() != 2 || again.GetTimeout().AsDuration() != time.Minute || again.GetLoop() == nil {
		t.Fatalf("again: %v", again)
	}
	// Another version of the child, or another child, is another IR.
	other := mustCompile(t, "name: parent\nversion: 1\ntasks:\n  c: {workflow: scan-host@3}\n")
	same := mustCompile(t, "name: parent\nversion: 1\ntasks:\n  c: {workflow: scan-host@2}\n")
	if spec.Hash(other) == spec.Hash(same) {
		t.Fatal("scan-host@2 and scan-host@3 hash the same")
	}
}

// Locate finds a value by its path of keys, through flow and block
// mappings; a missing key, or a source that does not parse, is 0, 0.
func TestLocate(t *testing.T) {
	src := []byte("name: p\nversion: 1\ntasks:\n  a: {workflow: x@1}\n  b:\n    needs: a\n    workflow: y\n")
	for _, c := range []struct {
		path      []string
		line, col int
	}{
		{[]string{"tasks", "a", "workflow"}, 4, 17},
		{[]string{"tasks", "b", "workflow"}, 7, 15},
		{[]string{"tasks", "b"}, 6, 5},
		{[]string{"tasks", "c", "workflow"}, 0, 0},
		{[]string{"tasks", "b", "needs", "x"}, 0, 0},
	} {
		if l, col := spec.Locate(src, c.path...); l != c.line || col != c.col {
			t.Errorf("Locate(%v) = %d:%d, want %d:%d", c.path, l, col, c.line, c.col)
		}
	}
	if l, c := spec.Locate([]byte("tasks: [unclosed\n"), "tasks"); l != 0 || c != 0 {
		t.Errorf("Locate in bad YAML = %d:%d", l, c)
	}
}
