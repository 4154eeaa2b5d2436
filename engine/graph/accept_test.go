package graph

import (
	"errors"
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func accept(src, text string) taskOpt {
	return func(t *robonetv1.Task) { t.Accept, t.AcceptText = &robonetv1.Expr{Source: src}, text }
}

// checked runs the accept check on out, as the engine does, and completes
// attempt with its verdict.
func (h *harness) checked(name string, index int32, attempt uint32, out any) (string, []string) {
	h.t.Helper()
	ref := h.ref(name, index)
	res := Result{Output: out}
	verdict := ""
	if err := h.g.Accept(ref, attempt, out); err != nil {
		res, verdict = Result{Err: err}, err.Error()
	}
	return verdict, formatEffects(h.p, h.g.Complete(ref, attempt, res, h.now))
}

func TestAcceptVerdicts(t *testing.T) {
	h := newHarness(t, newWorkflow(
		input("min", robonetv1.ValueType_VALUE_TYPE_NUMBER, false, `0.8`),
		tasks(newTask("a", with(lit(`1`)), accept("output.score >= inputs.min", "${{output.score>=inputs.min}}"))),
	), Options{})
	h.start(nil)
	ref := h.ref("a", -1)
	for _, tc := range []struct {
		out  any
		want string
	}{
		{map[string]any{"score": 0.9}, ""},
		{map[string]any{"score": 0.5}, "not accepted: ${{output.score>=inputs.min}}"},
		{map[string]any{"other": 1.0}, "not accepted: ${{output.score>=inputs.min}}: no such key: score"},
		{"text", "not accepted: ${{output.score>=inputs.min}}: no such key"},
	} {
		err := h.g.Accept(ref, 1, tc.out)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("Accept(%v) = %q, want %q", tc.out, got, tc.want)
		}
	}
	// A stale attempt is not judged: Complete ignores it anyway.
	if err := h.g.Accept(ref, 2, "text"); err != nil {
		t.Errorf("Accept of an attempt not in flight = %v", err)
	}
}

func TestAcceptNonBoolIsNotAccepted(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(newTask("a", accept("output.ok", "${{ output.ok }}")))), Options{})
	h.start(nil)
	if err := h.g.Accept(h.ref("a", -1), 1, map[string]any{"ok": "yes"}); err == nil ||
		err.Error() != "not accepted: ${{ output.ok }}: must be a bool, got string" {
		t.Fatalf("Accept of a string = %v", err)
	}
}

func TestRetryUntilAccepted(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`)), retry(3, time.Second, 1, 0, 0), accept("output > 2", "${{ output > 2 }}")),
	), output("a", ex("tasks.a.output"))), Options{})
	h.start(nil)
	verdict, fx := h.checked("a", -1, 1, int64(1))
	expect(t, fx, `retry a#1 @1s`)
	if verdict != "not accepted: ${{ output > 2 }}" {
		t.Fatalf("verdict = %q", verdict)
	}
	if info := h.g.Task(h.ref("a", -1)); info.Status != TaskRetrying || info.Error != verdict {
		t.Fatalf("a = %+v", info)
	}
	expect(t, h.fire(Retry, "a", -1, 1, time.Second), `dispatch a#2 1`)
	_, fx = h.checked("a", -1, 2, int64(3))
	expect(t, fx, `finished COMPLETE`)
	h.outputs(`{"a":3}`)
}

func TestNotAcceptedUnderAbortAndSkip(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", onFailure(policyAbort), accept("output", "${{ output }}")),
		newTask("b"),
	)), Options{})
	h.start(nil)
	_, fx := h.checked("a", -1, 1, false)
	expect(t, fx, `cancel b#1`, `finished FAILED`)
	var werr *WorkflowError
	if err := h.g.Err(); !errors.As(err, &werr) || werr.Reason != "not accepted: ${{ output }}" {
		t.Fatalf("err = %v", err)
	}

	// Spread instances are judged one by one; under skip a rejected one is
	// null in the task's output.
	h = newHarness(t, newWorkflow(tasks(
		newTask("s", spreadOver("[1, 2, 3]"), with(ex("item")), onFailure(policySkip), accept("output == item * 10", "${{ output == item * 10 }}")),
	), output("s", ex("tasks.s.output"))), Options{})
	h.start(nil)
	h.checked("s", 0, 1, int64(10))
	verdict, _ := h.checked("s", 1, 1, int64(21))
	if verdict != "not accepted: ${{ output == item * 10 }}" {
		t.Fatalf("verdict = %q", verdict)
	}
	_, fx = h.checked("s", 2, 1, int64(30))
	expect(t, fx, `finished COMPLETE`)
	h.outputs(`{"s":[10,null,30]}`)
}

func TestPlanRejectsOutputOutsideAccept(t *testing.T) {
	for _, wf := range []*robonetv1.Workflow{
		newWorkflow(tasks(newTask("a", with(ex("output"))))),
		newWorkflow(tasks(newTask("a", when("output == 1")))),
		newWorkflow(tasks(newTask("a")), output("o", ex("output"))),
	} {
		if _, err := NewPlan(wf, testEnv, Options{}); err == nil {
			t.Errorf("NewPlan accepted output outside accept: %v", wf)
		}
	}
	if _, err := NewPlan(newWorkflow(tasks(newTask("a", accept("output == tasks.b.output", "")), newTask("b"))), testEnv, Options{}); err == nil {
		t.Error("NewPlan accepted an accept that reads a task not upstream")
	}
}

func TestAcceptErrorPrintsTheCheckOnce(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(newTask("a", accept("output.score >= 0.8", "${{ output.score >= 0.8 }}")))), Options{})
	h.start(nil)
	err := h.g.Accept(h.ref("a", -1), 1, map[string]any{})
	if err == nil || strings.Count(err.Error(), "output.score") != 1 {
		t.Fatalf("Accept = %v", err)
	}
	t.Log(err)
}
