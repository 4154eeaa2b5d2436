package graph_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// bindSpec declares one input of every type, required and optional, with and
// without defaults.
const bindSpec = `
name: fuzz.bind_inputs
version: 1
inputs:
  targets: {type: list}
  port: {type: int, default: 8080}
  ratio: {type: number, required: false}
  verbose: {type: bool, default: false}
  label: {type: string, required: true}
  cfg: {type: map, default: {retries: 3, hosts: [a, b]}}
  anything:
tasks:
  scan:
    capability: net.scan
    action: exec
    with:
      argv: [scan, "${{ inputs.targets }}", "${{ inputs.port }}", "${{ inputs.label }}"]
      env: {RATIO: "${{ inputs.ratio }}", VERBOSE: "${{ inputs.verbose }}"}
      cfg: ${{ inputs.cfg }}
      any: ${{ inputs.anything }}
`

// FuzzBindInputs submits arbitrary inputs JSON, decoded as the API decodes
// it, to a plan compiled from bindSpec. BindInputs must agree with a naive
// reference: it fails, with one error wrapping ErrInvalidInput per problem
// (in declaration order, then unknown names sorted), exactly when an input is
// missing, mistyped or undeclared; otherwise it binds every declared input,
// given values unchanged, defaults or null for the rest. It never modifies
// its argument and is deterministic. Inputs decoded by encoding/json (not
// canonical, not depth-limited) must not make it panic either.
func FuzzBindInputs(f *testing.F) {
	for _, s := range []string{
		`{"targets":["a","b"],"label":"x"}`,
		`{"targets":[],"label":"","port":1,"ratio":2,"verbose":true,"cfg":{},"anything":null}`,
		`{"targets":[1,{"a":[]}],"label":"é","ratio":2.5,"anything":[1,2.0,"3"]}`,
		`{"targets":["a"],"label":"x","port":1.0}`,
		`{"targets":["a"],"label":"x","port":9223372036854775807,"ratio":1e308}`,
		`{"targets":["a"],"label":"x","port":9223372036854775808}`,
		`{"targets":"a","label":1,"verbose":"true","cfg":[],"ratio":"2"}`,
		`{"targets":null,"label":null}`,
		`{"Targets":["a"],"label":"x","extra":1,"":2}`,
		`{"targets":["a"],"label":"x","port":1,"port":"1"}`,
		`{}`, `[]`, `null`, `"x"`, `1`, `{"targets":`, `{"targets":[]} x`,
		`{"targets":` + strings.Repeat("[", value.MaxDepth) + strings.Repeat("]", value.MaxDepth) + `,"label":"x"}`,
		`{"targets":` + strings.Repeat("[", value.MaxDepth+1) + strings.Repeat("]", value.MaxDepth+1) + `,"label":"x"}`,
	} {
		f.Add([]byte(s))
	}
	wf, err := spec.Compile("bind.yaml", []byte(bindSpec), spec.Options{})
	if err != nil {
		f.Fatal(err)
	}
	plan, err := graph.NewPlan(wf, nil, graph.Options{})
	if err != nil {
		f.Fatal(err)
	}
	decls := wf.GetInputs()
	if len(decls) != 7 {
		f.Fatalf("bindSpec compiled to %d inputs, want 7", len(decls))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := value.Decode(data)
		if err != nil {
			checkBindRaw(t, plan, data)
			return
		}
		in, isMap := v.(map[string]any)
		if !isMap {
			in = map[string]any{"targets": v, "label": "x"} // still exercise the type checks
		}
		before, err := value.Encode(in)
		if err != nil {
			// Only by the wrapping above: v was as deep as Decode allows,
			// and the object around it is one level deeper than any the
			// API decodes.
			if isMap || !errors.Is(err, value.ErrTooDeep) {
				t.Fatalf("a decoded object does not encode: %v", err)
			}
			return
		}

		out, err := plan.BindInputs(in)
		if got := value.MustEncode(in); !bytes.Equal(got, before) {
			t.Fatalf("BindInputs modified its argument: %s -> %s", before, got)
		}
		out2, err2 := plan.BindInputs(in)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !value.Equal(any(out), any(out2)) {
			t.Fatalf("BindInputs is not deterministic: %v, %v then %v, %v", out, err, out2, err2)
		}

		problems := naiveBindProblems(t, decls, in)
		if err != nil {
			if out != nil {
				t.Fatalf("BindInputs returned both %v and %v", out, err)
			}
			checkInvalidInput(t, err, problems)
			return
		}
		if len(problems) > 0 {
			t.Fatalf("BindInputs(%s) succeeded, want errors: %q", before, problems)
		}
		if len(out) != len(decls) {
			t.Fatalf("bound %d inputs, declared %d: %v", len(out), len(decls), out)
		}
		for _, d := range decls {
			got, ok := out[d.GetName()]
			if !ok {
				t.Fatalf("input %q is not bound: %v", d.GetName(), out)
			}
			var want any
			if given, ok := in[d.GetName()]; ok {
				want = given
			} else if len(d.GetDefaultJson()) > 0 {
				want = mustDecode(t, d.GetDefaultJson())
			}
			if !value.Equal(got, want) {
				t.Fatalf("input %q bound to %#v, want %#v", d.GetName(), got, want)
			}
		}
		if _, err := value.Encode(any(out)); err != nil {
			t.Fatalf("bound inputs are not canonical: %v", err)
		}
	})
}

// checkBindRaw binds inputs as a Go caller might pass them: decoded by
// encoding/json, so floats for every number and no depth limit. Anything
// but bound, canonical inputs must be an error wrapping ErrInvalidInput.
func checkBindRaw(t *testing.T, plan *graph.Plan, data []byte) {
	t.Helper()
	var in map[string]any
	if json.Unmarshal(data, &in) != nil {
		return
	}
	out, err := plan.BindInputs(in)
	if err != nil {
		if !errors.Is(err, graph.ErrInvalidInput) {
			t.Fatalf("BindInputs(%s) = %v, want ErrInvalidInput", data, err)
		}
		return
	}
	if _, err := value.Encode(any(out)); err != nil {
		t.Fatalf("bound inputs of %s are not canonical: %v", data, err)
	}
}

// naiveBindProblems lists, in the order BindInputs reports them, the names
// of the inputs that are missing, mistyped or undeclared, each with the
// start of the message that reports it.
func naiveBindProblems(t *testing.T, decls []*robonetv1.Input, in map[string]any) []string {
	t.Helper()
	var problems []string
	for _, d := range decls {
		v, given := in[d.GetName()]
		switch {
		case !given && d.GetRequired() && len(d.GetDefaultJson()) == 0:
			problems = append(problems, fmt.Sprintf("missing required input %q", d.GetName()))
		case given && !hasType(d.GetType(), v):
			problems = append(problems, fmt.Sprintf("input %q: ", d.GetName()))
		}
	}
	var unknown []string
	for name := range in {
		if !slices.ContainsFunc(decls, func(d *robonetv1.Input) bool { return d.GetName() == name }) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		problems = append(problems, "unknown input "+value.QuoteClipped(name, 64)) // long names are quoted clipped
	}
	return problems
}

func hasType(typ robonetv1.ValueType, v any) bool {
	switch typ {
	case robonetv1.ValueType_VALUE_TYPE_STRING:
		_, ok := v.(string)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_INT:
		_, ok := v.(int64)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_NUMBER:
		_, isInt := v.(int64)
		_, isFloat := v.(float64)
		return isInt || isFloat
	case robonetv1.ValueType_VALUE_TYPE_BOOL:
		_, ok := v.(bool)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_LIST:
		_, ok := v.([]any)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_MAP:
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

// checkInvalidInput checks that err joins one error per problem, in order,
// each wrapping ErrInvalidInput.
func checkInvalidInput(t *testing.T, err error, problems []string) {
	t.Helper()
	if !errors.Is(err, graph.ErrInvalidInput) {
		t.Fatalf("BindInputs error %v does not wrap ErrInvalidInput", err)
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // the joined list itself
		errs = j.Unwrap()
	}
	if len(errs) != len(problems) {
		t.Fatalf("BindInputs reported %d problems, want %d:\n%v\nwant: %q", len(errs), len(problems), err, problems)
	}
	for i, e := range errs {
		if !errors.Is(e, graph.ErrInvalidInput) {
			t.Fatalf("problem %d does not wrap ErrInvalidInput: %v", i, e)
		}
		if want := graph.ErrInvalidInput.Error() + ": " + problems[i]; !strings.HasPrefix(e.Error(), want) {
			t.Fatalf("problem %d = %q, want it to start with %q", i, e, want)
		}
	}
}

func mustDecode(t *testing.T, b []byte) any {
	t.Helper()
	v, err := value.Decode(b)
	if err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// FuzzDifferential runs the differential test against the reference
// scheduler on workflows built from the fuzzer's seeds: random joins (with
// and without cancel_rest), spreads, loops (until and over, with and
// without a pause), guards and failure policies, completed in random
// orders, with a snapshot and restore before event snap-1 (none for 0 and
// 1) and, without joins, a replay of the recorded results there.
func FuzzDifferential(f *testing.F) {
	env, err := expr.NewEnv(expr.Limits{})
	if err != nil {
		f.Fatal(err)
	}
	for seed := range uint64(16) {
		f.Add(seed, seed*0x9e3779b97f4a7c15, uint8(seed))
	}
	f.Fuzz(func(t *testing.T, seed, stream uint64, snap uint8) {
		rng := rand.New(rand.NewPCG(seed, stream))
		wf := randomWorkflow(rng)
		if err := runDifferential(env, wf, rng, seed, int(snap)-1); err != nil {
			t.Fatalf("%v\nworkflow: %v", err, wf)
		}
	})
}
