package graph

import (
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// childOf makes a task's body the workflow name@version.
func childOf(name string, version uint32) taskOpt {
	return func(t *robonetv1.Task) {
		t.Capability, t.Action = "", ""
		t.Workflow = &robonetv1.ChildWorkflow{Name: name, Version: version}
	}
}

// scans runs scan-host@2 once per host after a, and z after it.
func scans(opts ...taskOpt) *robonetv1.Workflow {
	opts = append([]taskOpt{needs("a"), childOf("scan-host", 2), spreadOver("tasks.a.output"),
		with(tmap("host", ex("item")))}, opts...)
	return newWorkflow(tasks(
		newTask("a"),
		newTask("scan", opts...),
		newTask("z", needs("scan"), with(ex("tasks.scan.output"))),
	), output("all", ex("tasks.scan.output")))
}

// A child workflow task is dispatched like any task, one attempt per
// element of its spread, with its with as the child's inputs; its output
// is the children's outputs; the plan says which workflow it runs.
func TestChildTask(t *testing.T) {
	h := newHarness(t, scans(), Options{})
	if name, v, ok := h.p.Child(h.ref("scan", -1).Node); !ok || name != "scan-host" || v != 2 {
		t.Fatalf("Child(scan) = %q, %d, %v", name, v, ok)
	}
	if _, _, ok := h.p.Child(h.ref("a", -1).Node); ok || !h.p.HasChildren() {
		t.Fatalf("a runs a child, or the plan has none")
	}
	h.start(nil)
	expect(t, h.done("a", -1, 1, []any{"h1", "h2"}),
		`dispatch scan[0]#1 {"host":"h1"}`, `dispatch scan[1]#1 {"host":"h2"}`)
	expect(t, h.done("scan", 1, 1, map[string]any{"open": 2}))
	expect(t, h.done("scan", 0, 1, map[string]any{"open": 1}), `dispatch z#1 [{"open":1},{"open":2}]`)
	expect(t, h.done("z", -1, 1, nil), `finished COMPLETE`)
	h.outputs(`{"all":[{"open":1},{"open":2}]}`)
	if n := h.g.Children(); n != 2 {
		t.Fatalf("Children() = %d, want 2", n)
	}
}

// At the depth limit no child starts: the attempt fails without retry
// (another would be refused the same way) and the policy decides; under
// skip the dependents see null.
func TestChildDepthLimit(t *testing.T) {
	h := newHarness(t, scans(retry(3, time.Second, 1, 0, 0)), Options{MaxChildDepth: 2})
	h.g.SetDepth(2)
	h.start(nil)
	expect(t, h.done("a", -1, 1, []any{"h1"}), `finished FAILED`)
	want := `task "scan"[0] attempt 1 failed, its last (no retry left): child workflow scan-host@2 not started: ` +
		`it would run 3 deep, past the child-depth limit of 2 (a workflow that runs itself as a child needs a when: that ends the recursion)`
	if got := h.g.Err().Error(); got != want {
		t.Fatalf("err = %s\nwant  %s", got, want)
	}
	if h.g.Children() != 0 {
		t.Fatalf("Children() = %d", h.g.Children())
	}

	h = newHarness(t, scans(onFailure(policySkip)), Options{MaxChildDepth: 2})
	h.g.SetDepth(1) // one more level is allowed
	h.start(nil)
	expect(t, h.done("a", -1, 1, []any{"h1"}), `dispatch scan[0]#1 {"host":"h1"}`)

	h = newHarness(t, scans(onFailure(policySkip)), Options{MaxChildDepth: 2})
	h.g.SetDepth(2)
	h.start(nil)
	expect(t, h.done("a", -1, 1, []any{"h1", "h2"}), `dispatch z#1 [null,null]`)
}

// An instance starts at most MaxChildren children in its life, retries
// included; the count survives a snapshot and a restore, so a replay
// refuses the same attempt.
func TestChildrenLimit(t *testing.T) {
	h := newHarness(t, scans(retry(2, time.Second, 1, 0, 0), onFailure(policySkip)), Options{MaxChildren: 3})
	h.start(nil)
	expect(t, h.done("a", -1, 1, []any{"h1", "h2"}),
		`dispatch scan[0]#1 {"host":"h1"}`, `dispatch scan[1]#1 {"host":"h2"}`)
	expect(t, h.failed("scan", 0, 1, "child failed"), `retry scan[0]#1 @1s`)
	g := h.restored()
	if g.Children() != 2 {
		t.Fatalf("restored with %d children started, want 2", g.Children())
	}
	expect(t, formatEffects(h.p, g.Resume(h.now)), `retry scan[0]#1 @1s`, `dispatch scan[1]#1 {"host":"h2"}`)
	expect(t, h.fire(Retry, "scan", 0, 1, time.Second), `dispatch scan[0]#2 {"host":"h1"}`) // the third
	expect(t, h.failed("scan", 1, 1, "child failed"), `retry scan[1]#1 @2s`)
	expect(t, h.fire(Retry, "scan", 1, 1, 2*time.Second)) // the fourth: refused, skipped
	if info := h.g.Task(h.ref("scan", 1)); info.Status != TaskFailed || !strings.Contains(info.Error, "started 3 child workflows, the children-per-instance limit") {
		t.Fatalf("scan[1]: %+v", info)
	}
	expect(t, h.done("scan", 0, 2, "ok"), `dispatch z#1 ["ok",null]`)
}

// A plan refuses a child workflow task with an action of its own, verify
// or on, or without a workflow name.
func TestChildPlanErrors(t *testing.T) {
	for name, opt := range map[string]taskOpt{
		"capability": func(t *robonetv1.Task) { t.Capability = "core" },
		"verify":     func(t *robonetv1.Task) { t.Verify = 2 },
		"on":         everyNode(),
		"no name":    func(t *robonetv1.Task) { t.Workflow.Name = "" },
	} {
		wf := newWorkflow(tasks(newTask("x", childOf("c", 0), opt)))
		if _, err := NewPlan(wf, testEnv, Options{}); err == nil {
			t.Errorf("%s: NewPlan accepted it", name)
		}
	}
	if _, err := NewPlan(newWorkflow(tasks(newTask("x", childOf("c", 0)))), testEnv, Options{MaxChildren: -1}); err == nil {
		t.Error("NewPlan accepted MaxChildren -1")
	}
}
