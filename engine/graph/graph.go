package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/value"
)

// maxRetainedEffects bounds the effect buffer a Graph keeps between calls;
// a larger buffer (from expanding a wide spread) is dropped rather than
// reused so an idle instance does not pin it.
const maxRetainedEffects = 1 << 14

// Graph is the execution state of one workflow instance: a pure state
// machine driven by Start, Complete, Fire and Cancel, which return the
// effects the runloop must apply. It reads no clock, starts no goroutine and
// does no I/O; the time of every event is an argument.
//
// A Graph is not safe for concurrent use.
//
// The []Effect returned by Start, Complete, Fire, Cancel and Resume aliases a
// buffer owned by the Graph and is valid only until the next call of one of
// them on the same Graph; copy it to keep it. Reusing the buffer keeps the
// completion path free of allocations. A nil result means there is nothing
// to do.
type Graph struct {
	plan  *Plan
	id    string
	state State
	err   *WorkflowError

	inputs  map[string]any
	outputs map[string]any

	// Per node; remaining and live have one more entry, for the output
	// node.
	// ns holds the small per-node state in one array (one entry more, for
	// the output node), so a completion touches one cache line of it
	// rather than one of each of four parallel arrays.
	ns      []nodeState
	output  []any
	due     []int64      // retry time or timeout deadline (Unix ns), see Task
	spreads []*spread    // instances of an expanded spread task
	loops   []*loopState // iterations of a started loop task; nil when the plan has no loop
	errs    map[TaskRef]string
	waiting int // tasks in TaskWaiting while active
	// slack is, for a join task still waiting, how many more of its needs
	// may fail or be skipped before join.min can no longer be reached; nil
	// when the plan has no join.
	slack []int32
	// seq numbers the resolutions of tasks; resolvedAt[n] is the seq of
	// task n's (0 while unresolved) and firedAt[j] the seq when join j
	// fired. A join's expressions see only tasks resolved by then, so a
	// retry, a Resume or a restored spread evaluates them as when it
	// fired, whatever of the rest completed since. nil without joins.
	seq        uint64
	resolvedAt []uint64
	firedAt    []uint64
	restoring  bool // deriveReadiness: resolutions keep their recorded seq

	fx    []Effect // effect buffer returned to the caller
	work  []int32  // ready nodes not yet handled
	joinq []int32  // joins decided, handled once work is empty (see drain)
	sc    scope
	stats Stats

	// spent is the CEL cost of the current event, against
	// Options.MaxStepCost; free is set while Resume re-evaluates.
	spent uint64
	free  bool

	// depth is the instance's depth among child workflows (SetDepth);
	// children counts the child instances it started (see child.go).
	depth    int
	children uint32
	// base is each task's attempt base (SetAttemptBase); nil when every
	// base is 0.
	base []uint32
}

// nodeState is the per-instance state of one task (or of the output node).
type nodeState struct {
	// remaining counts unresolved required predecessors; for a join, the
	// needs that must still complete.
	remaining int32
	attempt   uint32 // latest attempt dispatched or failed
	status    TaskStatus
	live      bool // some resolved predecessor was not skipped
	join      bool // the task has a join (see joinResolve)
	loop      bool // the task has a loop (see startLoop)
}

// outcome is how a task resolved, as its successors see it.
type outcome uint8

const (
	completedOutcome outcome = iota // completed: counts towards a join's min
	failedOutcome                   // failed under on_failure skip
	skippedOutcome                  // skipped, or cancelled by a join's cancel_rest
)

// spread holds the instances of one expanded spread task as parallel arrays
// (struct of arrays), so a million pending instances cost a few dozen bytes
// each. Instance i evaluates `with` with item = items[i] and index = i.
type spread struct {
	items   []any // shared with the value the spread expression returned
	status  []TaskStatus
	attempt []uint32
	output  []any   // becomes the task's output when the barrier fires
	due     []int64 // nil unless the task has a timeout or retries
	pending int32   // unresolved instances; the barrier fires at 0
	// nodes, for a task with on: every_node, are the names of the nodes
	// its runs are pinned to, sorted (items holds the same names); nil
	// while the task waits for Graph.Scatter.
	nodes []string
	every bool // the task has on: every_node
}

func newSpread(items []any, withDue bool) *spread {
	n := len(items)
	sp := &spread{
		items:   items,
		status:  make([]TaskStatus, n),
		attempt: make([]uint32, n),
		output:  make([]any, n),
		pending: int32(n),
	}
	if withDue {
		sp.due = make([]int64, n)
	}
	return sp
}

// loopState holds the iterations of a started loop task. Iterations run
// one after the other: iteration i is TaskRef{Node, Index: i}, and the
// current one is len(outputs). Only the current iteration has a status,
// an attempt and a due time; the ones before it completed.
type loopState struct {
	items   []any // the list of a loop over a list (nil for until), while it runs
	outputs []any // outputs of the completed iterations, in order
	// status of the current iteration: TaskRunning, TaskRetrying, or
	// TaskWaiting while the pause (loop.every) before it runs; TaskFailed
	// or TaskCancelled when the loop ended so, TaskCompleted once done.
	status  TaskStatus
	attempt uint32
	due     int64 // retry time, timeout deadline, or the end of the pause
}

// scope is what expressions read: the inputs, resolved task outputs, the
// spread element or loop iteration being evaluated and, for an accept
// check or a loop's until, the output it judges.
type scope struct {
	g         *Graph
	item      any
	index     int64
	iteration int64
	previous  any
	output    any
	// cutoff, when not 0, hides the output of tasks resolved after it
	// (see Graph.firedAt).
	cutoff uint64
}

func (s *scope) Inputs() map[string]any { return s.g.inputs }
func (s *scope) Item() any              { return s.item }
func (s *scope) Index() int64           { return s.index }
func (s *scope) Output() any            { return s.output }
func (s *scope) Iteration() int64       { return s.iteration }
func (s *scope) Previous() any          { return s.previous }

// reset points the scope at a task with no element or iteration.
func (s *scope) reset(cutoff uint64) {
	s.item, s.index, s.iteration, s.previous, s.output, s.cutoff = nil, 0, 0, nil, nil, cutoff
}

// Spend charges an evaluation's cost to the current event (expr.Budget).
func (s *scope) Spend(units uint64) error {
	g := s.g
	if g.free {
		return nil
	}
	g.spent += units
	if limit := g.plan.opts.MaxStepCost; g.spent > limit {
		return fmt.Errorf("the expressions of one event of this instance cost more than %d units, the limit (a wide spread whose with runs CEL on every element, or many guards made ready at once)", limit)
	}
	return nil
}

// TaskOutput returns the output of a task: null unless it completed (a
// failed, skipped or cancelled task, and a need a join did not wait for
// while it still runs); the plan guarantees expressions read only upstream
// tasks.
func (s *scope) TaskOutput(name string) (any, bool) {
	n, ok := s.g.plan.names[name]
	if !ok {
		return nil, false
	}
	return s.TaskOutputAt(n)
}

// TaskOutputAt is TaskOutput for a task numbered by the plan.
func (s *scope) TaskOutputAt(n int32) (any, bool) {
	if n < 0 || int(n) >= len(s.g.plan.nodes) {
		return nil, false
	}
	if s.cutoff != 0 && s.g.resolvedAt[n] > s.cutoff {
		return nil, true // a need the join did not wait for
	}
	return s.g.output[n], true
}

// NewGraph returns a PENDING instance of the plan. instanceID identifies the
// instance in execution IDs and seeds retry jitter.
func (p *Plan) NewGraph(instanceID string) *Graph {
	n := len(p.nodes)
	g := &Graph{
		plan:    p,
		id:      instanceID,
		ns:      make([]nodeState, n+1),
		output:  make([]any, n),
		due:     make([]int64, n),
		spreads: make([]*spread, n),
		errs:    map[TaskRef]string{},
	}
	// A task with no predecessors is live from the start; any other becomes
	// live when a predecessor resolves without being skipped. Readiness then
	// needs only live to tell "every predecessor was skipped".
	for i, r := range p.required {
		g.ns[i].remaining, g.ns[i].live = r, r == 0
	}
	if p.loops {
		g.loops = make([]*loopState, n)
		for i := range p.nodes {
			g.ns[i].loop = p.nodes[i].loop != nil
		}
	}
	if p.joins {
		g.slack = make([]int32, n)
		g.resolvedAt, g.firedAt = make([]uint64, n), make([]uint64, n)
		for i := range p.nodes {
			if m := p.nodes[i].joinMin; m > 0 {
				g.ns[i].remaining, g.ns[i].join = m, true
				g.slack[i] = p.required[i] - m
			}
		}
	}
	g.sc.g = g
	return g
}

// Plan returns the plan of the instance.
func (g *Graph) Plan() *Plan { return g.plan }

// InstanceID returns the instance ID.
func (g *Graph) InstanceID() string { return g.id }

// State returns the workflow state.
func (g *Graph) State() State { return g.state }

// Err says why the instance FAILED (a *WorkflowError); nil in other states.
func (g *Graph) Err() error {
	if g.err == nil {
		return nil
	}
	return g.err
}

// Inputs returns the bound inputs (nil before Start). Read-only.
func (g *Graph) Inputs() map[string]any { return g.inputs }

// Outputs returns the evaluated workflow outputs once COMPLETE, else nil.
// Read-only.
func (g *Graph) Outputs() map[string]any { return g.outputs }

// Stats returns counters of what the Graph handled.
func (g *Graph) Stats() Stats { return g.stats }

// Joins is Stats().Joins, without copying the rest: the runloop reads it
// after every event.
func (g *Graph) Joins() uint64 { return g.stats.Joins }

// Start binds the inputs (see Plan.BindInputs), moves the instance from
// PENDING to RUNNING and handles the root tasks. It fails, changing nothing,
// when the inputs are invalid or the instance was already started.
func (g *Graph) Start(inputs map[string]any, now time.Time) ([]Effect, error) {
	if g.state != Pending {
		return nil, fmt.Errorf("graph: Start on an instance in state %s", g.state)
	}
	bound, err := g.plan.BindInputs(inputs)
	if err != nil {
		return nil, err
	}
	g.begin()
	g.inputs = bound
	g.state = Running
	g.waiting = len(g.plan.nodes)
	if g.waiting == 0 {
		g.state = Gathering
	}
	for i, r := range g.plan.required {
		if r == 0 {
			g.work = append(g.work, int32(i))
		}
	}
	g.drain(now)
	return g.result(), nil
}

// Complete reports the result of an attempt. A completion for an unknown
// task, an attempt that is not in flight (stale, duplicate, already timed
// out or cancelled) or an instance that is not active is ignored: no
// effects, counted in Stats.StaleCompletions.
func (g *Graph) Complete(ref TaskRef, attempt uint32, res Result, now time.Time) []Effect {
	g.begin()
	if !g.inFlight(ref, attempt) {
		g.stats.StaleCompletions++
		return nil
	}
	if res.Err != nil {
		g.stats.FailedAttempts++
		g.attemptFailed(ref, attempt, res.Err.Error(), true, now)
	} else if out, err := value.Normalize(res.Output); err != nil {
		g.stats.FailedAttempts++
		g.attemptFailed(ref, attempt, "invalid output: "+err.Error(), true, now)
	} else {
		g.stats.Completed++
		g.succeeded(ref, out, now)
	}
	g.drain(now)
	return g.result()
}

// Accept applies the task's acceptance check (`accept`) to the output of
// attempt of ref, which must be a canonical value (package value). It
// returns nil when the attempt is accepted, when the task has no check, or
// when the attempt is not in flight (Complete will ignore it); otherwise
// the error to complete the attempt with:
//
//	not accepted: ${{ output.score >= 0.8 }}                       the check yielded false
//	not accepted: ${{ output.score >= 0.8 }}: no such key: score   it could not be evaluated
//	not accepted: ${{ output.score }}: must be a bool, got double  it yielded something else
//
// Complete does not run the check itself. The caller runs Accept once, on
// the live result, and records its verdict: a rejected attempt is recorded
// as failed with this error and completed as such (Result.Err), so replay
// after a restart feeds the recorded failure to Complete and never
// evaluates the check again (the evaluation's wall-time watchdog is the
// one thing about it that is not deterministic). The check is pure:
// besides the output it reads the inputs, upstream outputs and, in a
// spread instance, item and index, none of which change while the attempt
// runs. Judging is a step of its own for Options.MaxStepCost, as an event
// is.
func (g *Graph) Accept(ref TaskRef, attempt uint32, output any) error {
	if !g.inFlight(ref, attempt) {
		return nil
	}
	nd := &g.plan.nodes[ref.Node]
	if nd.accept == nil {
		return nil
	}
	g.begin()
	// The check reads what the task's with reads: for a join, the needs as
	// they were when it fired.
	g.unitScope(ref)
	g.sc.output = output
	v, err := nd.accept.Eval(&g.sc)
	g.sc.output = nil
	switch {
	case err != nil:
		prefix := fmt.Sprintf("%s: ${{ %s }}: ", expr.ErrEval, nd.accept.Source())
		return fmt.Errorf("not accepted: %s: %s", nd.acceptText, strings.TrimPrefix(err.Error(), prefix))
	case v == true:
		return nil
	case v == false:
		return errors.New("not accepted: " + nd.acceptText)
	}
	return fmt.Errorf("not accepted: %s: must be a bool, got %s", nd.acceptText, value.TypeName(v))
}

// inFlight reports whether attempt of ref is running in an active instance.
func (g *Graph) inFlight(ref TaskRef, attempt uint32) bool {
	if !g.state.active() || ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) {
		return false
	}
	if ref.Index < 0 {
		return g.ns[ref.Node].status == TaskRunning && g.ns[ref.Node].attempt == attempt
	}
	if g.ns[ref.Node].loop {
		lp := g.loops[ref.Node]
		return lp != nil && int(ref.Index) == len(lp.outputs) && lp.status == TaskRunning && lp.attempt == attempt
	}
	sp := g.spreads[ref.Node]
	return sp != nil && int(ref.Index) < len(sp.status) &&
		sp.status[ref.Index] == TaskRunning && sp.attempt[ref.Index] == attempt
}

// Fire handles a timer set by a SetTimer effect. A timer that no longer
// applies (its attempt completed, a newer attempt runs, the instance ended)
// is ignored and counted in Stats.StaleTimers.
func (g *Graph) Fire(t Timer, now time.Time) []Effect {
	g.begin()
	switch t.Kind {
	case Retry:
		if g.state.active() && g.statusOf(t.Task) == TaskRetrying && g.attemptOf(t.Task) == t.Attempt {
			g.dispatch(t.Task, t.Attempt+1, now)
			g.drain(now)
			return g.result()
		}
	case Next:
		if g.pausing(t.Task) {
			g.dispatch(t.Task, g.first(t.Task.Node), now)
			g.drain(now)
			return g.result()
		}
	case Timeout:
		if g.inFlight(t.Task, t.Attempt) && g.plan.nodes[t.Task.Node].timeout > 0 {
			g.emit(Effect{Kind: Cancel, Task: t.Task, Attempt: t.Attempt})
			g.stats.Cancelled++
			g.stats.TimedOut++
			g.stats.FailedAttempts++
			g.attemptFailed(t.Task, t.Attempt, g.plan.nodes[t.Task.Node].timeoutReason(), true, now)
			g.drain(now)
			return g.result()
		}
	case WaitOver:
		if g.inFlight(t.Task, t.Attempt) && t.Task.Index < 0 && g.plan.nodes[t.Task.Node].waitsOver() {
			g.waitOver(t.Task, now)
			g.drain(now)
			return g.result()
		}
	}
	g.stats.StaleTimers++
	return nil
}

// Cancel cancels the instance: every in-flight attempt gets a Cancel effect
// and the state becomes CANCELLED. It does nothing in a terminal state.
func (g *Graph) Cancel(now time.Time) []Effect {
	g.begin()
	if g.state.Terminal() {
		return nil
	}
	g.cancelInFlight()
	g.state = Cancelled
	g.emit(Effect{Kind: Finished, State: Cancelled})
	return g.result()
}

// Resume re-emits what the runloop must have in hand after Restore: a
// Dispatch (same attempt; dispatch is at-least-once) and, with a timeout, a
// SetTimer with the original deadline for every attempt in flight, and a
// SetTimer for every pending retry. In a terminal state it emits Finished
// again. It is O(n).
func (g *Graph) Resume(now time.Time) []Effect {
	g.begin()
	g.free = true
	if g.state.Terminal() {
		g.emit(Effect{Kind: Finished, State: g.state})
		return g.result()
	}
	if !g.state.active() {
		return nil
	}
	for node := range g.plan.nodes {
		ref := Ref(int32(node))
		switch g.ns[node].status {
		case TaskRunning, TaskRetrying:
			g.resumeOne(ref, g.ns[node].status, g.ns[node].attempt, g.due[node], now)
		case TaskLooping:
			lp := g.loops[node]
			ref := TaskRef{Node: int32(node), Index: int32(len(lp.outputs))}
			if lp.status == TaskWaiting {
				g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Next, Task: ref, At: unixTime(lp.due)}})
			} else {
				g.resumeOne(ref, lp.status, lp.attempt, lp.due, now)
			}
		case TaskSpreading:
			sp := g.spreads[node]
			if sp.every && sp.nodes == nil {
				g.emit(Effect{Kind: Scatter, Task: ref}) // still waits for its nodes
			}
			for i, st := range sp.status {
				if st == TaskRunning || st == TaskRetrying {
					var due int64
					if sp.due != nil {
						due = sp.due[i]
					}
					g.resumeOne(TaskRef{Node: int32(node), Index: int32(i)}, st, sp.attempt[i], due, now)
				}
			}
		}
		if !g.state.active() {
			break
		}
	}
	g.drain(now)
	return g.result()
}

// Redispatch re-emits the Dispatch of attempt of ref when that attempt is
// in flight: the Waggler layer lost it without an outcome, and dispatch is
// at-least-once. The attempt keeps its number and its timeout timer; its
// with is evaluated again, uncharged, like Resume. Nothing otherwise.
func (g *Graph) Redispatch(ref TaskRef, attempt uint32, now time.Time) []Effect {
	g.begin()
	if !g.inFlight(ref, attempt) {
		g.stats.StaleCompletions++
		return nil
	}
	g.free = true
	in, err := g.evalWith(ref)
	if err != nil {
		g.stats.FailedAttempts++
		g.attemptFailed(ref, attempt, "with: "+err.Error(), false, now)
		g.drain(now)
		return g.result()
	}
	g.stats.Redispatched++
	g.emit(Effect{Kind: Dispatch, Task: ref, Attempt: attempt, Input: in})
	return g.result()
}

func (g *Graph) resumeOne(ref TaskRef, st TaskStatus, attempt uint32, due int64, now time.Time) {
	nd := &g.plan.nodes[ref.Node]
	if st == TaskRetrying {
		g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Retry, Task: ref, Attempt: attempt, At: unixTime(due)}})
		return
	}
	in, err := g.evalWith(ref)
	if err != nil { // deterministic limits passed before; only the wall-time watchdog can fail it
		g.stats.FailedAttempts++
		g.attemptFailed(ref, attempt, "with: "+err.Error(), false, now)
		return
	}
	g.stats.Redispatched++
	g.emit(Effect{Kind: Dispatch, Task: ref, Attempt: attempt, Input: in})
	switch {
	case nd.waitsOver():
		g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: WaitOver, Task: ref, Attempt: attempt, At: unixTime(due)}})
	case nd.timeout > 0:
		g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Timeout, Task: ref, Attempt: attempt, At: unixTime(due)}})
	}
}

// Task describes a task (ref.Index -1), a spread instance or a loop
// iteration.
func (g *Graph) Task(ref TaskRef) TaskInfo {
	info := TaskInfo{Status: TaskUnknown, Width: -1, Pending: -1, Iterations: -1}
	if ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) {
		return info
	}
	if g.ns[ref.Node].loop {
		return g.loopTask(ref, info)
	}
	nd := &g.plan.nodes[ref.Node]
	sp := g.spreads[ref.Node]
	var due int64
	if ref.Index < 0 {
		info.Status, info.Attempt, due = g.ns[ref.Node].status, g.ns[ref.Node].attempt, g.due[ref.Node]
		if info.Status.resolved() {
			info.Output = g.output[ref.Node]
		}
		if sp != nil {
			info.Width, info.Pending = int32(len(sp.status)), sp.pending
		}
	} else {
		if sp == nil || int(ref.Index) >= len(sp.status) {
			return info
		}
		info.Status, info.Attempt = sp.status[ref.Index], sp.attempt[ref.Index]
		if sp.due != nil {
			due = sp.due[ref.Index]
		}
		if info.Status == TaskCompleted {
			info.Output = sp.output[ref.Index]
		}
	}
	info.Error = g.errs[ref]
	if info.Status == TaskRetrying || (info.Status == TaskRunning && nd.runningDue()) {
		info.Due = unixTime(due)
	}
	return info
}

// loopTask is Task for a loop task or one of its iterations. The task as a
// whole reports the current (or last) iteration's attempt, and its due
// time while it retries or pauses.
func (g *Graph) loopTask(ref TaskRef, info TaskInfo) TaskInfo {
	nd := &g.plan.nodes[ref.Node]
	lp := g.loops[ref.Node]
	if ref.Index < 0 {
		info.Status = g.ns[ref.Node].status
		if info.Status.resolved() {
			info.Output = g.output[ref.Node]
		}
		info.Error = g.errs[ref]
		if lp == nil {
			return info
		}
		info.Attempt, info.Iterations = lp.attempt, int32(len(lp.outputs))
		if lp.status != TaskWaiting && lp.status != TaskCompleted {
			info.Iterations++ // the current iteration started
		}
		if info.Status == TaskLooping && (lp.status == TaskRetrying || lp.status == TaskWaiting ||
			(lp.status == TaskRunning && nd.timeout > 0)) {
			info.Due = unixTime(lp.due)
		}
		return info
	}
	if lp == nil || int(ref.Index) > len(lp.outputs) {
		return info
	}
	if int(ref.Index) < len(lp.outputs) {
		info.Status, info.Output = TaskCompleted, lp.outputs[ref.Index]
		return info
	}
	if lp.status == TaskCompleted {
		return info // the loop ended with the iteration before
	}
	info.Status, info.Attempt, info.Error = lp.status, lp.attempt, g.errs[ref]
	if lp.status == TaskRetrying || (lp.status == TaskRunning && nd.timeout > 0) {
		info.Due = unixTime(lp.due)
	}
	return info
}

// ---- internals ----

// begin starts a method call: the previous effects are released.
func (g *Graph) begin() {
	g.spent, g.free = 0, false
	if cap(g.fx) > maxRetainedEffects {
		g.fx = nil
		return
	}
	clear(g.fx)
	g.fx = g.fx[:0]
}

func (g *Graph) result() []Effect {
	if len(g.fx) == 0 {
		return nil
	}
	return g.fx
}

func (g *Graph) emit(e Effect) { g.fx = append(g.fx, e) }

func (g *Graph) statusOf(ref TaskRef) TaskStatus {
	if ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) {
		return TaskUnknown
	}
	if ref.Index < 0 {
		return g.ns[ref.Node].status
	}
	if g.ns[ref.Node].loop {
		lp := g.loops[ref.Node]
		if lp == nil || int(ref.Index) != len(lp.outputs) {
			return TaskUnknown // a past iteration has no retry to fire
		}
		return lp.status
	}
	sp := g.spreads[ref.Node]
	if sp == nil || int(ref.Index) >= len(sp.status) {
		return TaskUnknown
	}
	return sp.status[ref.Index]
}

// attemptOf returns the attempt of a ref known to be valid.
func (g *Graph) attemptOf(ref TaskRef) uint32 {
	if ref.Index < 0 {
		return g.ns[ref.Node].attempt
	}
	if g.ns[ref.Node].loop {
		return g.loops[ref.Node].attempt
	}
	return g.spreads[ref.Node].attempt[ref.Index]
}

// set records status, attempt and, when withDue, the due time of a ref
// known to be valid.
func (g *Graph) set(ref TaskRef, st TaskStatus, attempt uint32, due int64, withDue bool) {
	if ref.Index < 0 {
		g.ns[ref.Node].status, g.ns[ref.Node].attempt = st, attempt
		if withDue {
			g.due[ref.Node] = due
		}
		return
	}
	if g.ns[ref.Node].loop {
		lp := g.loops[ref.Node]
		lp.status, lp.attempt = st, attempt
		if withDue {
			lp.due = due
		}
		return
	}
	sp := g.spreads[ref.Node]
	sp.status[ref.Index], sp.attempt[ref.Index] = st, attempt
	if withDue {
		sp.due[ref.Index] = due
	}
}

// drain handles ready nodes until none is left: the worklist makes
// propagation iterative, so a long chain of skips cannot overflow the stack.
//
// Decided joins wait until the worklist is empty, and are then handled one
// at a time, the lowest node first, each followed by what it made ready.
// A join therefore sees every task the same event resolved without
// running (skips, failed guards, empty spreads), whatever order they were
// queued in: what it reads and which needs it cancels do not depend on
// the order of the worklist.
func (g *Graph) drain(now time.Time) {
	outNode := int32(len(g.plan.nodes))
	for {
		for head := 0; head < len(g.work) && g.state.active(); head++ {
			node := g.work[head]
			if node == outNode {
				g.finish()
				continue
			}
			g.ready(node, now)
		}
		g.work = g.work[:0]
		if len(g.joinq) == 0 || !g.state.active() {
			break
		}
		i := 0
		for j, n := range g.joinq {
			if n < g.joinq[i] {
				i = j
			}
		}
		node := g.joinq[i]
		g.joinq = slices.Delete(g.joinq, i, i+1)
		g.ready(node, now)
	}
	g.joinq = g.joinq[:0]
}

// resolve pushes the resolution of node to its direct successors, queueing
// those whose last required predecessor it was.
func (g *Graph) resolve(node int32, how outcome) {
	p := g.plan
	if g.resolvedAt != nil && !g.restoring {
		g.seq++
		g.resolvedAt[node] = g.seq
	}
	for _, s := range p.succ[p.succStart[node]:p.succStart[node+1]] {
		ns := &g.ns[s]
		if ns.join {
			g.joinResolve(s, how)
			continue
		}
		if how != skippedOutcome {
			ns.live = true
		}
		if ns.remaining--; ns.remaining == 0 {
			g.work = append(g.work, s)
		}
	}
}

// joinResolve counts one resolved need of the join task s. The join is
// decided, and queued once, on the join.min-th completion, or when so many
// needs failed or were skipped that join.min can no longer be reached (at
// most one of the two can happen: there are not enough needs for both).
// Once the join was handled, needs that resolve (the rest) change nothing.
func (g *Graph) joinResolve(s int32, how outcome) {
	ns := &g.ns[s]
	if ns.status != TaskWaiting {
		return // handled (or cancelled)
	}
	if how != skippedOutcome {
		ns.live = true
	}
	if how == completedOutcome {
		if ns.remaining--; ns.remaining == 0 {
			g.joinq = append(g.joinq, s)
		}
		return
	}
	if g.slack[s]--; g.slack[s] == -1 {
		g.joinq = append(g.joinq, s)
	}
}

// ready handles a task whose required predecessors are all resolved, or a
// join that was decided.
func (g *Graph) ready(node int32, now time.Time) {
	if g.ns[node].status != TaskWaiting {
		return // cancelled by a join's cancel_rest before it became ready
	}
	if g.waiting--; g.waiting == 0 && g.state == Running {
		g.state = Gathering
	}
	nd := &g.plan.nodes[node]
	if g.ns[node].join && !g.joinDecided(node) {
		return
	}
	if !g.ns[node].live {
		g.skip(node) // every predecessor was skipped
		return
	}
	g.sc.reset(0)
	if nd.when != nil {
		v, err := nd.when.Eval(&g.sc)
		if err != nil {
			g.taskFailed(node, "when: "+err.Error())
			return
		}
		b, ok := v.(bool)
		if !ok {
			g.taskFailed(node, "when: must be a bool, got "+value.TypeName(v))
			return
		}
		if !b {
			g.skip(node)
			return
		}
	}
	if nd.spread != nil {
		g.expand(node, now)
		return
	}
	if nd.everyNode {
		g.ns[node].status = TaskSpreading
		g.spreads[node] = &spread{every: true}
		g.emit(Effect{Kind: Scatter, Task: Ref(node)})
		return
	}
	if g.ns[node].loop {
		g.startLoop(node, now)
		return
	}
	if nd.wait == WaitUntil {
		at, reason := g.untilTime(node)
		if reason != "" {
			g.taskFailed(node, reason)
			return
		}
		g.dispatchWait(Ref(node), g.first(node), at, now)
		return
	}
	g.dispatch(Ref(node), g.first(node), now)
}

func (g *Graph) skip(node int32) {
	g.ns[node].status = TaskSkipped
	g.stats.Skipped++
	g.resolve(node, skippedOutcome)
}

// cutoffOf returns the scope cutoff of node's expressions: when it fired
// for a join, 0 (none) otherwise.
func (g *Graph) cutoffOf(node int32) uint64 {
	if g.firedAt == nil {
		return 0
	}
	return g.firedAt[node]
}

// joinDecided handles a join whose outcome is known: it cancels the rest
// under cancel_rest and reports whether the task goes on as a ready task
// (join.min of its needs completed). Otherwise join.min can no longer be
// reached: the task is skipped when every need resolved so far was skipped,
// and fails before its first attempt under its policy when not.
func (g *Graph) joinDecided(node int32) bool {
	nd := &g.plan.nodes[node]
	g.stats.Joins++
	fired := g.ns[node].remaining <= 0
	if fired {
		g.firedAt[node] = g.seq
	}
	if nd.cancelRest {
		g.cancelRest(nd.joinNeeds)
	}
	if fired {
		return true
	}
	if !g.ns[node].live {
		g.skip(node)
		return false
	}
	n := g.plan.required[node]
	g.taskFailed(node, fmt.Sprintf("join: %d of its %d needs failed or were skipped, so fewer than join.min %d can complete",
		n-nd.joinMin+1, n, nd.joinMin))
	return false
}

// cancelRest cancels the needs of a decided join that have not resolved:
// attempts in flight get a Cancel effect, pending retries are dropped, and
// a need still waiting for its own needs never runs. Each cancelled need
// gets one Cancel effect of its own (Index -1): its attempt's, or one with
// Attempt 0 when it had none in flight (waiting, retrying, or a spread
// after its instances' own). Each resolves for its other successors as a
// skipped task would (null output).
func (g *Graph) cancelRest(needs []int32) {
	for _, need := range needs {
		switch st := g.ns[need].status; st {
		case TaskWaiting:
			g.ns[need].status = TaskCancelled
			if g.waiting--; g.waiting == 0 && g.state == Running {
				g.state = Gathering
			}
			g.emit(Effect{Kind: Cancel, Task: Ref(need)}) // nothing in flight
		case TaskRunning, TaskRetrying, TaskSpreading, TaskLooping:
			g.cancelTask(need)
			if sp := g.spreads[need]; sp != nil {
				sp.pending, sp.items, sp.due = 0, nil, nil
				// The task as a whole, after its instances.
				g.emit(Effect{Kind: Cancel, Task: Ref(need)})
			}
			if st == TaskLooping {
				g.loops[need].items = nil
				// The task as a whole, after its iteration.
				g.emit(Effect{Kind: Cancel, Task: Ref(need)})
			}
		default:
			continue // resolved already
		}
		g.stats.RestCancelled++
		g.resolve(need, skippedOutcome)
	}
}

// expand evaluates the spread expression of node and dispatches one
// instance per element.
func (g *Graph) expand(node int32, now time.Time) {
	nd := &g.plan.nodes[node]
	v, err := nd.spread.Eval(&g.sc)
	if err != nil {
		g.taskFailed(node, "spread: "+err.Error())
		return
	}
	items, ok := v.([]any)
	if !ok {
		g.taskFailed(node, "spread: must be a list, got "+value.TypeName(v))
		return
	}
	if len(items) > g.plan.opts.MaxSpreadWidth {
		g.taskFailed(node, fmt.Sprintf("spread: %d items exceed the limit of %d (split the work or raise MaxSpreadWidth)",
			len(items), g.plan.opts.MaxSpreadWidth))
		return
	}
	if len(items) == 0 {
		g.ns[node].status, g.output[node] = TaskCompleted, []any{}
		g.resolve(node, completedOutcome)
		return
	}
	g.spreads[node] = newSpread(items, nd.needsDue())
	g.ns[node].status = TaskSpreading
	perInstance := 1
	if nd.timeout > 0 {
		perInstance = 2
	}
	if free := cap(g.fx) - len(g.fx); free < len(items)*perInstance {
		g.fx = append(make([]Effect, 0, len(g.fx)+len(items)*perInstance+8), g.fx...)
	}
	g.dispatchInstances(node, g.spreads[node], now)
}

// dispatchInstances dispatches every instance of a spread (or every run of
// an on: every_node task), in index order.
func (g *Graph) dispatchInstances(node int32, sp *spread, now time.Time) {
	for i := range sp.status {
		g.dispatch(TaskRef{Node: node, Index: int32(i)}, g.first(node), now)
		if !g.state.active() {
			// An instance failed the workflow (its with could not be
			// evaluated): the rest are never dispatched.
			for j := i + 1; j < len(sp.status); j++ {
				sp.status[j] = TaskCancelled
			}
			return
		}
	}
}

// evalWith evaluates the `with` of ref; nil for a wait task, which has
// none.
func (g *Graph) evalWith(ref TaskRef) (any, error) {
	nd := &g.plan.nodes[ref.Node]
	if nd.wait != 0 {
		return nil, nil
	}
	g.unitScope(ref)
	if nd.withSlot >= 0 {
		if out, ok := g.sc.TaskOutputAt(nd.withSlot); ok {
			var path []string
			if nd.withPath != nil {
				path = *nd.withPath
			}
			if v, ok := expr.FollowPath(out, path); ok {
				return v, nil
			}
		}
	}
	return nd.with.Eval(&g.sc) // every other shape, and every error
}

// dispatch starts attempt of ref.
func (g *Graph) dispatch(ref TaskRef, attempt uint32, now time.Time) {
	nd := &g.plan.nodes[ref.Node]
	if nd.wait != 0 {
		var until int64
		if nd.wait == WaitUntil {
			// A retry: the same time as when the task was ready
			// (upstream outputs never change).
			var reason string
			if until, reason = g.untilTime(ref.Node); reason != "" {
				g.stats.FailedAttempts++
				g.attemptFailed(ref, attempt, reason, false, now)
				return
			}
		}
		g.dispatchWait(ref, attempt, until, now)
		return
	}
	in, err := g.evalWith(ref)
	if err != nil {
		g.stats.FailedAttempts++
		g.attemptFailed(ref, attempt, "with: "+err.Error(), false, now)
		return
	}
	if nd.child {
		if refused := g.startChild(nd); refused != "" {
			g.stats.FailedAttempts++
			g.attemptFailed(ref, attempt, refused, false, now)
			return
		}
	}
	g.stats.Dispatched++
	g.emit(Effect{Kind: Dispatch, Task: ref, Attempt: attempt, Input: in})
	if nd.timeout <= 0 {
		g.set(ref, TaskRunning, attempt, 0, false)
		return
	}
	at := addNanos(now.UnixNano(), nd.timeout)
	g.set(ref, TaskRunning, attempt, at, true)
	g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Timeout, Task: ref, Attempt: attempt, At: unixTime(at)}})
}

// succeeded records the output of a completed attempt.
func (g *Graph) succeeded(ref TaskRef, out any, now time.Time) {
	if ref.Index < 0 {
		g.ns[ref.Node].status, g.output[ref.Node] = TaskCompleted, out
		g.resolve(ref.Node, completedOutcome)
		return
	}
	if g.ns[ref.Node].loop {
		g.iterationDone(ref, out, now)
		return
	}
	sp := g.spreads[ref.Node]
	sp.status[ref.Index], sp.output[ref.Index] = TaskCompleted, out
	g.instanceResolved(ref.Node, sp)
}

// instanceResolved counts one more resolved instance; the last one fires
// the barrier: the task completes with the instance outputs in index order.
func (g *Graph) instanceResolved(node int32, sp *spread) {
	if sp.pending--; sp.pending > 0 {
		return
	}
	out := sp.output
	if sp.every {
		out = everyOutput(sp.nodes, sp.output)
	}
	g.ns[node].status, g.output[node] = TaskCompleted, out
	sp.items, sp.due = nil, nil
	g.resolve(node, completedOutcome)
}

// attemptFailed applies the failure policy to a failed attempt. retryable
// is false for deterministic failures (an unevaluable `with`).
func (g *Graph) attemptFailed(ref TaskRef, attempt uint32, reason string, retryable bool, now time.Time) {
	nd := &g.plan.nodes[ref.Node]
	g.errs[ref] = reason
	base := g.AttemptBase(ref.Node)
	if retryable && uint64(attempt) < uint64(base)+uint64(nd.maxAttempts) {
		at := addNanos(now.UnixNano(), nd.retryDelay(g.id, ref.Index, attempt-base))
		g.set(ref, TaskRetrying, attempt, at, true)
		g.stats.Retries++
		g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: Retry, Task: ref, Attempt: attempt, At: unixTime(at)}})
		return
	}
	g.set(ref, TaskFailed, attempt, 0, false)
	if nd.policy != robonetv1.FailurePolicy_FAILURE_POLICY_SKIP {
		g.fail(&WorkflowError{Task: nd.name, Index: ref.Index, Attempt: attempt, Policy: nd.policy, Reason: reason})
		return
	}
	if ref.Index < 0 {
		g.output[ref.Node] = nil
		g.resolve(ref.Node, failedOutcome)
		return
	}
	if g.ns[ref.Node].loop {
		// The loop fails with its iteration.
		g.errs[Ref(ref.Node)] = reason
		g.loops[ref.Node].items = nil
		g.ns[ref.Node].status, g.output[ref.Node] = TaskFailed, nil
		g.resolve(ref.Node, failedOutcome)
		return
	}
	sp := g.spreads[ref.Node]
	sp.output[ref.Index] = nil
	g.instanceResolved(ref.Node, sp)
}

// taskFailed fails a task before any attempt (its `when` or `spread` could
// not be evaluated); such failures are deterministic and never retried.
func (g *Graph) taskFailed(node int32, reason string) {
	nd := &g.plan.nodes[node]
	g.errs[Ref(node)] = reason
	g.ns[node].status = TaskFailed
	if nd.policy != robonetv1.FailurePolicy_FAILURE_POLICY_SKIP {
		g.fail(&WorkflowError{Task: nd.name, Index: -1, Policy: nd.policy, Reason: reason})
		return
	}
	g.output[node] = nil
	g.resolve(node, failedOutcome)
}

// fail moves the instance to FAILED: in-flight attempts are cancelled.
func (g *Graph) fail(err *WorkflowError) {
	if n, ok := g.plan.names[err.Task]; ok && err.Output == "" {
		err.Loop = g.ns[n].loop
	}
	g.state = Failed
	g.err = err
	g.cancelInFlight()
	if err.Index >= 0 {
		// The task whose instance failed is failed, not cancelled.
		g.ns[g.plan.names[err.Task]].status = TaskFailed
	}
	g.emit(Effect{Kind: Finished, State: Failed})
}

// cancelInFlight emits Cancel for every attempt in flight, in node and index
// order, and marks attempts in flight or waiting for a retry cancelled.
func (g *Graph) cancelInFlight() {
	for node := range g.plan.nodes {
		g.cancelTask(int32(node))
	}
}

// cancelTask emits Cancel for the attempts of node in flight, and one with
// Attempt 0 for a task or instance waiting for a retry, and marks the task
// (and its instances in flight or waiting for a retry) cancelled when it is
// running, retrying or spreading.
func (g *Graph) cancelTask(node int32) {
	switch g.ns[node].status {
	case TaskRunning:
		g.emit(Effect{Kind: Cancel, Task: Ref(node), Attempt: g.ns[node].attempt})
		g.stats.Cancelled++
		g.ns[node].status = TaskCancelled
	case TaskRetrying:
		g.emit(Effect{Kind: Cancel, Task: Ref(node)}) // no attempt in flight
		g.ns[node].status = TaskCancelled
	case TaskSpreading:
		sp := g.spreads[node]
		for i, ist := range sp.status {
			switch ist {
			case TaskRunning:
				g.emit(Effect{Kind: Cancel, Task: TaskRef{Node: node, Index: int32(i)}, Attempt: sp.attempt[i]})
				g.stats.Cancelled++
				sp.status[i] = TaskCancelled
			case TaskRetrying:
				g.emit(Effect{Kind: Cancel, Task: TaskRef{Node: node, Index: int32(i)}})
				sp.status[i] = TaskCancelled
			}
		}
		g.ns[node].status = TaskCancelled
	case TaskLooping:
		lp := g.loops[node]
		ref := TaskRef{Node: node, Index: int32(len(lp.outputs))}
		switch lp.status {
		case TaskRunning:
			g.emit(Effect{Kind: Cancel, Task: ref, Attempt: lp.attempt})
			g.stats.Cancelled++
		case TaskRetrying:
			g.emit(Effect{Kind: Cancel, Task: ref})
		}
		if lp.status == TaskRunning || lp.status == TaskRetrying || lp.status == TaskWaiting {
			lp.status = TaskCancelled
		}
		g.ns[node].status = TaskCancelled
	}
}

// finish evaluates the outputs: every task is resolved.
func (g *Graph) finish() {
	g.sc.reset(0)
	outs := make(map[string]any, len(g.plan.outputs))
	for _, o := range g.plan.outputs {
		v, err := o.tmpl.Eval(&g.sc)
		if err != nil {
			g.state = Failed
			g.err = &WorkflowError{Index: -1, Output: o.name, Reason: err.Error()}
			g.emit(Effect{Kind: Finished, State: Failed})
			return
		}
		outs[o.name] = v
	}
	g.outputs = outs
	g.state = Complete
	g.emit(Effect{Kind: Finished, State: Complete})
}

func addNanos(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }
