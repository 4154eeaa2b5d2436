package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/spec"
)

// testPlan compiles a workflow spec into its plan, default limits.
func testPlan(t *testing.T, src string) *graph.Plan {
	t.Helper()
	wf, err := spec.Compile("test.yaml", []byte(src), spec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := expr.NewEnv(expr.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := graph.NewPlan(wf, env, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// oneTaskSpec is a workflow of one task, a, whose output is accepted when
// its score is 1 or more.
const oneTaskSpec = `
name: one
version: 1
tasks:
  a:
    capability: test.cap
    action: echo
    accept: ${{ output.score >= 1 }}
`

// storedGraph rebuilds a graph from an instance's envelope: a fresh one
// before any snapshot, the snapshot restored after; at the envelope's
// depth either way; a snapshot that does not restore is Restore's error.
func TestStoredGraph(t *testing.T) {
	plan := testPlan(t, oneTaskSpec)
	g, err := storedGraph(plan, "i1", instanceState{depth: 2})
	if err != nil || g.State() != graph.Pending || g.Depth() != 2 {
		t.Fatalf("fresh: %v, %v at depth %d; want PENDING at depth 2", err, g.State(), g.Depth())
	}

	running := plan.NewGraph("i1")
	if _, err := running.Start(nil, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	snap, err := running.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err = storedGraph(plan, "i1", instanceState{graph: snap, depth: 1})
	if err != nil || g.State() != running.State() || g.Depth() != 1 {
		t.Fatalf("restored: %v, %v at depth %d; want %v at depth 1", err, g.State(), g.Depth(), running.State())
	}
	if st := g.Task(graph.Ref(0)).Status; st != graph.TaskRunning {
		t.Fatalf("restored task a is %v, want running", st)
	}

	if _, err := storedGraph(plan, "i2", instanceState{graph: snap}); !errors.Is(err, graph.ErrBadSnapshot) {
		t.Fatalf("another instance's snapshot: %v, want ErrBadSnapshot", err)
	}
}
