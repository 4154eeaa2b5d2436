package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

const chainSpec = `
name: chain
version: 1
inputs:
  x: {type: int}
tasks:
  a:
    capability: test.cap
    action: echo
    with: {v: "${{ inputs.x + 1 }}"}
  b:
    needs: [a]
    capability: test.cap
    action: echo
    with: {v: "${{ tasks.a.output.v * 2 }}"}
  c:
    needs: [b]
    capability: test.cap
    action: echo
    with: {v: "${{ tasks.b.output.v + 1 }}"}
outputs:
  result: ${{ tasks.c.output.v }}
`

func TestChainPassesData(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})

	a := h.disp.one(t, "a", 1)
	if got := jsonOf(t, a.Input); got != `{"v":2}` {
		t.Fatalf("a got %s", got)
	}
	if a.Capability != "test.cap" || a.Action != "echo" || a.Workflow != "chain" || a.Task != "a" || a.Index != -1 {
		t.Fatalf("dispatch of a: %+v", a)
	}
	echo(e, a)
	b := h.disp.one(t, "b", 1)
	if got := jsonOf(t, b.Input); got != `{"v":4}` {
		t.Fatalf("b got %s", got)
	}
	echo(e, b)
	echo(e, h.disp.one(t, "c", 1))

	v := h.wait(e, id)
	if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"result":5}` {
		t.Fatalf("instance ended %s with %v (%s)", v.State, v.Outputs, v.Error)
	}
	var names []string
	for _, tv := range v.Tasks {
		names = append(names, tv.Name)
		if tv.Status != graph.TaskCompleted || tv.Attempt != 1 {
			t.Errorf("task %s: %s attempt %d", tv.Name, tv.Status, tv.Attempt)
		}
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("tasks in order %v, want a,b,c", names)
	}
	if n := len(h.history(id)); n != 3 {
		t.Fatalf("%d results recorded, want 3", n)
	}
}

func TestParallelBranchesJoined(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: join
version: 1
tasks:
  left:  {capability: test.cap, action: echo, with: {v: 20}}
  right: {capability: test.cap, action: echo, with: {v: 22}}
  join:
    needs: [left, right]
    capability: test.cap
    action: echo
    with: {sum: "${{ tasks.left.output.v + tasks.right.output.v }}"}
outputs:
  sum: ${{ tasks.join.output.sum }}
`, nil)
	both := h.disp.take(t, 2) // dispatched together, before either answers
	if both[0].ExecutionID != "left" || both[1].ExecutionID != "right" {
		t.Fatalf("dispatched %s and %s", both[0].ExecutionID, both[1].ExecutionID)
	}
	echo(e, both[1])
	echo(e, both[0])
	join := h.disp.one(t, "join", 1)
	if got := jsonOf(t, join.Input); got != `{"sum":42}` {
		t.Fatalf("join got %s", got)
	}
	echo(e, join)
	if v := h.wait(e, id); jsonOf(t, v.Outputs) != `{"sum":42}` {
		t.Fatalf("outputs %v", v.Outputs)
	}
}

const spreadSpec = `
name: spread
version: 1
inputs:
  items: {type: list}
tasks:
  prepare:
    capability: test.cap
    action: echo
    with: {items: "${{ inputs.items }}"}
  work:
    needs: [prepare]
    spread: ${{ tasks.prepare.output.items }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}", i: "${{ index }}"}
  total:
    needs: [work]
    capability: test.cap
    action: echo
    with: {parts: "${{ tasks.work.output }}"}
outputs:
  parts: ${{ tasks.total.output.parts }}
`

func TestSpreadKeepsOrder(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, spreadSpec, map[string]any{"items": []any{"a", "b", "c", "d", "e"}})
	echo(e, h.disp.one(t, "prepare", 1))
	work := h.disp.take(t, 5)
	for i := len(work) - 1; i >= 0; i-- { // answer in reverse order
		d := work[i]
		if d.Task != "work" || d.Index != int32(i) {
			t.Fatalf("dispatch %d is %s[%d]", i, d.Task, d.Index)
		}
		in := d.Input.(map[string]any)
		answer(e, d, strings.ToUpper(in["x"].(string)))
	}
	echo(e, h.disp.one(t, "total", 1))
	v := h.wait(e, id)
	if got := jsonOf(t, v.Outputs); got != `{"parts":["A","B","C","D","E"]}` {
		t.Fatalf("outputs %s", got)
	}
	if w := task(t, v, "work"); w.Width != 5 || w.Done != 5 || w.Failed != 0 || w.Status != graph.TaskCompleted {
		t.Fatalf("work view: %+v", w)
	}
}

func TestEmptySpread(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, spreadSpec, map[string]any{"items": []any{}})
	echo(e, h.disp.one(t, "prepare", 1))
	total := h.disp.one(t, "total", 1) // nothing for work
	if got := jsonOf(t, total.Input); got != `{"parts":[]}` {
		t.Fatalf("total got %s", got)
	}
	echo(e, total)
	v := h.wait(e, id)
	if got := jsonOf(t, v.Outputs); got != `{"parts":[]}` {
		t.Fatalf("outputs %s", got)
	}
	if w := task(t, v, "work"); w.Width != 0 || w.Status != graph.TaskCompleted {
		t.Fatalf("work view: %+v", w)
	}
}

func TestGuardsPickOneBranch(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: guards
version: 1
tasks:
  route: {capability: test.cap, action: echo, with: {kind: b}}
  use_a:
    needs: [route]
    when: ${{ tasks.route.output.kind == "a" }}
    capability: test.cap
    action: echo
    with: {branch: a}
  after_a:
    needs: [use_a]
    capability: test.cap
    action: echo
    with: {after: "${{ tasks.use_a.output }}"}
  use_b:
    needs: [route]
    when: ${{ tasks.route.output.kind == "b" }}
    capability: test.cap
    action: echo
    with: {branch: b}
  final:
    needs: [after_a, use_b]
    capability: test.cap
    action: echo
    with: {a: "${{ tasks.after_a.output }}", b: "${{ tasks.use_b.output.branch }}"}
outputs:
  final: ${{ tasks.final.output }}
`, nil)
	echo(e, h.disp.one(t, "route", 1))
	echo(e, h.disp.one(t, "use_b", 1))
	echo(e, h.disp.one(t, "final", 1))
	v := h.wait(e, id)
	if got := jsonOf(t, v.Outputs); got != `{"final":{"a":null,"b":"b"}}` {
		t.Fatalf("outputs %s", got)
	}
	for name, want := range map[string]graph.TaskStatus{"use_a": graph.TaskSkipped, "after_a": graph.TaskSkipped,
		"use_b": graph.TaskCompleted, "final": graph.TaskCompleted} {
		if got := task(t, v, name).Status; got != want {
			t.Errorf("%s is %s, want %s", name, got, want)
		}
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d unexpected dispatches", n)
	}
}

const retrySpec = `
name: retry
version: 1
tasks:
  flaky:
    capability: test.cap
    action: echo
    on_failure: %s
    retry: {max_attempts: %d, backoff: {initial: 1s, factor: 2}}
    with: {n: 1}
  after:
    needs: [flaky]
    capability: test.cap
    action: echo
    with: {got: "${{ tasks.flaky.output }}"}
outputs:
  got: ${{ tasks.after.output.got }}
`

func retryWorkflow(policy string, attempts int) string {
	return strings.Replace(strings.Replace(retrySpec, "%s", policy, 1), "%d", string(rune('0'+attempts)), 1)
}

func TestRetrySucceedsOnThirdAttempt(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, retryWorkflow("retry", 3), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom 1")
	if d := h.clock.WaitTimer(t, 5*time.Second); d != time.Second {
		t.Fatalf("first retry after %s, want 1s", d)
	}
	h.clock.Advance(time.Second)
	failWith(e, h.disp.one(t, "flaky", 2), "boom 2")
	if d := h.clock.WaitTimer(t, 5*time.Second); d != 2*time.Second {
		t.Fatalf("second retry after %s, want 2s", d)
	}
	h.clock.Advance(2 * time.Second)
	answer(e, h.disp.one(t, "flaky", 3), "third time lucky")
	echo(e, h.disp.one(t, "after", 1))
	v := h.wait(e, id)
	if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"got":"third time lucky"}` {
		t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
	}
	if tv := task(t, v, "flaky"); tv.Attempt != 3 || tv.MaxAttempts != 3 {
		t.Fatalf("flaky view: %+v", tv)
	}
	hist := h.history(id)
	if len(hist) != 4 || hist[0].OK || hist[1].OK || !hist[2].OK || hist[0].Error != "boom 1" {
		t.Fatalf("history: %+v", hist)
	}
}

func TestRetriesExhaustedUnderSkip(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, retryWorkflow("skip", 2), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom 1")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	failWith(e, h.disp.one(t, "flaky", 2), "boom 2")
	after := h.disp.one(t, "after", 1) // runs with a null output
	if got := jsonOf(t, after.Input); got != `{"got":null}` {
		t.Fatalf("after got %s", got)
	}
	echo(e, after)
	v := h.wait(e, id)
	if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"got":null}` {
		t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
	}
	if tv := task(t, v, "flaky"); tv.Status != graph.TaskFailed || tv.Error != "boom 2" || tv.Attempt != 2 {
		t.Fatalf("flaky view: %+v", tv)
	}
}

func TestRetriesExhaustedUnderRetry(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, retryWorkflow("retry", 2), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom 1")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	failWith(e, h.disp.one(t, "flaky", 2), "boom 2")
	v := h.wait(e, id)
	if v.State != port.StateFailed || !strings.Contains(v.Error, `task "flaky" attempt 2`) || !strings.Contains(v.Error, "boom 2") {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d unexpected dispatches", n)
	}
}

func TestAbortCancelsRunningSiblings(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: abort
version: 1
tasks:
  must: {capability: test.cap, action: echo, on_failure: abort, with: {}}
  slow: {capability: test.cap, action: sleep, with: {}}
  wide:
    spread: ${{ [1, 2] }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}"}
`, nil)
	ds := h.disp.take(t, 4) // must, slow, wide[0], wide[1]
	if ds[0].ExecutionID != "must" {
		t.Fatalf("dispatches %v", ds)
	}
	failWith(e, ds[0], "precondition failed")
	h.disp.waitCancelled(t, ds[1].AttemptKey, ds[2].AttemptKey, ds[3].AttemptKey)
	v := h.wait(e, id)
	if v.State != port.StateFailed || !strings.Contains(v.Error, "precondition failed") {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
	if st := task(t, v, "slow").Status; st != graph.TaskCancelled {
		t.Fatalf("slow is %s", st)
	}
	// A result that arrives for a cancelled attempt is ignored.
	echo(e, ds[1])
	waitUntil(t, "the late result to be ignored", func() bool { return e.Stats().ResultsIgnored == 1 })
}

func TestTaskTimeout(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: timeout
version: 1
tasks:
  slow: {capability: test.cap, action: sleep, timeout: 2s, with: {}}
`, nil)
	d := h.disp.one(t, "slow", 1)
	if d.Timeout != 2*time.Second {
		t.Fatalf("dispatch timeout %s", d.Timeout)
	}
	if ahead := h.clock.WaitTimer(t, 5*time.Second); ahead != 2*time.Second {
		t.Fatalf("timeout timer in %s", ahead)
	}
	h.clock.Advance(2 * time.Second)
	h.disp.waitCancelled(t, d.AttemptKey)
	v := h.wait(e, id)
	if v.State != port.StateFailed || !strings.Contains(v.Error, "timed out after 2s") {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
	// The timeout is recorded as the attempt's result.
	hist := h.history(id)
	if len(hist) != 1 || hist[0].OK || hist[0].Error != "timed out after 2s" {
		t.Fatalf("history %+v", hist)
	}
}

func TestWorkflowDeadline(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	res, err := e.Submit(ctxOf(t), engine.SubmitRequest{Spec: []byte(chainSpec), Inputs: map[string]any{"x": 1}, Deadline: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	echo(e, h.disp.one(t, "a", 1))
	b := h.disp.one(t, "b", 1)
	if ahead := h.clock.WaitTimer(t, time.Minute); ahead != 10*time.Second {
		t.Fatalf("deadline timer in %s", ahead)
	}
	h.clock.Advance(10 * time.Second)
	h.disp.waitCancelled(t, b.AttemptKey)
	v := h.wait(e, res.InstanceID)
	if v.State != port.StateFailed || v.Error != "deadline exceeded after 10s" {
		t.Fatalf("ended %s: %q", v.State, v.Error)
	}
}

func TestCancelRunningInstance(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	if err := e.CancelInstance(ctxOf(t), id); err != nil {
		t.Fatalf("CancelInstance: %v", err)
	}
	h.disp.waitCancelled(t, a.AttemptKey)
	v := h.wait(e, id)
	if v.State != port.StateCancelled || !v.CancelRequested {
		t.Fatalf("ended %s (cancel requested %v)", v.State, v.CancelRequested)
	}
	if err := e.CancelInstance(ctxOf(t), id); !errors.Is(err, engine.ErrInstanceFinished) {
		t.Fatalf("cancelling a finished instance: %v, want ErrInstanceFinished", err)
	}
	if err := e.CancelInstance(ctxOf(t), [16]byte{1}); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("cancelling an unknown instance: %v, want ErrNotFound", err)
	}
}

func TestCancelQueuedInstance(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) { c.MaxInstances = 1 })
	first := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	queued := h.submit(e, chainSpec, map[string]any{"x": 2})
	v, err := e.GetInstance(ctxOf(t), queued)
	if err != nil || v.State != port.StatePending {
		t.Fatalf("second instance: %s, %v (memory holds one)", v.State, err)
	}
	if err := e.CancelInstance(ctxOf(t), queued); err != nil {
		t.Fatalf("CancelInstance: %v", err)
	}
	if v, _ := e.GetInstance(ctxOf(t), queued); v.State != port.StatePending || !v.CancelRequested {
		t.Fatalf("queued instance after cancel: %s, requested %v", v.State, v.CancelRequested)
	}
	// Once room frees up, the queued instance is claimed and cancelled
	// without running anything.
	echo(e, a)
	echo(e, h.disp.one(t, "b", 1))
	echo(e, h.disp.one(t, "c", 1))
	h.wait(e, first)
	if v := h.wait(e, queued); v.State != port.StateCancelled {
		t.Fatalf("queued instance ended %s", v.State)
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("the cancelled instance dispatched %d attempts", n)
	}
}

func TestIdempotentResubmission(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	req := engine.SubmitRequest{Spec: []byte(chainSpec), Inputs: map[string]any{"x": 1}, IdempotencyKey: "order-42"}
	first, err := e.Submit(ctxOf(t), req)
	if err != nil || first.Existing {
		t.Fatalf("first submission: %+v, %v", first, err)
	}
	again, err := e.Submit(ctxOf(t), req)
	if err != nil || !again.Existing || again.InstanceID != first.InstanceID {
		t.Fatalf("resubmission: %+v, %v; want the instance %s", again, err, first.InstanceID)
	}
	h.disp.one(t, "a", 1)
	list, err := e.ListInstances(ctxOf(t), engine.ListRequest{})
	if err != nil || len(list.Instances) != 1 {
		t.Fatalf("ListInstances: %+v, %v", list, err)
	}
}

func TestBadInputsRejected(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	for name, inputs := range map[string]map[string]any{
		"missing":  nil,
		"mistyped": {"x": "one"},
		"unknown":  {"x": 1, "y": 2},
	} {
		_, err := e.Submit(ctxOf(t), engine.SubmitRequest{Spec: []byte(chainSpec), Inputs: inputs})
		if !errors.Is(err, graph.ErrInvalidInput) {
			t.Errorf("%s: %v, want graph.ErrInvalidInput", name, err)
		}
	}
	for name, req := range map[string]engine.SubmitRequest{
		"both":     {Name: "chain", Spec: []byte(chainSpec)},
		"neither":  {},
		"deadline": {Spec: []byte(chainSpec), Inputs: map[string]any{"x": 1}, Deadline: -time.Second},
	} {
		if _, err := e.Submit(ctxOf(t), req); !errors.Is(err, port.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := e.Submit(ctxOf(t), engine.SubmitRequest{Name: "nope"}); !errors.Is(err, port.ErrNotFound) {
		t.Errorf("unknown workflow: %v, want ErrNotFound", err)
	}
	list, err := e.ListInstances(ctxOf(t), engine.ListRequest{})
	if err != nil || len(list.Instances) != 0 {
		t.Fatalf("something was queued: %+v, %v", list, err)
	}
	// Not even the inline spec's workflow version was registered.
	if wfs, err := e.ListWorkflows(ctxOf(t), "", 0); err != nil || len(wfs) != 0 {
		t.Fatalf("a workflow version was registered: %+v, %v", wfs, err)
	}
}
