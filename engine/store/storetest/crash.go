package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/engine/value"
)

// crashWorkflow fans out over its input, with retries: two of the spread
// instances fail their first attempt.
const crashWorkflow = `
name: crash-safety
version: 1
inputs:
  items: {type: list}
defaults:
  retry:
    max_attempts: 3
    backoff: {initial: 1s, factor: 2, max: 30s, jitter: 0.2}
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
    with: {x: "${{ item }}"}
  total:
    needs: [work]
    capability: test.cap
    action: echo
    with: {parts: "${{ tasks.work.output }}"}
outputs:
  result: ${{ tasks.total.output }}
`

// crashInputs are the inputs of every instance of the crash test.
const crashInputs = `{"items":[10,11,12,13,14]}`

// Where a runloop can die around one completion: after the worker
// returned (the result exists only in memory), after the result was
// persisted but before the snapshot that includes it, or after both.
const (
	phaseWorkerDone = iota
	phaseResultPersisted
	phaseSnapshotPersisted
	phases
)

// RunCrashSafety drives the real execution graph (engine/graph) through the
// store, kills the runloop at every possible point of every completion, and
// lets a new owner of a newer term take over: it must hydrate (snapshot +
// latest results) and finish with the same outputs and the same recorded
// results as an uninterrupted run, and no task result may be recorded
// twice.
func RunCrashSafety(t *testing.T, newStore NewStore) {
	wf, err := spec.Compile("crash-safety.yaml", []byte(crashWorkflow), spec.Options{})
	if err != nil {
		t.Fatalf("compiling the test workflow: %v", err)
	}
	plan, err := graph.NewPlan(wf, nil, graph.Options{})
	if err != nil {
		t.Fatalf("planning the test workflow: %v", err)
	}

	// The reference: one owner, no crash.
	refOutput, refHistory, completions := runScenario(t, newStore(t), plan, -1, 0)
	if completions < 5 {
		t.Fatalf("the reference run took %d completions; the workflow is not exercising the store", completions)
	}

	for c := 1; c <= completions; c++ {
		for phase := range phases {
			t.Run(fmt.Sprintf("completion%d/phase%d", c, phase), func(t *testing.T) {
				t.Parallel()
				output, history, _ := runScenario(t, newStore(t), plan, c, phase)
				if !bytes.Equal(output, refOutput) {
					t.Fatalf("output after the crash:\n%s\nwant (uninterrupted run):\n%s", output, refOutput)
				}
				if !slices.Equal(history, refHistory) {
					t.Fatalf("recorded results after the crash:\n%s\nwant (uninterrupted run):\n%s",
						strings.Join(history, "\n"), strings.Join(refHistory, "\n"))
				}
			})
		}
	}
}

// runScenario queues one instance; a first owner runs it and dies at
// (crashAt, phase) — never if crashAt < 0 — and a second owner of a newer
// term claims it at once and finishes it. It returns the final output, the
// recorded history as sorted "execution#attempt ok output" lines (checked
// for duplicates), and how many completions the first owner handled.
func runScenario(t *testing.T, s port.Store, plan *graph.Plan, crashAt, phase int) ([]byte, []string, int) {
	t.Helper()
	ir := []byte(crashWorkflow)
	wf, err := s.RegisterWorkflow(ctx(t), port.WorkflowVersion{Name: "crash-safety", Version: 1, IRHash: hashOf(ir), IR: ir})
	if err != nil {
		t.Fatalf("RegisterWorkflow: %v", err)
	}
	id := uuid.New()
	queue(t, s, port.NewInstance{ID: id, WorkflowVersionID: wf.ID, Inputs: []byte(crashInputs)})

	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := &simRunloop{t: t, s: s, plan: plan, owner: newOwner(1), now: clock, crashAt: crashAt, crashPhase: phase}
	finished := first.run()
	if !finished {
		if crashAt < 0 {
			t.Fatalf("the uninterrupted run did not finish")
		}
		// The dead owner never comes back; a new leader takes over at once.
		second := &simRunloop{t: t, s: s, plan: plan, owner: newOwner(2), now: first.now, crashAt: -1}
		if !second.run() {
			t.Fatalf("the new owner did not finish the instance")
		}
		// A result persisted without the snapshot that includes it must
		// reach the new owner through hydration, not by running the task
		// again.
		if phase == phaseResultPersisted && second.hydrated == 0 {
			t.Fatalf("the new owner ran again a task whose result was recorded")
		}
	} else if crashAt >= 0 {
		t.Fatalf("the first owner finished before its crash point (completion %d)", crashAt)
	}

	rec := get(t, s, id)
	if rec.Status != port.StateComplete {
		t.Fatalf("instance ended %s (%s), want complete", rec.Status, rec.Error)
	}
	var lines []string
	seen := make(map[string]bool)
	for _, r := range history(t, s, id) {
		key := fmt.Sprintf("%s#%d", r.ExecutionID, r.Attempt)
		if seen[key] {
			t.Fatalf("result %s recorded twice", key)
		}
		seen[key] = true
		lines = append(lines, fmt.Sprintf("%s ok=%v %s%s", key, r.OK, r.Output, r.Error))
	}
	slices.Sort(lines)
	return rec.Output, lines, first.completions
}

// simRunloop is the smallest runloop that exercises the store the way the
// engine does: claim, hydrate (Restore + Resume, answering re-dispatches
// from recorded results), run tasks with a deterministic fake worker,
// persist results then the snapshot, complete. Time is simulated: timers
// fire by advancing the clock to them.
type simRunloop struct {
	t     *testing.T
	s     port.Store
	plan  *graph.Plan
	owner owner
	now   time.Time

	crashAt, crashPhase int // die at this completion and phase; crashAt < 0: never
	completions         int
	hydrated            int // dispatches answered from recorded results
}

type resultKey struct {
	execution string
	attempt   uint32
}

// run claims the instance and drives it; false means it crashed.
func (r *simRunloop) run() bool {
	t := r.t
	claimed := r.owner.claimAll(t, r.s, longLease)
	if len(claimed) != 1 {
		t.Fatalf("owner of term %d claimed %d instances, want 1", r.owner.term, len(claimed))
	}
	c := claimed[0]
	recorded := make(map[resultKey]port.ActionResult, len(c.Results))
	for _, res := range c.Results {
		recorded[resultKey{res.ExecutionID, res.Attempt}] = res
	}

	var (
		g       *graph.Graph
		effects []graph.Effect
		err     error
	)
	if len(c.State) == 0 {
		g = r.plan.NewGraph(c.ID.String())
		inputs, derr := value.Decode(c.Inputs)
		if derr != nil {
			t.Fatalf("decoding inputs: %v", derr)
		}
		effects, err = g.Start(inputs.(map[string]any), r.now)
		effects = slices.Clone(effects) // the graph reuses its buffer on the next call
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		r.persist(c.ID, nil, g)
	} else {
		if g, err = r.plan.Restore(c.ID.String(), c.State); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		effects = slices.Clone(g.Resume(r.now))
	}

	var timers []graph.Timer
	for {
		for len(effects) > 0 {
			e := effects[0]
			effects = effects[1:]
			switch e.Kind {
			case graph.Dispatch:
				execution := executionID(r.plan, e.Task)
				res, fromStore := recorded[resultKey{execution, e.Attempt}]
				if fromStore {
					r.hydrated++
				} else {
					res = fakeWorker(c.ID, execution, e.Attempt, e.Input, r.now)
				}
				r.completions++
				if r.crash(phaseWorkerDone) {
					return false
				}
				if !fromStore {
					r.persist(c.ID, []port.ActionResult{res}, nil)
				}
				if r.crash(phaseResultPersisted) {
					return false
				}
				more := slices.Clone(g.Complete(e.Task, e.Attempt, graphResult(t, res), r.now))
				r.persist(c.ID, nil, g)
				if r.crash(phaseSnapshotPersisted) {
					return false
				}
				effects = append(effects, more...)
			case graph.SetTimer:
				timers = append(timers, e.Timer)
			case graph.Cancel:
				// Nothing runs in the background here.
			case graph.Finished:
				r.complete(c.ID, e.State, g)
				return true
			}
		}
		if len(timers) == 0 {
			t.Fatalf("instance %s is stuck in %s with nothing to do", c.ID, g.State())
		}
		slices.SortFunc(timers, func(a, b graph.Timer) int { return a.At.Compare(b.At) })
		next := timers[0]
		timers = timers[1:]
		if next.At.After(r.now) {
			r.now = next.At
		}
		effects = slices.Clone(g.Fire(next, r.now))
	}
}

func (r *simRunloop) crash(phase int) bool {
	return r.completions == r.crashAt && phase == r.crashPhase
}

// persist writes results and/or the snapshot of g under the lease.
func (r *simRunloop) persist(id uuid.UUID, results []port.ActionResult, g *graph.Graph) {
	p := port.Progress{InstanceID: id, Results: results}
	if g != nil {
		snap, err := g.Snapshot()
		if err != nil {
			r.t.Fatalf("Snapshot: %v", err)
		}
		p.State = snap
	}
	r.owner.mustPersist(r.t, r.s, p)
}

// complete records the finished instance.
func (r *simRunloop) complete(id uuid.UUID, state graph.State, g *graph.Graph) {
	t := r.t
	c := port.Completion{InstanceID: id, Status: port.StateComplete}
	switch state {
	case graph.Complete:
		out, err := value.Encode(g.Outputs())
		if err != nil {
			t.Fatalf("encoding outputs: %v", err)
		}
		c.Output = out
	case graph.Failed:
		c.Status, c.Error = port.StateFailed, g.Err().Error()
	default:
		c.Status, c.Error = port.StateCancelled, "cancelled"
	}
	snap, err := g.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	c.State = snap
	if err := r.owner.complete(t, r.s, c); err != nil {
		t.Fatalf("CompleteInstances: %v", err)
	}
}

// executionID is the store's name of a task or spread instance: stable
// within the instance, without the attempt ("work[3]").
func executionID(p *graph.Plan, ref graph.TaskRef) string {
	name := p.Task(ref.Node).GetName()
	if ref.Index >= 0 {
		return fmt.Sprintf("%s[%d]", name, ref.Index)
	}
	return name
}

// fakeWorker runs a task deterministically: it echoes its input, except
// that work[1] and work[3] fail their first attempt.
func fakeWorker(instance uuid.UUID, execution string, attempt uint32, input any, now time.Time) port.ActionResult {
	res := port.ActionResult{InstanceID: instance, ExecutionID: execution, Attempt: attempt, WorkerID: "fake",
		StartedAt: now, FinishedAt: now}
	if attempt == 1 && (execution == "work[1]" || execution == "work[3]") {
		res.Error = "flaky worker"
		return res
	}
	out, err := value.Encode(input)
	if err != nil {
		res.Error = "encoding output: " + err.Error()
		return res
	}
	res.OK, res.Output = true, out
	return res
}

// graphResult turns a recorded result into a graph completion.
func graphResult(t *testing.T, r port.ActionResult) graph.Result {
	t.Helper()
	if !r.OK {
		return graph.Result{Err: errors.New(r.Error)}
	}
	out, err := value.Decode(r.Output)
	if err != nil {
		t.Fatalf("decoding the output of %s#%d: %v", r.ExecutionID, r.Attempt, err)
	}
	return graph.Result{Output: out}
}
