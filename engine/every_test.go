package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// everySpec runs inventory on every node serving test.cap after first;
// after reads its output.
const everySpec = `
name: every
version: 1
tasks:
  first:
    capability: test.cap
    action: echo
  inventory:
    needs: first
    capability: test.cap
    action: exec
    on: every_node
    with: {argv: [hostname], node: "${{ item }}"}%s
  after:
    needs: inventory
    capability: test.cap
    action: echo
    with: {nodes: "${{ tasks.inventory.output.map(r, r.node) }}"}
outputs:
  all: ${{ tasks.inventory.output }}
`

func everyWorkflow(extra string) string { return fmt.Sprintf(everySpec, extra) }

// answerOn answers d with output from a worker of the node it is pinned to.
func answerOn(e *engine.Engine, d port.TaskDispatch, output any) {
	e.TaskResult(context.Background(), port.TaskResult{AttemptKey: d.AttemptKey, OK: true, Output: output,
		WorkerID: d.Node + "/test.cap/1", StartedAt: time.Unix(1, 0), FinishedAt: time.Unix(2, 0)})
}

// takeRuns takes n dispatches and returns them by execution id.
func takeRuns(t *testing.T, h *harness, n int) map[string]port.TaskDispatch {
	t.Helper()
	out := map[string]port.TaskDispatch{}
	for _, d := range h.disp.take(t, n) {
		out[d.ExecutionID] = d
	}
	return out
}

// The task asks the Dispatcher for the nodes serving its capability once,
// when it is ready, and runs once on each: "inventory[i]" pinned to the
// i-th node by name; its output lists {node, output} in node order.
func TestEveryNodeRunsOncePerNode(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		h.disp.setNodes("test.cap", "node-c", "node-a", "node-b")
		e := h.start(1)
		id := h.submit(e, everyWorkflow(""), nil)
		echo(e, h.disp.one(t, "first", 1))
		runs := takeRuns(t, h, 3)
		for i, node := range []string{"node-a", "node-b", "node-c"} {
			d, ok := runs[fmt.Sprintf("inventory[%d]", i)]
			if !ok || d.Node != node || d.Index != int32(i) {
				t.Fatalf("inventory[%d]: %+v", i, d)
			}
			if got := jsonOf(t, d.Input); got != fmt.Sprintf(`{"argv":["hostname"],"node":%q}`, node) {
				t.Fatalf("inventory[%d] input %s", i, got)
			}
		}
		for _, i := range []int{2, 0, 1} {
			d := runs[fmt.Sprintf("inventory[%d]", i)]
			answerOn(e, d, "host-"+d.Node)
		}
		after := h.disp.one(t, "after", 1)
		if after.Node != "" {
			t.Fatalf("after is pinned to %q", after.Node)
		}
		if got := jsonOf(t, after.Input); got != `{"nodes":["node-a","node-b","node-c"]}` {
			t.Fatalf("after got %s", got)
		}
		echo(e, after)
		v := h.wait(e, id)
		want := `[{"node":"node-a","output":"host-node-a"},{"node":"node-b","output":"host-node-b"},{"node":"node-c","output":"host-node-c"}]`
		if got := jsonOf(t, v.Outputs["all"]); v.State != port.StateComplete || got != want {
			t.Fatalf("ended %s: %s (%s)", v.State, got, v.Error)
		}
		if n := h.disp.nodesAsked(); n != 1 {
			t.Fatalf("nodes asked %d times", n)
		}
	})
}

// No node serving the capability fails the task before its first attempt,
// and the workflow with it under the default policy.
func TestEveryNodeWithoutNodesFails(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, everyWorkflow(""), nil)
		echo(e, h.disp.one(t, "first", 1))
		v := h.wait(e, id)
		if v.State != port.StateFailed || v.Error != `task "inventory" failed before its first attempt: no node serves test.cap` {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
	})
}

// A run that fails is retried on the same node; one that fails for good
// under on_failure: skip has a null output and the others go on.
func TestEveryNodeRetryStaysOnItsNode(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		h.disp.setNodes("test.cap", "n1", "n2")
		e := h.start(1)
		id := h.submit(e, everyWorkflow("\n    on_failure: skip\n    retry: {max_attempts: 2, backoff: {initial: 1s, factor: 1}}"), nil)
		echo(e, h.disp.one(t, "first", 1))
		runs := takeRuns(t, h, 2)
		failWith(e, runs["inventory[1]"], "node n2 left while running")
		h.clock.AdvanceToTimer(t, time.Minute)
		retry := h.disp.one(t, "inventory[1]", 2)
		if retry.Node != "n2" {
			t.Fatalf("the retry goes to %q", retry.Node)
		}
		failWith(e, retry, "node n2 left while running")
		answerOn(e, runs["inventory[0]"], "one")
		echo(e, h.disp.one(t, "after", 1))
		v := h.wait(e, id)
		if got := jsonOf(t, v.Outputs["all"]); v.State != port.StateComplete ||
			got != `[{"node":"n1","output":"one"},{"node":"n2","output":null}]` {
			t.Fatalf("ended %s: %s (%s)", v.State, got, v.Error)
		}
	})
}

// A leader killed mid-scatter: the next engine does not ask for nodes
// again (the membership changed meanwhile), keeps the node list, does not
// dispatch the recorded run again and dispatches the one in flight again,
// pinned to its node.
func TestEveryNodeResumesAfterLeaderKill(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			h := newHarnessOn(t, st.open(t))
			h.disp.setNodes("test.cap", "n1", "n2", "n3")
			first := h.start(1)
			id := h.submit(first, everyWorkflow(""), nil)
			echo(first, h.disp.one(t, "first", 1))
			runs := takeRuns(t, h, 3)
			answerOn(first, runs["inventory[1]"], "two")
			h.waitResults(id, 2)
			first.Abandon()
			h.disp.mu.Lock()
			h.disp.next = len(h.disp.dispatched)
			h.disp.mu.Unlock()
			h.disp.setNodes("test.cap", "n0", "n2") // the mesh changed
			asked := h.disp.nodesAsked()

			second := h.start(2)
			again := takeRuns(t, h, 2)
			if _, ok := again["inventory[1]"]; ok {
				t.Fatal("the recorded run was dispatched again")
			}
			for i, node := range map[int]string{0: "n1", 2: "n3"} {
				d, ok := again[fmt.Sprintf("inventory[%d]", i)]
				if !ok || d.Node != node || !d.Resumed {
					t.Fatalf("inventory[%d] after the restart: %+v", i, d)
				}
			}
			if n := h.disp.nodesAsked(); n != asked {
				t.Fatalf("the next engine asked for nodes again (%d times)", n-asked)
			}
			answerOn(second, again["inventory[2]"], "three")
			answerOn(second, again["inventory[0]"], "one")
			echo(second, h.disp.one(t, "after", 1))
			v := h.wait(second, id)
			if got := jsonOf(t, v.Outputs["all"]); v.State != port.StateComplete ||
				got != `[{"node":"n1","output":"one"},{"node":"n2","output":"two"},{"node":"n3","output":"three"}]` {
				t.Fatalf("ended %s: %s (%s)", v.State, got, v.Error)
			}
			var execs []string
			for _, r := range h.history(id) {
				execs = append(execs, r.ExecutionID)
			}
			slices.Sort(execs)
			if !slices.Equal(execs, []string{"after", "first", "inventory[0]", "inventory[1]", "inventory[2]"}) {
				t.Fatalf("recorded %v", execs)
			}
			if h.disp.pending() != 0 {
				t.Fatalf("%d more dispatches", h.disp.pending())
			}
		})
	}
}

// A run's output counts only from a worker of the node it is pinned to:
// from another node (a copy an earlier engine dispatched under another
// node list) it is a failed attempt, retried on the right node.
func TestEveryNodeOutputFromAnotherNodeFails(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		h.disp.setNodes("test.cap", "n1")
		e := h.start(1)
		id := h.submit(e, everyWorkflow("\n    retry: {max_attempts: 2, backoff: {initial: 1s, factor: 1}}"), nil)
		echo(e, h.disp.one(t, "first", 1))
		d := h.disp.one(t, "inventory[0]", 1)
		answer(e, d, "from w1") // worker "w1": not of node n1
		h.clock.AdvanceToTimer(t, time.Minute)
		retry := h.disp.one(t, "inventory[0]", 2)
		answerOn(e, retry, "from n1")
		echo(e, h.disp.one(t, "after", 1))
		v := h.wait(e, id)
		if got := jsonOf(t, v.Outputs["all"]); v.State != port.StateComplete || got != `[{"node":"n1","output":"from n1"}]` {
			t.Fatalf("ended %s: %s (%s)", v.State, got, v.Error)
		}
		tv := task(t, v, "inventory")
		if len(tv.Attempts) != 2 || tv.Attempts[0].OK || tv.Attempts[0].Error != "ran on node w1, not on node n1 it is pinned to" {
			t.Fatalf("inventory attempts: %+v", tv.Attempts)
		}
	})
}
