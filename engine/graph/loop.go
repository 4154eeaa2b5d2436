package graph

import (
	"fmt"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

// Loops. A loop task is the head of its iterations: iteration i is the
// execution TaskRef{Node, Index: i} ("task#i"), dispatched only once
// iteration i-1 completed (and, with loop.every, its pause ran out), each
// with its own attempts, retries and timeout. An iteration's completion
// touches the loop head alone, O(1): it appends the output, evaluates
// until, and dispatches (or sets the pause timer of) the next iteration.
// Only when the loop ends does the task resolve, and its successors hear
// of it, as of any task.
//
// The loop state is the list of outputs so far plus the status of the
// current iteration, so replaying the recorded results in order rebuilds
// it: iteration i+1 is dispatched only by the completion of iteration i.

// unitScope points the scope at ref, for its with or accept: a task, a
// spread instance (item, index) or a loop iteration (item in a loop over a
// list, iteration, previous).
func (g *Graph) unitScope(ref TaskRef) {
	g.sc.reset(g.cutoffOf(ref.Node))
	if ref.Index < 0 {
		return
	}
	if g.ns[ref.Node].loop {
		lp := g.loops[ref.Node]
		i := int(ref.Index)
		g.sc.iteration = int64(i)
		if lp.items != nil {
			g.sc.item = lp.items[i]
		}
		if i > 0 {
			g.sc.previous = lp.outputs[i-1]
		}
		return
	}
	g.sc.item, g.sc.index = g.spreads[ref.Node].items[ref.Index], int64(ref.Index)
}

// pausing reports whether ref is the next iteration of a running loop,
// waiting for its pause (loop.every) to end.
func (g *Graph) pausing(ref TaskRef) bool {
	if !g.state.active() || ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) || !g.ns[ref.Node].loop ||
		g.ns[ref.Node].status != TaskLooping {
		return false
	}
	lp := g.loops[ref.Node]
	return int(ref.Index) == len(lp.outputs) && lp.status == TaskWaiting
}

// startLoop starts a ready loop task: a loop over a list evaluates its list
// (once: it is kept for every iteration), then iteration 0 is dispatched.
func (g *Graph) startLoop(node int32, now time.Time) {
	nd := &g.plan.nodes[node]
	lp := &loopState{}
	if over := nd.loop.over; over != nil {
		v, err := over.Eval(&g.sc)
		if err != nil {
			g.taskFailed(node, "loop.over: "+err.Error())
			return
		}
		items, ok := v.([]any)
		if !ok {
			g.taskFailed(node, "loop.over: must be a list, got "+value.TypeName(v))
			return
		}
		if limit, what := nd.loop.limit(g.plan.opts); len(items) > limit {
			g.taskFailed(node, fmt.Sprintf("loop.over: %d items, more than %s", len(items), what))
			return
		}
		if len(items) == 0 {
			g.ns[node].status, g.output[node] = TaskCompleted, []any{}
			g.resolve(node, completedOutcome)
			return
		}
		lp.items = items
	}
	g.loops[node] = lp
	g.ns[node].status = TaskLooping
	g.dispatch(TaskRef{Node: node, Index: 0}, g.first(node), now)
}

// iterationDone records the output of the current iteration of a loop and
// decides what follows: the loop completes (until is true, or the list is
// done), fails (until cannot be evaluated, or the loop reached its max), or
// the next iteration is dispatched — after a SetTimer for loop.every.
func (g *Graph) iterationDone(ref TaskRef, out any, now time.Time) {
	node := ref.Node
	lpn := g.plan.nodes[node].loop
	lp := g.loops[node]
	i := len(lp.outputs)
	lp.outputs = append(lp.outputs, out)
	lp.status = TaskCompleted
	if lpn.until != nil {
		g.sc.reset(g.cutoffOf(node))
		g.sc.output, g.sc.iteration = out, int64(i)
		if i > 0 {
			g.sc.previous = lp.outputs[i-1]
		}
		v, err := lpn.until.Eval(&g.sc)
		g.sc.output, g.sc.previous = nil, nil
		switch {
		case err != nil:
			g.loopFailed(node, "loop.until: "+err.Error())
			return
		case v == true:
			g.loopCompleted(node)
			return
		case v != false:
			g.loopFailed(node, "loop.until: must be a bool, got "+value.TypeName(v))
			return
		}
	}
	n := len(lp.outputs)
	if lp.items != nil && n == len(lp.items) {
		g.loopCompleted(node)
		return
	}
	if limit, what := lpn.limit(g.plan.opts); n >= limit {
		g.loopFailed(node, fmt.Sprintf("loop: until ${{ %s }} was still false after %d iterations, %s",
			lpn.until.Source(), n, what))
		return
	}
	next := TaskRef{Node: node, Index: int32(n)}
	if lpn.every > 0 {
		at := addNanos(now.UnixNano(), lpn.every)
		lp.status, lp.attempt, lp.due = TaskWaiting, 0, at
		g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Next, Task: next, At: unixTime(at)}})
		return
	}
	g.dispatch(next, g.first(node), now)
}

// loopCompleted completes a loop task: its output is the list of its
// iteration outputs.
func (g *Graph) loopCompleted(node int32) {
	lp := g.loops[node]
	lp.items = nil
	g.ns[node].status, g.output[node] = TaskCompleted, lp.outputs
	g.resolve(node, completedOutcome)
}

// loopFailed fails a loop task whose last iteration succeeded: until could
// not be evaluated, or the loop reached its max. Deterministic, never
// retried: the task's policy decides, as for a task that fails before its
// first attempt.
func (g *Graph) loopFailed(node int32, reason string) {
	nd := &g.plan.nodes[node]
	g.errs[Ref(node)] = reason
	g.loops[node].items = nil
	g.ns[node].status = TaskFailed
	if nd.policy != robonetv1.FailurePolicy_FAILURE_POLICY_SKIP {
		g.fail(&WorkflowError{Task: nd.name, Index: -1, Policy: nd.policy, Reason: reason})
		return
	}
	g.output[node] = nil
	g.resolve(node, failedOutcome)
}
