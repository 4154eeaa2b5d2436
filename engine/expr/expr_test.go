package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/value"
)

type testScope struct {
	inputs  map[string]any
	outputs map[string]any
	item    any
	index   int64
	output  any
}

func (s testScope) Inputs() map[string]any { return s.inputs }
func (s testScope) TaskOutput(n string) (any, bool) {
	v, ok := s.outputs[n]
	return v, ok
}

// TaskOutputAt numbers the one task these tests bind: discover is 0.
func (s testScope) TaskOutputAt(i int32) (any, bool) {
	if i == 0 {
		return s.TaskOutput("discover")
	}
	return nil, false
}
func (s testScope) Item() any        { return s.item }
func (s testScope) Index() int64     { return s.index }
func (s testScope) Output() any      { return s.output }
func (s testScope) Iteration() int64 { return 0 }
func (s testScope) Previous() any    { return nil }

func newEnv(t testing.TB) *Env {
	t.Helper()
	env, err := NewEnv(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestCheckRefsAndCanonical(t *testing.T) {
	env := newEnv(t)
	c, issue := env.Check("size( tasks.probe.output )>0 && inputs.n  == index")
	if issue != nil {
		t.Fatal(issue)
	}
	if got, want := c.Canonical, "size(tasks.probe.output) > 0 && inputs.n == index"; got != want {
		t.Errorf("canonical = %q, want %q", got, want)
	}
	if len(c.Refs.Tasks) != 1 || c.Refs.Tasks[0] != "probe" || len(c.Refs.Inputs) != 1 || c.Refs.Inputs[0] != "n" || !c.Refs.Index || c.Refs.Item {
		t.Errorf("refs = %+v", c.Refs)
	}
	if c.Refs.Output {
		t.Errorf("refs.Output set without output: %+v", c.Refs)
	}
	co, issue := env.Check("output.score >= 0.8 && tasks.a.output.ok")
	if issue != nil {
		t.Fatal(issue)
	}
	if !co.Refs.Output || len(co.Refs.Tasks) != 1 {
		t.Errorf("refs of an accept check = %+v", co.Refs)
	}
	c2, issue := env.Check("tasks.a.output.map(x, x * 2)")
	if issue != nil {
		t.Fatal(issue)
	}
	if c2.Canonical != "tasks.a.output.map(x, x * 2)" {
		t.Errorf("macro canonical = %q", c2.Canonical)
	}
}

func TestCheckIssues(t *testing.T) {
	env := newEnv(t)
	for _, tc := range []struct{ src, want string }{
		{"", "empty expression"},
		{"1 +", "syntax error"},
		{"1 + 'a'", "type error: found no matching overload for '_+_'"},
		{"tasks.a.result", `tasks.a has no field "result"`},
		{"tasks['a'].output", "tasks must be read as tasks.<name>.output"},
		{"foo + 1", "undeclared reference to 'foo'"},
		{"tasks.a.output.map(x, tasks.b.output.map(y, tasks.c.output.map(z, z)))", "may cost"},
		{strings.Repeat("1+", 3000) + "1", "bytes long"},
		{`"abc".matches("(")`, "invalid regular expression: missing closing )"},
		{`matches(inputs.s, "a{2,1}")`, "invalid regular expression: invalid repeat count"},
		{`inputs.s.matches("[z-a]") || true`, "invalid regular expression: invalid character class range"},
	} {
		_, issue := env.Check(tc.src)
		if issue == nil || !strings.Contains(issue.Error(), tc.want) {
			t.Errorf("Check(%.40q) = %v, want an issue containing %q", tc.src, issue, tc.want)
		}
	}
}

func TestConstantRegexesThatCompileAreAccepted(t *testing.T) {
	env := newEnv(t)
	for _, src := range []string{`"abc".matches("^a.c$")`, `inputs.s.matches(inputs.p)`, `matches(inputs.s, "[0-9]+")`} {
		if _, issue := env.Check(src); issue != nil {
			t.Errorf("Check(%q) = %v, want no issue", src, issue)
		}
	}
}

func TestEvalFastAndSlowAgree(t *testing.T) {
	env := newEnv(t)
	s := testScope{
		inputs:  map[string]any{"n": int64(3), "cfg": map[string]any{"url": "http://x"}},
		outputs: map[string]any{"discover": map[string]any{"hosts": []any{"a", "b"}}},
		item:    map[string]any{"name": "z"}, index: 7,
		output: map[string]any{"score": 0.9},
	}
	for _, tc := range []struct {
		src  string
		fast bool
		want any
	}{
		{"inputs.n", true, int64(3)},
		{"inputs.cfg.url", true, "http://x"},
		{"tasks.discover.output.hosts", true, []any{"a", "b"}},
		{"item.name", true, "z"},
		{"index", true, int64(7)},
		{"output.score", true, 0.9},
		{"output.score >= 0.8 && index == 7", false, true},
		{"inputs.n + index", false, int64(10)},
		{"size(tasks.discover.output.hosts) > 1", false, true},
		{"tasks.discover.output.hosts.map(h, h + '!')", false, []any{"a!", "b!"}},
		{"{'k': 1.5, 'l': [null]}", false, map[string]any{"k": 1.5, "l": []any{nil}}},
	} {
		p, err := env.Compile(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if p.fast != tc.fast {
			t.Errorf("%s: fast = %v, want %v", tc.src, p.fast, tc.fast)
		}
		got, err := p.Eval(s)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if !value.Equal(got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.src, got, tc.want)
		}
	}
	// Bound to an index, the fast path asks the scope by index.
	bound, err := env.Compile("tasks.discover.output.hosts")
	if err != nil {
		t.Fatal(err)
	}
	bound.BindTasks(func(name string) (int32, bool) { return 0, name == "discover" })
	if v, err := bound.Eval(s); err != nil || !value.Equal(v, []any{"a", "b"}) {
		t.Errorf("bound fast path = %v, %v", v, err)
	}
	// A fast-path miss falls back to CEL, which names the missing key, even
	// though the fast program kept no syntax tree.
	p, err := env.Compile("tasks.discover.output.missing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(s); !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing key error = %v", err)
	}
}

func TestCheckedType(t *testing.T) {
	env := newEnv(t)
	for src, want := range map[string]string{"1 > 0": "bool", "tasks.a.output": "dyn", "[1, 2]": "list(int)", "'x'": "string"} {
		c, issue := env.Check(src)
		if issue != nil {
			t.Fatal(issue)
		}
		if got := c.Type.String(); got != want {
			t.Errorf("type of %s = %s, want %s", src, got, want)
		}
	}
}
