package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
)

// scanHost is the child workflow: it probes one host (a test.cap task
// that the test answers) and outputs the ports it says are open.
const scanHost = `
name: scan-host
version: %d
inputs:
  host: {type: string}
  deep: {type: bool, default: false}
tasks:
  probe:
    capability: test.cap
    action: echo
    with: {host: "${{ inputs.host }}"}
outputs:
  open: ${{ tasks.probe.output.open }}
`

// scanAll runs scan-host (as %s names it) once per host, then report.
const scanAll = `
name: scan-all
version: 1
inputs:
  hosts: {type: list}
tasks:
  scan:
    workflow: %s
    spread: ${{ inputs.hosts }}
    with: {host: "${{ item }}"}%s
  report:
    needs: scan
    capability: test.cap
    action: echo
    with: {open: "${{ tasks.scan.output.map(s, s.open) }}"}
outputs:
  open: ${{ tasks.report.output.open }}
`

func scanHostSpec(version int) string { return fmt.Sprintf(scanHost, version) }

func scanAllSpec(child, extra string) string { return fmt.Sprintf(scanAll, child, extra) }

// registerSpec registers a spec with e.
func (h *harness) registerSpec(e *engine.Engine, file, src string) engine.WorkflowInfo {
	h.t.Helper()
	info, err := e.RegisterWorkflow(ctxOf(h.t), file, []byte(src))
	if err != nil {
		h.t.Fatalf("RegisterWorkflow(%s): %v", file, err)
	}
	return info
}

// probes takes n dispatches of probe (one per child instance) and returns
// them by the host they probe.
func probes(t *testing.T, h *harness, n int) map[string]port.TaskDispatch {
	t.Helper()
	out := map[string]port.TaskDispatch{}
	for _, d := range h.disp.take(t, n) {
		in, _ := d.Input.(map[string]any)
		host, _ := in["host"].(string)
		if d.ExecutionID != "probe" || host == "" {
			t.Fatalf("dispatched %s#%d with %v, want a probe of a host", d.ExecutionID, d.Attempt, d.Input)
		}
		out[host] = d
	}
	return out
}

// startScans starts an engine of term, registers scan-host v1, submits
// scan-all (scan-host, the latest) over hosts and waits for the probe of
// each child; it returns the engine, the parent and the probes by host.
func (h *harness) startScans(term uint64, hosts ...any) (*engine.Engine, uuid.UUID, map[string]port.TaskDispatch) {
	h.t.Helper()
	e := h.start(term)
	h.registerSpec(e, "scan-host.yaml", scanHostSpec(1))
	id := h.submit(e, scanAllSpec("scan-host", ""), map[string]any{"hosts": hosts})
	return e, id, probes(h.t, h, len(hosts))
}

// getView reads an instance through e.
func getView(t *testing.T, e *engine.Engine, id uuid.UUID) engine.InstanceView {
	t.Helper()
	v, err := e.GetInstance(ctxOf(t), id)
	if err != nil {
		t.Fatalf("GetInstance(%s): %v", id, err)
	}
	return v
}

// A task whose body is a workflow starts a child instance per element of
// its spread, with its with as the child's inputs; the task's output is
// the children's outputs. The children are real instances: their own ids
// (derived from the parent's attempt, in its partition), listed, with
// their parent, which lists them as its attempts' children. No Waggler
// sees the child task itself.
func TestChildWorkflowRuns(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.PartitionCount = 16 })
		h.registerSpec(e, "scan-host.yaml", scanHostSpec(2))
		id := h.submit(e, scanAllSpec("scan-host@2", ""), map[string]any{"hosts": []any{"a", "b"}})
		ps := probes(t, h, 2)
		if ps["a"].InstanceID == ps["b"].InstanceID || ps["a"].InstanceID == id {
			t.Fatalf("the probes ran in instances %s and %s (the parent is %s)", ps["a"].InstanceID, ps["b"].InstanceID, id)
		}
		for i, host := range []string{"a", "b"} {
			want := port.ChildID(port.AttemptKey{InstanceID: id, ExecutionID: fmt.Sprintf("scan[%d]", i), Attempt: 1}, 16)
			if got := ps[host].InstanceID; got != want {
				t.Fatalf("the child of scan[%d] is %s, want %s", i, got, want)
			}
			if port.PartitionOf(want, 16) != port.PartitionOf(id, 16) {
				t.Fatalf("the child of scan[%d] is in another partition than its parent", i)
			}
		}
		answer(e, ps["b"], map[string]any{"open": []any{22}})
		answer(e, ps["a"], map[string]any{"open": []any{80, 443}})
		report := h.disp.one(t, "report", 1)
		if got := jsonOf(t, report.Input); got != `{"open":[[80,443],[22]]}` {
			t.Fatalf("report got %s", got)
		}
		echo(e, report)
		v := h.wait(e, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs["open"]) != `[[80,443],[22]]` {
			t.Fatalf("ended %s (%s): %v", v.State, v.Error, v.Outputs)
		}
		if v.Parent != nil {
			t.Fatalf("the parent has a parent: %+v", v.Parent)
		}
		scan := task(t, v, "scan")
		if scan.Workflow != "scan-host" || scan.WorkflowVersion != 2 || scan.Capability != "" || len(scan.Attempts) != 2 {
			t.Fatalf("scan: %+v", scan)
		}
		for i, a := range scan.Attempts {
			child := ps[[]string{"a", "b"}[i]].InstanceID
			if a.Child != child || !a.OK || a.WorkerID != "" {
				t.Fatalf("scan attempt %d: %+v, want child %s", i, a, child)
			}
			cv := getView(t, e, child)
			want := port.ParentRef{InstanceID: id, ExecutionID: fmt.Sprintf("scan[%d]", i), Attempt: 1}
			if cv.Workflow != "scan-host" || cv.Version != 2 || cv.State != port.StateComplete || cv.Parent == nil || *cv.Parent != want {
				t.Fatalf("child %d: %s v%d %s, parent %+v", i, cv.Workflow, cv.Version, cv.State, cv.Parent)
			}
		}
		list, err := e.ListInstances(ctxOf(t), engine.ListRequest{})
		if err != nil || len(list.Instances) != 3 {
			t.Fatalf("ListInstances: %+v, %v", list, err)
		}
		for _, s := range list.Instances {
			if (s.ID == id) != (s.Parent == uuid.Nil) || (s.ID != id && s.Parent != id) {
				t.Fatalf("listed %s with parent %s", s.ID, s.Parent)
			}
		}
		h.disp.mu.Lock()
		defer h.disp.mu.Unlock()
		for _, d := range h.disp.dispatched {
			if d.Capability != "test.cap" {
				t.Fatalf("dispatched %+v to the Waggler layer", d)
			}
		}
	})
}

// The child's failure is the attempt's failure; a retry starts a new
// child (another id), whose outputs complete the task. A child task in a
// loop starts a child per iteration.
func TestChildWorkflowFailsAndRetries(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		h.registerSpec(e, "scan-host.yaml", scanHostSpec(1))
		id := h.submit(e, scanAllSpec("scan-host", "\n    retry: {max_attempts: 2, backoff: {initial: 1s, factor: 1}}"),
			map[string]any{"hosts": []any{"a"}})
		first := probes(t, h, 1)["a"]
		failWith(e, first, "host unreachable")
		h.clock.AdvanceToTimer(t, time.Minute)
		second := probes(t, h, 1)["a"]
		if second.InstanceID == first.InstanceID {
			t.Fatal("the retry ran in the same child")
		}
		answer(e, second, map[string]any{"open": []any{}})
		echo(e, h.disp.one(t, "report", 1))
		v := h.wait(e, id)
		if v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		scan := task(t, v, "scan")
		if len(scan.Attempts) != 2 || scan.Attempts[0].OK || scan.Attempts[0].Child != first.InstanceID ||
			scan.Attempts[1].Child != second.InstanceID || !scan.Attempts[1].OK {
			t.Fatalf("scan attempts: %+v", scan.Attempts)
		}
		wantErr := fmt.Sprintf(`child %s failed: task "probe" attempt 1 failed, its last (no retry left): host unreachable`, first.InstanceID)
		if scan.Attempts[0].Error != wantErr {
			t.Fatalf("the failed attempt says %q\nwant %q", scan.Attempts[0].Error, wantErr)
		}
		if cv := getView(t, e, first.InstanceID); cv.State != port.StateFailed || cv.Parent.Attempt != 1 {
			t.Fatalf("the first child: %s, %+v", cv.State, cv.Parent)
		}

		// A loop: one child per iteration, in order.
		loop := strings.Replace(scanAllSpec("scan-host@1", ""), "spread: ${{ inputs.hosts }}", "loop: {over: '${{ inputs.hosts }}'}", 1)
		loop = strings.Replace(loop, "version: 1", "version: 2", 1)
		id = h.submit(e, loop, map[string]any{"hosts": []any{"x", "y"}})
		answer(e, probes(t, h, 1)["x"], map[string]any{"open": []any{1}})
		answer(e, probes(t, h, 1)["y"], map[string]any{"open": []any{2}})
		echo(e, h.disp.one(t, "report", 1))
		v = h.wait(e, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs["open"]) != `[[1],[2]]` {
			t.Fatalf("the loop ended %s (%s): %v", v.State, v.Error, v.Outputs)
		}
		if scan := task(t, v, "scan"); scan.Iterations != 2 || scan.Attempts[1].Child == uuid.Nil || scan.Attempts[1].Index != 1 {
			t.Fatalf("loop scan: %+v", scan)
		}
	})
}

// A child workflow named without a version runs the latest version at the
// parent's submission, even when a newer one is registered before the
// child starts.
func TestChildWorkflowVersionPinnedAtSubmission(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		h.registerSpec(e, "scan-host.yaml", scanHostSpec(1))
		parent := strings.Replace(scanAllSpec("scan-host", ""), "    spread: ${{ inputs.hosts }}", "    needs: first\n    spread: ${{ inputs.hosts }}", 1)
		parent = strings.Replace(parent, "tasks:\n", "tasks:\n  first: {capability: test.cap, action: echo}\n", 1)
		id := h.submit(e, parent, map[string]any{"hosts": []any{"a"}})
		first := h.disp.one(t, "first", 1)
		h.registerSpec(e, "scan-host.yaml", scanHostSpec(2))
		echo(e, first)
		d := probes(t, h, 1)["a"]
		if cv := getView(t, e, d.InstanceID); cv.Version != 1 {
			t.Fatalf("the child runs scan-host v%d, want v1 (the latest at submission)", cv.Version)
		}
		if scan := task(t, getView(t, e, id), "scan"); scan.WorkflowVersion != 1 {
			t.Fatalf("the parent shows scan-host v%d", scan.WorkflowVersion)
		}
	})
}

// A workflow whose child workflow is not registered is refused at
// registration, and inline at submission, with the position of its
// workflow: and how to fix it; so is a with that names an input the child
// does not declare, or lacks one it requires.
func TestChildWorkflowMustBeRegistered(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	_, err := e.RegisterWorkflow(ctxOf(t), "scan-all.yaml", []byte(scanAllSpec("scan-host@2", "")))
	list := spec.AsErrorList(err)
	if len(list) != 1 {
		t.Fatalf("RegisterWorkflow = %v, want one spec error", err)
	}
	got := list[0]
	if got.File != "scan-all.yaml" || got.Line != 8 || got.Column != 15 || got.Task != "scan" || got.Field != "workflow" ||
		got.Msg != "child workflow scan-host@2 is not registered" || !strings.Contains(got.Hint, "register it first") ||
		!strings.Contains(got.Hint, "no version of scan-host is registered") {
		t.Fatalf("error: %+v", got)
	}
	_, err = e.Submit(ctxOf(t), engine.SubmitRequest{Spec: []byte(scanAllSpec("scan-host", "")), SpecFile: "inline.yaml",
		Inputs: map[string]any{"hosts": []any{}}})
	if list := spec.AsErrorList(err); len(list) != 1 || list[0].Msg != "child workflow scan-host is not registered" || list[0].Line != 8 {
		t.Fatalf("Submit = %v", err)
	}
	if _, err := e.ListWorkflows(ctxOf(t), "scan-all", 0); err != nil {
		t.Fatal(err)
	} else if got, _ := e.ListWorkflows(ctxOf(t), "scan-all", 0); len(got) != 0 {
		t.Fatalf("a refused spec was registered: %+v", got)
	}

	h.registerSpec(e, "scan-host.yaml", scanHostSpec(1))
	_, err = e.RegisterWorkflow(ctxOf(t), "scan-all.yaml", []byte(scanAllSpec("scan-host@2", "")))
	if list := spec.AsErrorList(err); len(list) != 1 || !strings.Contains(list[0].Hint, "registered versions of scan-host: 1") {
		t.Fatalf("with v1 registered: %v", err)
	}
	bad := strings.Replace(scanAllSpec("scan-host@1", ""), `with: {host: "${{ item }}"}`, `with: {hots: "${{ item }}"}`, 1)
	_, err = e.RegisterWorkflow(ctxOf(t), "scan-all.yaml", []byte(bad))
	list = spec.AsErrorList(err)
	if len(list) != 2 || list[0].Field != "with" || list[0].Line != 10 ||
		list[0].Msg != `child workflow scan-host v1 has no input "hots"` || !strings.Contains(list[0].Hint, "declares deep, host") ||
		list[1].Msg != "child workflow scan-host v1 requires the input host, which with does not give" {
		t.Fatalf("a with naming an unknown input: %v", err)
	}
	h.registerSpec(e, "scan-all.yaml", scanAllSpec("scan-host@1", ""))
}

// A workflow that runs itself as a child is refused at the depth limit:
// the deepest child's task fails with the limit named, and each level
// above fails with it.
func TestChildWorkflowDepthLimit(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ChildDepth = 2 })
		id := h.submit(e, "name: again\nversion: 1\ntasks:\n  again: {workflow: again}\n", nil)
		v := h.wait(e, id)
		const refused = `child workflow again not started: it would run 3 deep, past the child-depth limit of 2`
		if v.State != port.StateFailed || !strings.Contains(v.Error, refused) {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		list, err := e.ListInstances(ctxOf(t), engine.ListRequest{})
		if err != nil || len(list.Instances) != 3 {
			t.Fatalf("%d instances (%v), want the root and two children", len(list.Instances), err)
		}
		for _, s := range list.Instances {
			if s.State != port.StateFailed {
				t.Fatalf("%s is %s", s.ID, s.State)
			}
		}
	})
}

// An instance starts at most children-per-instance children; the attempt
// past it fails without starting one.
func TestChildrenPerInstanceLimit(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ChildrenPerInstance = 2 })
		h.registerSpec(e, "scan-host.yaml", scanHostSpec(1))
		parent := strings.Replace(scanAllSpec("scan-host", "\n    on_failure: skip"), "map(s, s.open)", "map(s, s == null ? null : s.open)", 1)
		id := h.submit(e, parent, map[string]any{"hosts": []any{"a", "b", "c"}})
		ps := probes(t, h, 2)
		answer(e, ps["a"], map[string]any{"open": []any{1}})
		answer(e, ps["b"], map[string]any{"open": []any{2}})
		echo(e, h.disp.one(t, "report", 1))
		v := h.wait(e, id)
		scan := task(t, v, "scan")
		if v.State != port.StateComplete || jsonOf(t, v.Outputs["open"]) != `[[1],[2],null]` || scan.Failed != 1 ||
			!strings.Contains(scan.Error, "this instance started 2 child workflows, the children-per-instance limit") {
			t.Fatalf("ended %s (%s): %v; scan %+v", v.State, v.Error, v.Outputs, scan)
		}
	})
}

// Cancelling the parent cancels its live children (and their attempts);
// a child attempt that times out cancels its child.
func TestChildWorkflowCancelled(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e, id, ps := h.startScans(1, "a", "b")
		if err := e.CancelInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		if v := h.wait(e, id); v.State != port.StateCancelled {
			t.Fatalf("the parent is %s", v.State)
		}
		for _, d := range ps {
			cv := h.wait(e, d.InstanceID)
			if cv.State != port.StateCancelled || !strings.Contains(cv.Error, "its parent "+id.String()+" cancelled scan[") {
				t.Fatalf("child %s: %s (%s)", d.InstanceID, cv.State, cv.Error)
			}
			h.disp.waitCancelled(t, d.AttemptKey)
		}

		id = h.submit(e, strings.Replace(scanAllSpec("scan-host", "\n    timeout: 30s"), "version: 1", "version: 2", 1),
			map[string]any{"hosts": []any{"a"}})
		d := probes(t, h, 1)["a"]
		h.clock.AdvanceToTimer(t, time.Minute)
		v := h.wait(e, id)
		if v.State != port.StateFailed || !strings.Contains(v.Error, "timed out after 30s") {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		if cv := h.wait(e, d.InstanceID); cv.State != port.StateCancelled {
			t.Fatalf("the child of the timed-out attempt is %s", cv.State)
		}
	})
}

// A leader killed mid-child: the next engine takes the parent and the
// child over, dispatches the child's attempt in flight again, does not
// start a second child, and the parent completes with the child's
// outputs. A child that finished while no engine held its parent is
// answered from the store.
func TestChildWorkflowSurvivesTakeover(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first, id, ps := h.startScans(1, "a", "b")
		answer(first, ps["a"], map[string]any{"open": []any{1}})
		h.waitResults(ps["a"].InstanceID, 1)
		first.Abandon()

		// While no engine runs, child b finishes: an engine of term 2
		// takes the instances over and completes b, then dies too.
		b := ps["b"].InstanceID
		owner := uuid.New()
		claimed := h.claimUntil(owner, 2, b)
		for _, c := range claimed {
			if c.ID == b && (c.Parent == nil || c.Parent.InstanceID != id || c.Parent.ExecutionID != "scan[1]") {
				t.Fatalf("child b claimed with parent %+v", c.Parent)
			}
		}
		out, err := h.store.CompleteInstances(ctxOf(t), []port.Completion{{InstanceID: b, Owner: owner, Status: port.StateComplete,
			Output: []byte(`{"open":[2]}`)}})
		if err != nil || out[0] != nil {
			t.Fatalf("completing child b: %v, %v", out, err)
		}

		h.disp.mu.Lock()
		h.disp.next = len(h.disp.dispatched)
		h.disp.mu.Unlock()
		third := h.start(3)
		// Child a resumes: its probe was answered and recorded, so it
		// completes; b is answered from the store.
		report := h.disp.one(t, "report", 1)
		if got := jsonOf(t, report.Input); got != `{"open":[[1],[2]]}` {
			t.Fatalf("report got %s", got)
		}
		echo(third, report)
		v := h.wait(third, id)
		if v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		list, err := third.ListInstances(ctxOf(t), engine.ListRequest{})
		if err != nil || len(list.Instances) != 3 {
			t.Fatalf("%d instances after the takeover (%v), want the parent and its two children", len(list.Instances), err)
		}
		if h.disp.pending() != 0 {
			t.Fatalf("%d more dispatches", h.disp.pending())
		}
	})
}

// A leader killed while a child's task runs: the next engine takes both
// over, dispatches the child's attempt again (marked resumed), starts no
// second child, and the child's outputs complete the parent.
func TestChildWorkflowResumesMidChild(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first, id, ps := h.startScans(1, "a")
		before := ps["a"]
		first.Abandon()

		second := h.start(2)
		again := probes(t, h, 1)["a"]
		if again.AttemptKey != before.AttemptKey || !again.Resumed {
			t.Fatalf("after the takeover: %+v, want %+v again, resumed", again.AttemptKey, before.AttemptKey)
		}
		answer(second, again, map[string]any{"open": []any{8080}})
		echo(second, h.disp.one(t, "report", 1))
		if v := h.wait(second, id); v.State != port.StateComplete || jsonOf(t, v.Outputs["open"]) != `[[8080]]` {
			t.Fatalf("ended %s (%s): %v", v.State, v.Error, v.Outputs)
		}
		list, err := second.ListInstances(ctxOf(t), engine.ListRequest{})
		if err != nil || len(list.Instances) != 2 {
			t.Fatalf("%d instances (%v), want the parent and one child", len(list.Instances), err)
		}
		if got := h.history(id); len(got) != 2 || got[0].ExecutionID != "scan[0]" || got[0].WorkerID != before.InstanceID.String() {
			t.Fatalf("the parent recorded %+v", got)
		}
	})
}

// A child whose parent finished while the child ran — the engine that
// ended the parent died before it cancelled the child — is cancelled by
// the engine that takes the child over.
func TestChildWorkflowOrphanCancelled(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first, id, ps := h.startScans(1, "a")
		child := ps["a"].InstanceID
		first.Abandon()

		owner := uuid.New()
		h.claimUntil(owner, 2, id)
		out, err := h.store.CompleteInstances(ctxOf(t), []port.Completion{{InstanceID: id, Owner: owner,
			Status: port.StateCancelled, Error: "cancelled by request"}})
		if err != nil || out[0] != nil {
			t.Fatalf("cancelling the parent: %v, %v", out, err)
		}

		third := h.start(3)
		cv := h.wait(third, child)
		if cv.State != port.StateCancelled || cv.Error != "its parent "+id.String()+" is cancelled" {
			t.Fatalf("the orphan ended %s: %q", cv.State, cv.Error)
		}
	})
}

// claimUntil claims due instances for owner under term, as a newer
// engine's claimer would, until a claim takes id; it returns that claim.
func (h *harness) claimUntil(owner uuid.UUID, term uint64, id uuid.UUID) []port.ClaimedInstance {
	h.t.Helper()
	var claimed []port.ClaimedInstance
	waitUntil(h.t, fmt.Sprintf("a claim of term %d taking %s", term, id), func() bool {
		var err error
		claimed, err = h.store.ClaimInstances(ctxOf(h.t), port.ClaimRequest{Owner: owner, Term: term, Lease: time.Hour, Limit: 100})
		if err != nil {
			h.t.Fatal(err)
		}
		return slices.ContainsFunc(claimed, func(c port.ClaimedInstance) bool { return c.ID == id })
	})
	return claimed
}
