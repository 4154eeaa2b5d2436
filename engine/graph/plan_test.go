package graph

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

func TestNewPlanRejectsBadIR(t *testing.T) {
	for _, tc := range []struct {
		name string
		wf   *robonetv1.Workflow
		want string
	}{
		{"nil", nil, "nil workflow"},
		{"unknown need", newWorkflow(tasks(newTask("a", needs("ghost")))), `task "a" needs unknown task "ghost"`},
		{"self need", newWorkflow(tasks(newTask("a", needs("a")))), `task "a" needs itself`},
		{"duplicate task", newWorkflow(tasks(newTask("a"), newTask("a"))), `task "a" is declared twice`},
		{"cycle", newWorkflow(tasks(newTask("a", needs("c")), newTask("b", needs("a")), newTask("c", needs("b")), newTask("d"))),
			"tasks form a cycle: a -> b -> c -> a"},
		{"bad expression", newWorkflow(tasks(newTask("a", when("1 +")))), `task "a": when: expression ${{ 1 + }}: syntax error`},
		{"reads non-upstream", newWorkflow(tasks(newTask("a"), newTask("b"), newTask("c", needs("b"), with(ex("tasks.a.output"))))),
			`task "c" reads task "a", which is not upstream of it (add it to needs)`},
		{"reads unknown task", newWorkflow(tasks(newTask("c", with(ex("tasks.zz.output"))))), `task "c" reads unknown task "zz"`},
		{"undeclared input", newWorkflow(tasks(newTask("a", with(ex("inputs.nope"))))), `task "a" reads undeclared input "nope"`},
		{"bad default", newWorkflow(input("n", robonetv1.ValueType_VALUE_TYPE_INT, false, `"x"`)), `input "n": default must be an int, got string x`},
		{"bad jitter", newWorkflow(tasks(newTask("a", retry(2, 0, 1, 0, 1.5)))), `task "a": retry jitter 1.5 must be in [0, 1]`},
		{"output unknown task", newWorkflow(output("o", ex("tasks.q.output"))), `output "o" reads unknown task "q"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(tc.wf, testEnv, Options{})
			if err == nil {
				t.Fatal("NewPlan succeeded")
			}
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNewPlanAcceptsTransitiveReads(t *testing.T) {
	p := mustPlan(t, newWorkflow(tasks(
		newTask("a"), newTask("b", needs("a")), newTask("c", needs("b"), with(ex("tasks.a.output"))),
	)), Options{})
	if p.NumTasks() != 3 || p.Task(2).GetName() != "c" || p.Task(3) != nil || p.Options().MaxSpreadWidth != DefaultMaxSpreadWidth {
		t.Errorf("plan accessors")
	}
	if _, ok := p.Lookup("zz"); ok {
		t.Error("Lookup(zz)")
	}
}

func TestBindInputs(t *testing.T) {
	p := mustPlan(t, newWorkflow(
		input("targets", robonetv1.ValueType_VALUE_TYPE_LIST, true, ""),
		input("n", robonetv1.ValueType_VALUE_TYPE_INT, false, `3`),
		input("ratio", robonetv1.ValueType_VALUE_TYPE_NUMBER, false, ""),
		input("opt", robonetv1.ValueType_VALUE_TYPE_MAP, false, ""),
	), Options{})

	got, err := p.BindInputs(map[string]any{"targets": []string{"a"}, "ratio": 2})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"targets": []any{"a"}, "n": int64(3), "ratio": int64(2), "opt": nil}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || string(mustJSON(g)) != string(mustJSON(v)) {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}

	_, err = p.BindInputs(map[string]any{"n": 1.5, "extra": 1, "Targets": "x"})
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("err = %v", err)
	}
	wantMsgs := []string{
		`invalid workflow input: input "n": must be an int, got number 1.5`,
		`invalid workflow input: missing required input "targets" (a list): supply it at submission`,
		`invalid workflow input: unknown input "Targets": remove it or use one of n, opt, ratio, targets`,
		`invalid workflow input: unknown input "extra": remove it or use one of n, opt, ratio, targets`,
	}
	if got := err.Error(); got != strings.Join(wantMsgs, "\n") {
		t.Errorf("err =\n%s\nwant\n%s", got, strings.Join(wantMsgs, "\n"))
	}

	empty := mustPlan(t, newWorkflow(), Options{})
	if _, err := empty.BindInputs(map[string]any{"x": 1}); err == nil ||
		err.Error() != `invalid workflow input: unknown input "x": the workflow declares no inputs` {
		t.Errorf("err = %v", err)
	}
}

func mustJSON(v any) []byte {
	b, err := value.Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestNodeFitsACacheLine guards the layout that keeps completions on large
// plans fast: the hot part of a compiled task is one 64-byte cache line.
func TestNodeFitsACacheLine(t *testing.T) {
	if size := unsafe.Sizeof(node{}); size > 64 {
		t.Errorf("node is %d bytes; keep it within a 64-byte cache line (move cold fields to taskMeta)", size)
	}
}
