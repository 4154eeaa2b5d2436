package graph_test

import (
	"fmt"
	"github.com/robonet/robonet/engine/graph"
	"math"
	"slices"
	"time"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// refScheduler is a deliberately naive reference implementation of the
// workflow semantics, used only to check Graph in the differential test. It
// keeps every task in a slice and, after every event, rescans the whole
// workflow until nothing changes. It shares nothing with Graph but the IR and
// the expression package: no counters, no successor lists, no work lists.
type refScheduler struct {
	wf      *robonetv1.Workflow
	env     *expr.Env
	inst    string
	inputs  map[string]any
	tasks   []*refTask
	byName  map[string]*refTask
	state   graph.State
	outputs map[string]any
	failure string

	dispatched []refDispatch // every dispatch, in order
	cancelled  []refAttempt  // every cancellation, in order
	armed      []graph.Timer // every timer armed, in order
	programs   map[string]*expr.Program
}

type refStatus int

const (
	refWaiting   refStatus = iota // predecessors not all resolved
	refActive                     // dispatched (maybe as a spread), not resolved
	refDone                       // completed
	refFailed                     // failed under skip: output null
	refSkipped                    // guard false or all predecessors skipped
	refCancelled                  // a need of a join with cancel_rest, unresolved when the join was decided
)

type refTask struct {
	ir     *robonetv1.Task
	node   int32
	status refStatus
	output any
	spread bool
	every  bool // on: every_node: a spread over everyNodes(name)
	// asking: an every_node task that is ready and waits for its nodes,
	// which come once the event that made it ready is over (scatter).
	asking bool
	loop   *robonetv1.Loop
	items  []any      // the list of a loop over one
	units  []*refUnit // one for a plain task, N for a spread, one per iteration started for a loop
	// view is, for a join that fired, the output of every task that had
	// resolved then: what its expressions read from then on.
	view map[string]any
}

// refUnit is one dispatchable unit: a plain task or one spread instance.
type refUnit struct {
	index    int32
	item     any
	attempt  uint32
	running  bool // an attempt is in flight
	waiting  bool // waiting for a retry timer
	pausing  bool // a loop iteration waiting for its pause (loop.every)
	previous any  // a loop iteration's previous output
	resolved bool
	failed   bool
	output   any
}

type refAttempt struct {
	Task    graph.TaskRef
	Attempt uint32
}

type refDispatch struct {
	refAttempt
	Input string // canonical JSON
}

func newRef(wf *robonetv1.Workflow, env *expr.Env, inst string) *refScheduler {
	r := &refScheduler{wf: wf, env: env, inst: inst, byName: map[string]*refTask{}, state: graph.Pending}
	for i, t := range wf.GetTasks() {
		every := t.GetOn() == robonetv1.TaskOn_TASK_ON_EVERY_NODE
		rt := &refTask{ir: t, node: int32(i), spread: t.GetSpread() != nil || every, every: every, loop: t.GetLoop()}
		r.tasks = append(r.tasks, rt)
		r.byName[t.GetName()] = rt
	}
	return r
}

func (r *refScheduler) terminal() bool {
	return r.state == graph.Complete || r.state == graph.Failed || r.state == graph.Cancelled
}

func (r *refScheduler) start(inputs map[string]any, now time.Time) {
	r.inputs = inputs
	r.state = graph.Running
	r.rescan(now)
}

// rescan is the whole scheduler: look at every task, again and again, until
// a full pass changes nothing.
func (r *refScheduler) rescan(now time.Time) {
	for changed := true; changed && !r.terminal(); {
		changed = false
		for _, t := range r.tasks {
			if r.terminal() {
				return
			}
			if t.status == refWaiting && t.ir.GetJoin() == nil && r.predsResolved(t) {
				r.makeReady(t, now)
				changed = true
			}
			if t.status == refActive && t.spread && !t.asking && allUnitsResolved(t) {
				out := make([]any, len(t.units))
				for i, u := range t.units {
					out[i] = u.output
					if t.every {
						out[i] = map[string]any{"node": u.item, "output": u.output}
					}
				}
				t.status, t.output = refDone, out
				changed = true
			}
		}
		// Joins are decided once nothing else changes, the lowest first,
		// one per pass.
		for _, t := range r.tasks {
			if changed || r.terminal() {
				break
			}
			if t.status == refWaiting && t.ir.GetJoin() != nil && r.joinDecidable(t) {
				r.decideJoin(t, now)
				changed = true
			}
		}
		if !changed && !r.terminal() && r.allResolved() {
			r.finish()
		}
	}
	if r.state == graph.Running && r.noneWaiting() {
		r.state = graph.Gathering
	}
	r.scatter(now)
}

// scatter expands the every_node tasks that wait for their nodes, once the
// event that made them ready is over (as the runloop answers the graph's
// Scatter effects after the event's other effects): over the nodes
// serving the task, sorted, each once; none fails the task. A task
// cancelled meanwhile (a join's cancel_rest) never asks.
func (r *refScheduler) scatter(now time.Time) {
	for _, t := range r.tasks {
		if !t.asking || r.terminal() {
			continue
		}
		t.asking = false
		if t.status != refActive {
			continue
		}
		nodes := slices.Clone(everyNodes(t.ir.GetName()))
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		if len(nodes) == 0 {
			r.taskFailedHard(t, now)
		} else {
			for i, n := range nodes {
				t.units = append(t.units, &refUnit{index: int32(i), item: n})
			}
			for _, u := range t.units {
				r.dispatch(t, u, 1, now)
				if r.terminal() {
					break
				}
			}
		}
		r.rescan(now)
		return // rescan scattered the rest
	}
}

// joinCounts counts a join's needs that completed and those that failed,
// were skipped or were cancelled.
func (r *refScheduler) joinCounts(t *refTask) (completed, other int) {
	for _, n := range t.ir.GetNeeds() {
		switch r.byName[n].status {
		case refDone:
			completed++
		case refFailed, refSkipped, refCancelled:
			other++
		}
	}
	return completed, other
}

func (r *refScheduler) joinDecidable(t *refTask) bool {
	completed, other := r.joinCounts(t)
	m := int(t.ir.GetJoin().GetMin())
	return completed >= m || other > len(t.ir.GetNeeds())-m
}

// decideJoin handles a join whose min is reached, or can no longer be.
func (r *refScheduler) decideJoin(t *refTask, now time.Time) {
	if t.ir.GetJoin().GetCancelRest() {
		for _, n := range t.ir.GetNeeds() {
			nt := r.byName[n]
			if nt.status != refWaiting && nt.status != refActive {
				continue
			}
			nt.status, nt.output = refCancelled, nil
			for _, u := range nt.units {
				if u.running {
					u.running = false
					r.cancelled = append(r.cancelled, refAttempt{graph.TaskRef{Node: nt.node, Index: u.index}, u.attempt})
				}
				u.waiting, u.pausing = false, false
			}
		}
	}
	if completed, _ := r.joinCounts(t); completed >= int(t.ir.GetJoin().GetMin()) {
		t.view = map[string]any{}
		for _, o := range r.tasks {
			switch o.status {
			case refDone, refFailed, refSkipped:
				t.view[o.ir.GetName()] = o.output
			}
		}
		r.run(t, now)
		return
	}
	for _, n := range t.ir.GetNeeds() {
		if s := r.byName[n].status; s == refDone || s == refFailed {
			r.taskFailedHard(t, now)
			return
		}
	}
	t.status = refSkipped
}

func (r *refScheduler) predsResolved(t *refTask) bool {
	for _, n := range t.ir.GetNeeds() {
		switch r.byName[n].status {
		case refWaiting, refActive:
			return false
		}
	}
	return true
}

func (r *refScheduler) allResolved() bool {
	for _, t := range r.tasks {
		if t.status == refWaiting || t.status == refActive {
			return false
		}
	}
	return true
}

func (r *refScheduler) noneWaiting() bool {
	for _, t := range r.tasks {
		if t.status == refWaiting {
			return false
		}
	}
	return true
}

func allUnitsResolved(t *refTask) bool {
	for _, u := range t.units {
		if !u.resolved {
			return false
		}
	}
	return true
}

func (r *refScheduler) makeReady(t *refTask, now time.Time) {
	needs := t.ir.GetNeeds()
	if len(needs) > 0 {
		all := true
		for _, n := range needs {
			if s := r.byName[n].status; s != refSkipped && s != refCancelled {
				all = false
			}
		}
		if all {
			t.status = refSkipped
			return
		}
	}
	r.run(t, now)
}

// run evaluates the guard of a ready task, then expands or dispatches it.
func (r *refScheduler) run(t *refTask, now time.Time) {
	if w := t.ir.GetWhen(); w != nil {
		v, err := r.eval(w.GetSource(), t.view)
		b, isBool := v.(bool)
		if err != nil || !isBool {
			r.taskFailedHard(t, now)
			return
		}
		if !b {
			t.status = refSkipped
			return
		}
	}
	t.status = refActive
	if t.loop != nil {
		if over := t.loop.GetOver(); over != nil {
			v, err := r.eval(over.GetSource(), t.view)
			list, isList := v.([]any)
			if err != nil || !isList || len(list) > refLoopLimit(t) {
				r.taskFailedHard(t, now)
				return
			}
			if len(list) == 0 {
				t.status, t.output = refDone, []any{}
				return
			}
			t.items = list
		}
		r.startIteration(t, 0, now)
		return
	}
	if t.every {
		t.asking = true // see scatter
		return
	}
	if t.spread {
		v, err := r.eval(t.ir.GetSpread().GetSource(), t.view)
		list, isList := v.([]any)
		if err != nil || !isList {
			r.taskFailedHard(t, now)
			return
		}
		for i, item := range list {
			t.units = append(t.units, &refUnit{index: int32(i), item: item})
		}
		if len(list) == 0 {
			t.status, t.output = refDone, []any{}
			return
		}
	} else {
		t.units = []*refUnit{{index: -1}}
	}
	for _, u := range t.units {
		r.dispatch(t, u, 1, now)
		if r.terminal() {
			return
		}
	}
}

// taskFailedHard handles a deterministic failure (guard or spread evaluation):
// no retry; skip marks the task failed, anything else fails the workflow.
func (r *refScheduler) taskFailedHard(t *refTask, now time.Time) {
	if t.ir.GetOnFailure() == robonetv1.FailurePolicy_FAILURE_POLICY_SKIP {
		t.status, t.output = refFailed, nil
		return
	}
	r.fail(fmt.Sprintf("task %s failed", t.ir.GetName()), now)
}

// refLoopLimit is the most iterations of a loop: its max, within the
// default loop limit.
func refLoopLimit(t *refTask) int {
	if m := int(t.loop.GetMax()); m > 0 && m <= graph.DefaultMaxLoop {
		return m
	}
	return graph.DefaultMaxLoop
}

// startIteration starts iteration i of a loop: at once, or after its pause.
func (r *refScheduler) startIteration(t *refTask, i int, now time.Time) {
	u := &refUnit{index: int32(i)}
	if t.items != nil {
		u.item = t.items[i]
	}
	if i > 0 {
		u.previous = t.units[i-1].output
	}
	t.units = append(t.units, u)
	if d := t.loop.GetEvery().AsDuration(); d > 0 && i > 0 {
		u.pausing = true
		r.armed = append(r.armed, graph.Timer{Kind: graph.Next, Task: graph.TaskRef{Node: t.node, Index: int32(i)}, At: now.Add(d)})
		return
	}
	r.dispatch(t, u, 1, now)
}

// iterationDone decides what follows a completed iteration.
func (r *refScheduler) iterationDone(t *refTask, u *refUnit, now time.Time) {
	n := len(t.units)
	if until := t.loop.GetUntil(); until != nil {
		v, err := r.evalIn(until.GetSource(), refScope{r: r, view: t.view, output: u.output, iteration: int64(u.index), previous: u.previous})
		b, isBool := v.(bool)
		if err != nil || !isBool {
			r.taskFailedHard(t, now)
			return
		}
		if b {
			r.loopDone(t)
			return
		}
	}
	if t.items != nil && n == len(t.items) {
		r.loopDone(t)
		return
	}
	if n >= refLoopLimit(t) {
		r.taskFailedHard(t, now)
		return
	}
	r.startIteration(t, n, now)
}

func (r *refScheduler) loopDone(t *refTask) {
	out := make([]any, len(t.units))
	for i, u := range t.units {
		out[i] = u.output
	}
	t.status, t.output = refDone, out
}

func (r *refScheduler) dispatch(t *refTask, u *refUnit, attempt uint32, now time.Time) {
	u.attempt, u.waiting, u.pausing = attempt, false, false
	sc := refScope{r: r, item: u.item, index: int64(u.index), view: t.view}
	if t.loop != nil {
		sc.index, sc.iteration, sc.previous = 0, int64(u.index), u.previous
	}
	in, err := r.evalTemplate(t.ir.GetWith(), sc)
	if err != nil {
		// Input evaluation is deterministic: the unit fails without retry.
		r.unitExhausted(t, u, now)
		return
	}
	enc := string(value.MustEncode(in))
	u.running = true
	ref := graph.TaskRef{Node: t.node, Index: u.index}
	r.dispatched = append(r.dispatched, refDispatch{refAttempt{ref, attempt}, enc})
	if d := t.ir.GetTimeout().AsDuration(); d > 0 {
		r.armed = append(r.armed, graph.Timer{Kind: graph.Timeout, Task: ref, Attempt: attempt, At: now.Add(d)})
	}
}

func (r *refScheduler) unit(ref graph.TaskRef) (*refTask, *refUnit) {
	if ref.Node < 0 || int(ref.Node) >= len(r.tasks) {
		return nil, nil
	}
	t := r.tasks[ref.Node]
	for _, u := range t.units {
		if u.index == ref.Index {
			return t, u
		}
	}
	return t, nil
}

func (r *refScheduler) complete(ref graph.TaskRef, attempt uint32, res graph.Result, now time.Time) {
	if r.terminal() {
		return
	}
	t, u := r.unit(ref)
	if u == nil || !u.running || u.attempt != attempt {
		return // stale
	}
	u.running = false
	if res.Err == nil {
		u.resolved, u.output = true, res.Output
		if t.loop != nil {
			r.iterationDone(t, u, now)
			r.rescan(now)
			return
		}
		if !t.spread {
			t.status, t.output = refDone, res.Output
		}
		r.rescan(now)
		return
	}
	r.attemptFailed(t, u, now)
	r.rescan(now)
}

func (r *refScheduler) attemptFailed(t *refTask, u *refUnit, now time.Time) {
	policy := t.ir.GetOnFailure()
	max := t.ir.GetRetry().GetMaxAttempts()
	if policy != robonetv1.FailurePolicy_FAILURE_POLICY_ABORT && u.attempt < max {
		u.waiting = true
		r.armed = append(r.armed, graph.Timer{Kind: graph.Retry, Task: graph.TaskRef{Node: t.node, Index: u.index}, Attempt: u.attempt, At: now.Add(refBackoff(t.ir.GetRetry(), u.attempt))})
		return
	}
	r.unitExhausted(t, u, now)
}

func (r *refScheduler) unitExhausted(t *refTask, u *refUnit, now time.Time) {
	if t.ir.GetOnFailure() == robonetv1.FailurePolicy_FAILURE_POLICY_SKIP {
		u.resolved, u.failed, u.output = true, true, nil
		if !t.spread {
			t.status, t.output = refFailed, nil
		}
		return
	}
	r.fail(fmt.Sprintf("task %s failed", t.ir.GetName()), now)
}

func (r *refScheduler) fire(tm graph.Timer, now time.Time) {
	if r.terminal() {
		return
	}
	t, u := r.unit(tm.Task)
	switch tm.Kind {
	case graph.Retry:
		if u != nil && u.waiting && u.attempt == tm.Attempt {
			r.dispatch(t, u, tm.Attempt+1, now)
		}
	case graph.Next:
		if u != nil && u.pausing {
			r.dispatch(t, u, 1, now)
		}
	case graph.Timeout:
		if u != nil && u.running && u.attempt == tm.Attempt {
			u.running = false
			r.cancelled = append(r.cancelled, refAttempt{tm.Task, tm.Attempt})
			r.attemptFailed(t, u, now)
		}
	}
	r.rescan(now)
}

func (r *refScheduler) fail(why string, _ time.Time) {
	r.state, r.failure = graph.Failed, why
	r.cancelRunning()
}

func (r *refScheduler) cancel() {
	if r.terminal() {
		return
	}
	r.state = graph.Cancelled
	r.cancelRunning()
}

func (r *refScheduler) cancelRunning() {
	for _, t := range r.tasks {
		for _, u := range t.units {
			if u.running {
				u.running = false
				r.cancelled = append(r.cancelled, refAttempt{graph.TaskRef{Node: t.node, Index: u.index}, u.attempt})
			}
		}
	}
}

func (r *refScheduler) finish() {
	out := map[string]any{}
	for _, o := range r.wf.GetOutputs() {
		v, err := r.evalTemplate(o.GetValue(), refScope{r: r})
		if err != nil {
			r.state, r.failure = graph.Failed, "output "+o.GetName()
			return
		}
		out[o.GetName()] = v
	}
	r.state, r.outputs = graph.Complete, out
}

// running lists attempts in flight, sorted.
func (r *refScheduler) running() []refAttempt {
	var out []refAttempt
	for _, t := range r.tasks {
		for _, u := range t.units {
			if u.running {
				out = append(out, refAttempt{graph.TaskRef{Node: t.node, Index: u.index}, u.attempt})
			}
		}
	}
	sortAttempts(out)
	return out
}

func sortAttempts(a []refAttempt) {
	slices.SortFunc(a, func(x, y refAttempt) int {
		if x.Task.Node != y.Task.Node {
			return int(x.Task.Node - y.Task.Node)
		}
		if x.Task.Index != y.Task.Index {
			return int(x.Task.Index - y.Task.Index)
		}
		return int(x.Attempt) - int(y.Attempt)
	})
}

// refBackoff is the retry delay with zero jitter, computed independently of
// the graph: min(initial * factor^(n-1), max).
func refBackoff(p *robonetv1.RetryPolicy, n uint32) time.Duration {
	d := float64(p.GetInitial().AsDuration()) * math.Pow(p.GetFactor(), float64(n-1))
	if m := float64(p.GetMax().AsDuration()); m > 0 && d > m {
		d = m
	}
	return time.Duration(d)
}

// Expressions are compiled from the IR's source text by the reference itself,
// independently of the plan's compiled programs.

type refScope struct {
	r         *refScheduler
	item      any
	index     int64
	view      map[string]any // nil: every task's current output
	output    any            // a loop's until: the iteration's output
	iteration int64
	previous  any
}

func (s refScope) Inputs() map[string]any { return s.r.inputs }
func (s refScope) TaskOutput(name string) (any, bool) {
	t := s.r.byName[name]
	if t == nil {
		return nil, false
	}
	if s.view != nil {
		return s.view[name], true
	}
	return t.output, true
}
func (s refScope) TaskOutputAt(int32) (any, bool) { return nil, false } // the reference never binds
func (s refScope) Item() any                      { return s.item }
func (s refScope) Index() int64                   { return s.index }
func (s refScope) Output() any                    { return s.output } // the reference has no accept
func (s refScope) Iteration() int64               { return s.iteration }
func (s refScope) Previous() any                  { return s.previous }

func (r *refScheduler) eval(src string, view map[string]any) (any, error) {
	return r.evalIn(src, refScope{r: r, view: view})
}

func (r *refScheduler) evalIn(src string, sc refScope) (any, error) {
	p, ok := r.programs[src]
	if !ok {
		var err error
		if p, err = r.env.Compile(src); err != nil {
			return nil, err
		}
		if r.programs == nil {
			r.programs = map[string]*expr.Program{}
		}
		r.programs[src] = p
	}
	return p.Eval(sc)
}

func (r *refScheduler) evalTemplate(t *robonetv1.Template, sc refScope) (any, error) {
	c, err := r.env.CompileTemplate(t)
	if err != nil {
		return nil, err
	}
	return c.Eval(sc)
}
