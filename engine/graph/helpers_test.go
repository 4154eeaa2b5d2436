package graph

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/value"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ---- IR builders ----

type taskOpt func(*robonetv1.Task)

func newTask(name string, opts ...taskOpt) *robonetv1.Task {
	t := &robonetv1.Task{Name: name, Capability: "test.cap", Action: "run"}
	for _, o := range opts {
		o(t)
	}
	return t
}

func needs(names ...string) taskOpt {
	return func(t *robonetv1.Task) { t.Needs = slices.Sorted(slices.Values(names)) }
}
func with(tm *robonetv1.Template) taskOpt { return func(t *robonetv1.Task) { t.With = tm } }
func spreadOver(src string) taskOpt {
	return func(t *robonetv1.Task) { t.Spread = &robonetv1.Expr{Source: src} }
}
func when(src string) taskOpt {
	return func(t *robonetv1.Task) { t.When = &robonetv1.Expr{Source: src} }
}
func onFailure(p robonetv1.FailurePolicy) taskOpt {
	return func(t *robonetv1.Task) { t.OnFailure = p }
}
func retry(maxAttempts uint32, initial time.Duration, factor float64, maxDelay time.Duration, jitter float64) taskOpt {
	return func(t *robonetv1.Task) {
		t.Retry = &robonetv1.RetryPolicy{MaxAttempts: maxAttempts, Initial: durationpb.New(initial),
			Factor: factor, Max: durationpb.New(maxDelay), Jitter: jitter}
	}
}
func timeoutAfter(d time.Duration) taskOpt {
	return func(t *robonetv1.Task) { t.Timeout = durationpb.New(d) }
}

const (
	policyRetry = robonetv1.FailurePolicy_FAILURE_POLICY_RETRY
	policySkip  = robonetv1.FailurePolicy_FAILURE_POLICY_SKIP
	policyAbort = robonetv1.FailurePolicy_FAILURE_POLICY_ABORT
)

// lit is a literal template from JSON text.
func lit(json string) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_LiteralJson{LiteralJson: []byte(json)}}
}

// ex is a whole-value expression template.
func ex(src string) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_Expr{Expr: &robonetv1.Expr{Source: src}}}
}

// interp builds an interpolation; parts inside ${{ }} are expressions.
func interp(s string) *robonetv1.Template {
	var parts []*robonetv1.InterpolationPart
	for s != "" {
		i := strings.Index(s, "${{")
		if i < 0 {
			parts = append(parts, &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Text{Text: s}})
			break
		}
		if i > 0 {
			parts = append(parts, &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Text{Text: s[:i]}})
		}
		j := strings.Index(s, "}}")
		parts = append(parts, &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Expr{
			Expr: &robonetv1.Expr{Source: strings.TrimSpace(s[i+3 : j])}}})
		s = s[j+2:]
	}
	return &robonetv1.Template{Kind: &robonetv1.Template_Interpolation{Interpolation: &robonetv1.Interpolation{Parts: parts}}}
}

// tmap builds a map template from key, template pairs (keys sorted here).
func tmap(kv ...any) *robonetv1.Template {
	m := &robonetv1.TemplateMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Entries = append(m.Entries, &robonetv1.TemplateEntry{Key: kv[i].(string), Value: kv[i+1].(*robonetv1.Template)})
	}
	slices.SortFunc(m.Entries, func(a, b *robonetv1.TemplateEntry) int { return strings.Compare(a.Key, b.Key) })
	return &robonetv1.Template{Kind: &robonetv1.Template_Map{Map: m}}
}

type wfOpt func(*robonetv1.Workflow)

func input(name string, typ robonetv1.ValueType, required bool, def string) wfOpt {
	return func(w *robonetv1.Workflow) {
		w.Inputs = append(w.Inputs, &robonetv1.Input{Name: name, Type: typ, Required: required, DefaultJson: []byte(def)})
		slices.SortFunc(w.Inputs, func(a, b *robonetv1.Input) int { return strings.Compare(a.Name, b.Name) })
	}
}

func output(name string, tm *robonetv1.Template) wfOpt {
	return func(w *robonetv1.Workflow) {
		w.Outputs = append(w.Outputs, &robonetv1.Output{Name: name, Value: tm})
		slices.SortFunc(w.Outputs, func(a, b *robonetv1.Output) int { return strings.Compare(a.Name, b.Name) })
	}
}

func tasks(ts ...*robonetv1.Task) wfOpt {
	return func(w *robonetv1.Workflow) {
		w.Tasks = append(w.Tasks, ts...)
		slices.SortFunc(w.Tasks, func(a, b *robonetv1.Task) int { return strings.Compare(a.Name, b.Name) })
	}
}

func newWorkflow(opts ...wfOpt) *robonetv1.Workflow {
	w := &robonetv1.Workflow{Name: "test", Version: 1}
	for _, o := range opts {
		o(w)
	}
	return w
}

var testEnv = func() *expr.Env {
	env, err := expr.NewEnv(expr.Limits{})
	if err != nil {
		panic(err)
	}
	return env
}()

func mustPlan(t testing.TB, wf *robonetv1.Workflow, opts Options) *Plan {
	t.Helper()
	p, err := NewPlan(wf, testEnv, opts)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return p
}

// ---- harness ----

// t0 is the start time of every test; effects print times relative to it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	t   testing.TB
	p   *Plan
	g   *Graph
	now time.Time
}

func newHarness(t testing.TB, wf *robonetv1.Workflow, opts Options) *harness {
	t.Helper()
	p := mustPlan(t, wf, opts)
	return &harness{t: t, p: p, g: p.NewGraph("inst"), now: t0}
}

func (h *harness) ref(name string, index int32) TaskRef {
	h.t.Helper()
	n, ok := h.p.Lookup(name)
	if !ok {
		h.t.Fatalf("no task %q", name)
	}
	return TaskRef{Node: n, Index: index}
}

func (h *harness) start(inputs map[string]any) []string {
	h.t.Helper()
	fx, err := h.g.Start(inputs, h.now)
	if err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	return formatEffects(h.p, fx)
}

// done completes attempt of task name (index -1 unless given) with output.
func (h *harness) done(name string, index int32, attempt uint32, out any) []string {
	h.t.Helper()
	return formatEffects(h.p, h.g.Complete(h.ref(name, index), attempt, Result{Output: out}, h.now))
}

func (h *harness) failed(name string, index int32, attempt uint32, msg string) []string {
	h.t.Helper()
	return formatEffects(h.p, h.g.Complete(h.ref(name, index), attempt, Result{Err: fmt.Errorf("%s", msg)}, h.now))
}

// fire advances the clock to at and fires the timer.
func (h *harness) fire(kind TimerKind, name string, index int32, attempt uint32, at time.Duration) []string {
	h.t.Helper()
	h.now = t0.Add(at)
	return formatEffects(h.p, h.g.Fire(Timer{Kind: kind, Task: h.ref(name, index), Attempt: attempt, At: h.now}, h.now))
}

// restored snapshots the graph and restores it: the restored graph takes
// the harness's place, and its own snapshot must be the same bytes.
func (h *harness) restored() *Graph {
	h.t.Helper()
	snap, err := h.g.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	g, err := h.p.Restore("inst", snap)
	if err != nil {
		h.t.Fatal(err)
	}
	if again, err := g.Snapshot(); err != nil || string(again) != string(snap) {
		h.t.Fatalf("the snapshot of the restored graph differs (%v)", err)
	}
	h.g = g
	return g
}

func (h *harness) state(want State) {
	h.t.Helper()
	if got := h.g.State(); got != want {
		h.t.Fatalf("state = %s, want %s (err: %v)", got, want, h.g.Err())
	}
}

func (h *harness) outputs(wantJSON string) {
	h.t.Helper()
	h.state(Complete)
	if got := string(value.MustEncode(h.g.Outputs())); got != wantJSON {
		h.t.Fatalf("outputs = %s, want %s", got, wantJSON)
	}
}

func formatRef(p *Plan, r TaskRef) string {
	name := p.nodeName(r.Node)
	if r.Index >= 0 && p.nodes[r.Node].loop != nil {
		return fmt.Sprintf("%s#%d", name, r.Index) // an iteration
	}
	if r.Index >= 0 {
		return fmt.Sprintf("%s[%d]", name, r.Index)
	}
	return name
}

func formatEffect(p *Plan, e Effect) string {
	switch e.Kind {
	case Dispatch:
		return fmt.Sprintf("dispatch %s#%d %s", formatRef(p, e.Task), e.Attempt, value.MustEncode(e.Input))
	case Cancel:
		return fmt.Sprintf("cancel %s#%d", formatRef(p, e.Task), e.Attempt)
	case SetTimer:
		return fmt.Sprintf("%s %s#%d @%s", e.Timer.Kind, formatRef(p, e.Timer.Task), e.Timer.Attempt, e.Timer.At.Sub(t0))
	case Finished:
		return "finished " + e.State.String()
	case Scatter:
		return "scatter " + formatRef(p, e.Task)
	}
	return fmt.Sprintf("effect %d", e.Kind)
}

func formatEffects(p *Plan, fx []Effect) []string {
	out := make([]string, len(fx))
	for i, e := range fx {
		out[i] = formatEffect(p, e)
	}
	return out
}

// expect compares effect lists exactly, in order.
func expect(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("effects:\n  got  %q\n  want %q", got, want)
	}
}
