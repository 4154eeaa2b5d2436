package graph

import (
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

func everyNode() taskOpt {
	return func(t *robonetv1.Task) { t.On = robonetv1.TaskOn_TASK_ON_EVERY_NODE }
}

// inventory runs on every node after a, reading item (the node's name) and
// index; z reads its output.
func inventory(opts ...taskOpt) *robonetv1.Workflow {
	opts = append([]taskOpt{needs("a"), everyNode(), with(tmap("node", ex("item"), "i", ex("index")))}, opts...)
	return newWorkflow(tasks(
		newTask("a"),
		newTask("inventory", opts...),
		newTask("z", needs("inventory"), with(ex("tasks.inventory.output"))),
	), output("nodes", ex("tasks.inventory.output.map(r, r.node)")))
}

func (h *harness) scatter(name string, nodes ...string) []string {
	h.t.Helper()
	return formatEffects(h.p, h.g.Scatter(h.ref(name, -1), nodes, h.now))
}

// The task asks for its nodes when ready, then runs once per node in name
// order (duplicates dropped); its output is {node, output} per node in
// that order, whatever order the runs complete in.
func TestEveryNode(t *testing.T) {
	h := newHarness(t, inventory(), Options{})
	expect(t, h.start(nil), `dispatch a#1 null`)
	expect(t, h.done("a", -1, 1, 1), `scatter inventory`)
	if info := h.g.Task(h.ref("inventory", -1)); info.Status != TaskSpreading || info.Width != 0 {
		t.Fatalf("inventory waiting for its nodes: %+v", info)
	}
	expect(t, h.scatter("inventory", "node-c", "node-a", "node-b", "node-a"),
		`dispatch inventory[0]#1 {"i":0,"node":"node-a"}`,
		`dispatch inventory[1]#1 {"i":1,"node":"node-b"}`,
		`dispatch inventory[2]#1 {"i":2,"node":"node-c"}`)
	expect(t, h.scatter("inventory", "node-d")) // stale: the list is decided
	if n, ok := h.g.NodeOf(h.ref("inventory", 2)); !ok || n != "node-c" {
		t.Fatalf("NodeOf(inventory[2]) = %q, %v", n, ok)
	}
	expect(t, h.done("inventory", 2, 1, "c"))
	expect(t, h.done("inventory", 0, 1, "a"))
	expect(t, h.done("inventory", 1, 1, "b"),
		`dispatch z#1 [{"node":"node-a","output":"a"},{"node":"node-b","output":"b"},{"node":"node-c","output":"c"}]`)
	expect(t, h.done("z", -1, 1, nil), `finished COMPLETE`)
	h.outputs(`{"nodes":["node-a","node-b","node-c"]}`)
}

// No node serving the capability fails the task before its first attempt,
// under its failure policy: the workflow fails under retry, and the
// dependents get null under skip.
func TestEveryNodeNoNode(t *testing.T) {
	h := newHarness(t, inventory(), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	expect(t, h.scatter("inventory"), `finished FAILED`)
	if got := h.g.Err().Error(); got != `task "inventory" failed before its first attempt: no node serves test.cap` {
		t.Fatalf("err = %s", got)
	}

	h = newHarness(t, inventory(onFailure(policySkip)), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	expect(t, h.scatter("inventory"), `dispatch z#1 null`)
}

// A failed run is retried on its own (the engine pins the retry to the
// same node); under skip a run that fails for good has a null output and
// the others complete; under retry it fails the workflow.
func TestEveryNodeRunFails(t *testing.T) {
	h := newHarness(t, inventory(retry(2, time.Second, 1, 0, 0), onFailure(policySkip)), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	h.scatter("inventory", "n1", "n2")
	expect(t, h.failed("inventory", 1, 1, "node n2 left while running"), `retry inventory[1]#1 @1s`)
	expect(t, h.fire(Retry, "inventory", 1, 1, time.Second), `dispatch inventory[1]#2 {"i":1,"node":"n2"}`)
	expect(t, h.failed("inventory", 1, 2, "node n2 left while running"))
	expect(t, h.done("inventory", 0, 1, "one"),
		`dispatch z#1 [{"node":"n1","output":"one"},{"node":"n2","output":null}]`)

	h = newHarness(t, inventory(), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	h.scatter("inventory", "n1", "n2")
	expect(t, h.failed("inventory", 0, 1, "node n1 left while running"), `cancel inventory[1]#1`, `finished FAILED`)
}

// The node list is part of the snapshot: a restored graph never asks for
// it again, re-dispatches the runs in flight to their nodes and completes
// with the same output; one restored while it waits for its list asks
// again on Resume.
func TestEveryNodeSnapshotRestore(t *testing.T) {
	h := newHarness(t, inventory(), Options{})
	restore := func() []string {
		t.Helper()
		return formatEffects(h.p, h.restored().Resume(h.now))
	}
	h.start(nil)
	h.done("a", -1, 1, 1)
	expect(t, restore(), `scatter inventory`) // waiting for its nodes
	h.scatter("inventory", "n2", "n1")
	expect(t, restore(), `dispatch inventory[0]#1 {"i":0,"node":"n1"}`, `dispatch inventory[1]#1 {"i":1,"node":"n2"}`)
	expect(t, h.done("inventory", 1, 1, "two"))
	expect(t, restore(), `dispatch inventory[0]#1 {"i":0,"node":"n1"}`)
	if n, ok := h.g.NodeOf(h.ref("inventory", 1)); !ok || n != "n2" {
		t.Fatalf("NodeOf(inventory[1]) after restore = %q, %v", n, ok)
	}
	expect(t, h.done("inventory", 0, 1, "one"),
		`dispatch z#1 [{"node":"n1","output":"one"},{"node":"n2","output":"two"}]`)
	expect(t, restore(), `dispatch z#1 [{"node":"n1","output":"one"},{"node":"n2","output":"two"}]`)
	if info := h.g.Task(h.ref("inventory", 0)); info.Status != TaskCompleted || info.Output != "one" {
		t.Fatalf("inventory[0] after restore: %+v", info)
	}
	got := value.MustEncode(h.g.Task(h.ref("inventory", -1)).Output)
	if string(got) != `[{"node":"n1","output":"one"},{"node":"n2","output":"two"}]` {
		t.Fatalf("inventory output after restore: %s", got)
	}
	expect(t, h.done("z", -1, 1, nil), `finished COMPLETE`)
	h.outputs(`{"nodes":["n1","n2"]}`)
	restore()
}

// Cancelling an instance whose task waits for its nodes, or runs on them,
// cancels what is in flight.
func TestEveryNodeCancel(t *testing.T) {
	h := newHarness(t, inventory(), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	expect(t, formatEffects(h.p, h.g.Cancel(h.now)), `finished CANCELLED`)
	if _, err := h.g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	h = newHarness(t, inventory(), Options{})
	h.start(nil)
	h.done("a", -1, 1, 1)
	h.scatter("inventory", "n1")
	expect(t, formatEffects(h.p, h.g.Cancel(h.now)), `cancel inventory[0]#1`, `finished CANCELLED`)
}

// A plan refuses on: every_node with spread or loop.
func TestEveryNodePlanErrors(t *testing.T) {
	for _, opt := range []taskOpt{spreadOver("[1]"), loopOver("[1]", 0)} {
		wf := newWorkflow(tasks(newTask("x", everyNode(), opt)))
		if _, err := NewPlan(wf, testEnv, Options{}); err == nil {
			t.Fatal("NewPlan accepted on: every_node with spread or loop")
		}
	}
}
