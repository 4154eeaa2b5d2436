package graph_test

import (
	"errors"
	"fmt"
	"github.com/robonet/robonet/engine/graph"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// TestDifferentialAgainstReference drives Graph and the naive reference
// scheduler through thousands of random workflows, completing work in random
// orders with random failures, timeouts, retries and cancellations, and
// checks after every event that both agree on what is in flight and on the
// workflow state, and at the end on every dispatch, cancellation, timer and
// output. One run in three also snapshots the graph at a random step, restores
// it and continues on the restored copy; one in three checks at every step
// (the others at the snapshot) that replaying the recorded results into a
// fresh graph, as the engine's hydration does, reaches the same state
// (workflows without joins).
func TestDifferentialAgainstReference(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	env, err := expr.NewEnv(expr.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(runs) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		wf := randomWorkflow(rng)
		snapshotAt := -1
		if seed%3 == 0 {
			snapshotAt = rng.IntN(12)
		}
		if err := runDifferential(env, wf, rng, seed, snapshotAt); err != nil {
			t.Fatalf("seed %d: %v\nworkflow: %v", seed, err, wf)
		}
	}
}

// attempt identifies one attempt of one unit (task or spread instance).
type attemptKey struct {
	Task    graph.TaskRef
	Attempt uint32
}

func runDifferential(env *expr.Env, wf *robonetv1.Workflow, rng *rand.Rand, seed uint64, snapshotAt int) error {
	plan, err := graph.NewPlan(wf, env, graph.Options{})
	if err != nil {
		return fmt.Errorf("graph.NewPlan: %w", err)
	}
	inst := fmt.Sprintf("inst-%d", seed)
	inputs := randomInputs(rng)
	now := time.Unix(1_700_000_000, 0).UTC()

	g := plan.NewGraph(inst)
	ref := newRef(wf, env, inst)

	inflight := map[attemptKey]any{} // from the graph's effects: attempt -> input
	var dispatched []refDispatch
	var cancelled []refAttempt
	var armed []graph.Timer
	var pendingTimers []graph.Timer
	var done []attemptKey // completed attempts, for stale re-deliveries
	// rec is what the engine records: the latest result of every
	// execution (a timeout as a failed result); cancelledAny is set once
	// the instance was cancelled, which the engine applies apart.
	rec := map[graph.TaskRef]recordedResult{}
	cancelledAny := false
	// Cancel effects per task as a whole (Index -1) that cancelled it (not
	// those of a timeout, which fail the attempt).
	taskCancels := map[int32]int{}
	apply := func(effs []graph.Effect) error {
		effs = slices.Clone(effs) // Scatter below reuses the graph's buffer
		for i := 0; i < len(effs); i++ {
			e := effs[i]
			k := attemptKey{e.Task, e.Attempt}
			if e.Kind == graph.Cancel && e.Task.Index < 0 && g.Task(e.Task).Status == graph.TaskCancelled {
				taskCancels[e.Task.Node]++
			}
			switch e.Kind {
			case graph.Dispatch:
				if _, dup := inflight[k]; dup {
					return fmt.Errorf("attempt %v dispatched twice", k)
				}
				if slices.Contains(done, k) {
					return fmt.Errorf("attempt %v dispatched again after it completed", k)
				}
				enc, err := value.Encode(e.Input)
				if err != nil {
					return fmt.Errorf("dispatch input not canonical: %w", err)
				}
				// Nothing is dispatched before all its predecessors
				// resolved, or a join before join.min of them completed.
				task := wf.GetTasks()[e.Task.Node]
				completed := 0
				for _, need := range task.GetNeeds() {
					n, _ := plan.Lookup(need)
					switch st := g.Task(graph.Ref(n)).Status; st {
					case graph.TaskCompleted:
						completed++
					case graph.TaskFailed, graph.TaskSkipped, graph.TaskCancelled: // cancelled by a join's cancel_rest
					default:
						if task.GetJoin() == nil {
							return fmt.Errorf("%v dispatched while its predecessor %s is %v", k, need, st)
						}
					}
				}
				if j := task.GetJoin(); j != nil && completed < int(j.GetMin()) {
					return fmt.Errorf("join %v dispatched with %d of its needs completed, min %d", k, completed, j.GetMin())
				}
				inflight[k] = e.Input
				dispatched = append(dispatched, refDispatch{refAttempt(k), string(enc)})
			case graph.Cancel:
				if e.Attempt == 0 {
					// Nothing in flight: the task was cancelled while it
					// waited (for a retry, or as a need of a join with
					// cancel_rest), or it is a spread as a whole.
					if st := g.Task(e.Task).Status; st != graph.TaskCancelled {
						return fmt.Errorf("cancel of %v, which is %v", e.Task, st)
					}
					for a := range inflight {
						if a.Task == e.Task {
							return fmt.Errorf("cancel of %v without an attempt while %v is in flight", e.Task, a)
						}
					}
					continue
				}
				if _, ok := inflight[k]; !ok {
					return fmt.Errorf("cancel of %v, which is not in flight", k)
				}
				delete(inflight, k)
				cancelled = append(cancelled, refAttempt(k))
			case graph.SetTimer:
				armed = append(armed, e.Timer)
				pendingTimers = append(pendingTimers, e.Timer)
			case graph.Scatter:
				// The runloop answers at once with the nodes serving the
				// task's capability; what that does comes after the
				// event's other effects (as in the engine's drive).
				effs = append(effs, g.Scatter(e.Task, everyNodes(wf.GetTasks()[e.Task.Node].GetName()), now)...)
			}
		}
		return nil
	}
	check := func(step int) error {
		if g.State() != ref.state {
			return fmt.Errorf("step %d: state %v, reference %v", step, g.State(), ref.state)
		}
		var got []refAttempt
		for k := range inflight {
			got = append(got, refAttempt(k))
		}
		sortAttempts(got)
		if want := ref.running(); !slices.Equal(got, want) {
			return fmt.Errorf("step %d: in flight %v, reference %v", step, got, want)
		}
		return nil
	}

	effs, err := g.Start(inputs, now)
	if err != nil {
		return fmt.Errorf("Start: %w", err)
	}
	ref.start(inputs, now)
	if err := apply(effs); err != nil {
		return err
	}
	if err := check(0); err != nil {
		return err
	}

	// Where each side's records stood when the current step began: when a
	// step fails the workflow, the siblings it dispatched and cancelled
	// within that very step depend on processing order, which is not part of
	// the semantics, so those pairs are left out of the comparison.
	var gDisp0, gCanc0, gArm0, rDisp0, rCanc0, rArm0 int
	for step := 1; !ref.terminal(); step++ {
		gDisp0, gCanc0, gArm0 = len(dispatched), len(cancelled), len(armed)
		rDisp0, rCanc0, rArm0 = len(ref.dispatched), len(ref.cancelled), len(ref.armed)
		if step > 5000 {
			return errors.New("no progress after 5000 events")
		}
		// Replay equivalence, at every step of one run in three without
		// joins (and at the snapshot of the others).
		if (step == snapshotAt || seed%3 == 1) && !cancelledAny && g.State() != graph.Complete && g.State() != graph.Failed && !hasJoins(wf) {
			if err := sameAfterReplay(plan, g, inst, inputs, now, rec); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
		if step == snapshotAt {
			snap, err := g.Snapshot()
			if err != nil {
				return fmt.Errorf("Snapshot: %w", err)
			}
			restored, err := plan.Restore(inst, snap)
			if err != nil {
				return fmt.Errorf("Restore: %w", err)
			}
			again, err := restored.Snapshot()
			if err != nil {
				return fmt.Errorf("Snapshot of the restored graph: %w", err)
			}
			if string(again) != string(snap) {
				return errors.New("snapshot of the restored graph differs from the snapshot it was restored from")
			}
			// Resume re-dispatches exactly what is in flight, with the same inputs.
			resumed := map[attemptKey]any{}
			for _, e := range restored.Resume(now) {
				switch e.Kind {
				case graph.Dispatch:
					resumed[attemptKey{e.Task, e.Attempt}] = e.Input
				case graph.SetTimer:
					pendingTimers = append(pendingTimers, e.Timer)
				}
			}
			if len(resumed) != len(inflight) {
				return fmt.Errorf("Resume re-dispatched %d attempts, %d are in flight", len(resumed), len(inflight))
			}
			for k, in := range inflight {
				if r, ok := resumed[k]; !ok || !value.Equal(r, in) {
					return fmt.Errorf("Resume: attempt %v re-dispatched as %v, was %v", k, r, in)
				}
			}
			g = restored
		}

		// Pick an event: complete an attempt in flight, fire a timer,
		// re-deliver a stale completion, or (rarely) cancel.
		keys := make([]attemptKey, 0, len(inflight))
		for k := range inflight {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b attemptKey) int { return compareAttempts(refAttempt(a), refAttempt(b)) })
		roll := rng.IntN(100)
		switch {
		case roll < 1:
			apply(g.Cancel(now))
			ref.cancel()
			cancelledAny = true
		case roll < 4 && len(done) > 0:
			k := done[rng.IntN(len(done))]
			if effs := g.Complete(k.Task, k.Attempt, graph.Result{Output: "stale"}, now); len(effs) != 0 {
				return fmt.Errorf("stale completion of %v produced effects %v", k, effs)
			}
		case len(keys) > 0 && (len(pendingTimers) == 0 || roll < 75):
			k := keys[rng.IntN(len(keys))]
			res := resultFor(seed, wf.GetTasks()[k.Task.Node].GetName(), k.Task.Index, k.Attempt, inflight[k])
			now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
			delete(inflight, k)
			done = append(done, k)
			rec[k.Task] = recordedResult{k.Attempt, res}
			if err := apply(g.Complete(k.Task, k.Attempt, res, now)); err != nil {
				return err
			}
			ref.complete(k.Task, k.Attempt, res, now)
		case len(pendingTimers) > 0:
			i := rng.IntN(len(pendingTimers))
			tm := pendingTimers[i]
			pendingTimers = slices.Delete(pendingTimers, i, i+1)
			if tm.At.After(now) {
				now = tm.At
			}
			if _, running := inflight[attemptKey{tm.Task, tm.Attempt}]; running && tm.Kind == graph.Timeout && g.State() != graph.Complete &&
				g.State() != graph.Failed && g.State() != graph.Cancelled {
				d := wf.GetTasks()[tm.Task.Node].GetTimeout().AsDuration()
				rec[tm.Task] = recordedResult{tm.Attempt, graph.Result{Err: fmt.Errorf("timed out after %s", d)}}
			}
			if err := apply(g.Fire(tm, now)); err != nil {
				return err
			}
			ref.fire(tm, now)
		default:
			return fmt.Errorf("step %d: stuck in state %v with nothing in flight and no timer", step, g.State())
		}
		if err := check(step); err != nil {
			return err
		}
	}

	if len(inflight) != 0 {
		return fmt.Errorf("terminal state %v with %d attempts still in flight", g.State(), len(inflight))
	}
	// Every task that ended cancelled was said so by exactly one Cancel of
	// its own (the runloop announces it from that), and no other task got
	// one; an expanded spread cancelled with the whole instance has only
	// its instances' Cancels, a started loop its iteration's.
	for node := range wf.GetTasks() {
		info := g.Task(graph.Ref(int32(node)))
		n := taskCancels[int32(node)]
		switch {
		case n > 1:
			return fmt.Errorf("task %d got %d Cancel effects of its own", node, n)
		case n == 0 && info.Status == graph.TaskCancelled && ((info.Width < 0 && info.Iterations < 0) || g.State() == graph.Complete):
			return fmt.Errorf("task %d is cancelled without a Cancel effect of its own", node)
		}
	}
	refDispatched, refCancelledAll, refArmed := ref.dispatched, ref.cancelled, ref.armed
	if ref.state == graph.Failed {
		dispatched, cancelled, armed = dropTransient(dispatched, cancelled, armed, gDisp0, gCanc0, gArm0)
		refDispatched, refCancelledAll, refArmed = dropTransient(refDispatched, refCancelledAll, refArmed, rDisp0, rCanc0, rArm0)
	}
	if !sameDispatches(dispatched, refDispatched) {
		return fmt.Errorf("dispatches differ:\n graph     %v\n reference %v", dispatched, refDispatched)
	}
	sortAttempts(cancelled)
	refCancelled := slices.Clone(refCancelledAll)
	sortAttempts(refCancelled)
	if !slices.Equal(cancelled, refCancelled) {
		return fmt.Errorf("cancellations differ: graph %v, reference %v", cancelled, refCancelled)
	}
	if !sameTimers(armed, refArmed, snapshotAt >= 0) {
		return fmt.Errorf("timers differ:\n graph     %v\n reference %v", armed, refArmed)
	}
	if ref.state == graph.Complete && !value.Equal(toAny(g.Outputs()), toAny(ref.outputs)) {
		return fmt.Errorf("outputs differ: graph %v, reference %v", g.Outputs(), ref.outputs)
	}
	return nil
}

// recordedResult is the latest recorded result of one execution.
type recordedResult struct {
	attempt uint32
	res     graph.Result
}

func hasJoins(wf *robonetv1.Workflow) bool {
	return slices.ContainsFunc(wf.GetTasks(), func(t *robonetv1.Task) bool { return t.GetJoin() != nil })
}

// sameAfterReplay rebuilds the instance as the engine's hydration does
// without a snapshot — a fresh graph, started again, each dispatch whose
// result is recorded answered from the record, a retry whose later
// attempt is recorded and a loop's pause before a recorded iteration fired
// at once — and checks it reached the state of live: the same status,
// attempt and output for every task, spread instance and loop iteration.
// (Joins are left out: replay in another order than the results came may
// decide one on other needs, which is why the engine snapshots a decided
// join.)
func sameAfterReplay(plan *graph.Plan, live *graph.Graph, inst string, inputs map[string]any, now time.Time, rec map[graph.TaskRef]recordedResult) error {
	rec = maps.Clone(rec)
	g := plan.NewGraph(inst)
	fx, err := g.Start(inputs, now)
	if err != nil {
		return err
	}
	var pending []graph.Timer // timers armed and not fired by the replay
	work := slices.Clone(fx)
	for {
		for i := 0; i < len(work); i++ {
			e := work[i]
			switch {
			case e.Kind == graph.Dispatch:
				if r, ok := rec[e.Task]; ok && r.attempt >= e.Attempt {
					res := graph.Result{Err: errors.New("a later attempt is recorded")}
					if r.attempt == e.Attempt {
						delete(rec, e.Task)
						res = r.res
					}
					work = append(work, g.Complete(e.Task, e.Attempt, res, now)...)
				}
			case e.Kind == graph.SetTimer && e.Timer.Kind == graph.Retry:
				if r, ok := rec[e.Timer.Task]; ok && r.attempt > e.Timer.Attempt {
					work = append(work, g.Fire(e.Timer, now)...)
				} else {
					pending = append(pending, e.Timer)
				}
			case e.Kind == graph.SetTimer && e.Timer.Kind == graph.Next:
				if _, ok := rec[e.Timer.Task]; ok {
					work = append(work, g.Fire(e.Timer, now)...)
				} else {
					pending = append(pending, e.Timer)
				}
			case e.Kind == graph.Scatter:
				work = append(work, g.Scatter(e.Task, everyNodes(plan.Task(e.Task.Node).GetName()), now)...)
			}
		}
		// A timer that fired in the live graph without a result since (a
		// retry or an iteration in flight) fires again once the engine
		// re-arms it; fire those now to compare.
		work = work[:0]
		for _, tm := range pending {
			st := live.Task(tm.Task)
			if (tm.Kind == graph.Retry && st.Attempt > tm.Attempt) || (tm.Kind == graph.Next && st.Attempt > 0) {
				work = append(work, g.Fire(tm, now)...)
			}
		}
		pending = pending[:0]
		if len(work) == 0 {
			break
		}
	}
	if g.State() != live.State() {
		return fmt.Errorf("replayed: state %s, live %s", g.State(), live.State())
	}
	same := func(what string, a, b graph.TaskInfo) error {
		if a.Status != b.Status || a.Attempt != b.Attempt || a.Width != b.Width || a.Iterations != b.Iterations ||
			!value.Equal(a.Output, b.Output) {
			return fmt.Errorf("%s: replayed %+v, live %+v", what, a, b)
		}
		return nil
	}
	for node := range int32(plan.NumTasks()) {
		a, b := g.Task(graph.Ref(node)), live.Task(graph.Ref(node))
		if err := same(fmt.Sprintf("task %d", node), a, b); err != nil {
			return err
		}
		for i := range max(b.Width, b.Iterations) {
			ref := graph.TaskRef{Node: node, Index: i}
			if err := same(fmt.Sprintf("task %d.%d", node, i), g.Task(ref), live.Task(ref)); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropTransient removes the attempts that were both dispatched and cancelled
// in the last step (records from index d0, c0 and a0 on), with the timers
// armed for them in that step.
func dropTransient(disp []refDispatch, canc []refAttempt, arm []graph.Timer, d0, c0, a0 int) ([]refDispatch, []refAttempt, []graph.Timer) {
	transient := map[refAttempt]bool{}
	for _, d := range disp[d0:] {
		if slices.Contains(canc[c0:], d.refAttempt) {
			transient[d.refAttempt] = true
		}
	}
	outD := slices.Clone(disp[:d0])
	for _, d := range disp[d0:] {
		if !transient[d.refAttempt] {
			outD = append(outD, d)
		}
	}
	outC := slices.Clone(canc[:c0])
	for _, c := range canc[c0:] {
		if !transient[c] {
			outC = append(outC, c)
		}
	}
	outA := slices.Clone(arm[:a0])
	for _, t := range arm[a0:] {
		if !transient[refAttempt{Task: t.Task, Attempt: t.Attempt}] {
			outA = append(outA, t)
		}
	}
	return outD, outC, outA
}

func toAny(m map[string]any) any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func compareAttempts(x, y refAttempt) int {
	if x.Task.Node != y.Task.Node {
		return int(x.Task.Node - y.Task.Node)
	}
	if x.Task.Index != y.Task.Index {
		return int(x.Task.Index - y.Task.Index)
	}
	return int(x.Attempt) - int(y.Attempt)
}

func sameDispatches(a, b []refDispatch) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	cmp := func(x, y refDispatch) int {
		if c := compareAttempts(x.refAttempt, y.refAttempt); c != 0 {
			return c
		}
		switch {
		case x.Input < y.Input:
			return -1
		case x.Input > y.Input:
			return 1
		}
		return 0
	}
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// sameTimers compares the timers armed by both; after a restore the graph
// re-arms pending timers, so duplicates are allowed then.
func sameTimers(got, want []graph.Timer, restored bool) bool {
	norm := func(ts []graph.Timer) []string {
		out := make([]string, 0, len(ts))
		for _, t := range ts {
			out = append(out, fmt.Sprintf("%d/%d/%d/%d@%d", t.Kind, t.Task.Node, t.Task.Index, t.Attempt, t.At.UnixNano()))
		}
		slices.Sort(out)
		if restored {
			out = slices.Compact(out)
		}
		return out
	}
	return slices.Equal(norm(got), norm(want))
}

// resultFor decides an attempt's outcome from a hash, so both schedulers see
// the same result for the same attempt: a quarter fail, the rest return a map
// with a list (for spreads downstream) and their input (so data flow is
// checked end to end).
func resultFor(seed uint64, task string, index int32, attempt uint32, input any) graph.Result {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d/%d", seed, task, index, attempt)
	x := h.Sum64()
	if x%4 == 0 {
		return graph.Result{Err: fmt.Errorf("%s[%d] attempt %d failed", task, index, attempt)}
	}
	items := make([]any, x%4)
	for i := range items {
		items[i] = int64(x>>(8*i)) % 100
	}
	return graph.Result{Output: map[string]any{"items": items, "in": input, "task": task}}
}

func randomInputs(rng *rand.Rand) map[string]any {
	xs := make([]any, rng.IntN(5))
	for i := range xs {
		xs[i] = int64(rng.IntN(50))
	}
	return map[string]any{"n": int64(rng.IntN(10)), "xs": xs, "flag": rng.IntN(2) == 0}
}

// randomLoop is a loop until a condition on the iteration's output (which
// reads previous and iteration too, and sometimes cannot be evaluated), or
// over a list, with or without max and a pause.
func randomLoop(rng *rand.Rand, upstream string) *robonetv1.Loop {
	l := &robonetv1.Loop{}
	if rng.IntN(2) == 0 {
		untils := []string{"size(output.items) >= 2", "iteration >= 1 && output != null",
			"previous != null && size(previous.items) <= size(output.items)", "output.items[0] > 50"}
		l.Until = &robonetv1.Expr{Source: untils[rng.IntN(len(untils))]}
		l.Max = uint32(1 + rng.IntN(4))
	} else {
		src := "inputs.xs"
		if upstream != "" && rng.IntN(2) == 0 {
			src = "tasks." + upstream + ".output.items"
		}
		l.Over = &robonetv1.Expr{Source: src}
		if rng.IntN(3) == 0 {
			l.Max = uint32(1 + rng.IntN(4))
		}
	}
	if rng.IntN(2) == 0 {
		l.Every = durationpb.New(2 * time.Second)
	}
	return l
}

func exprTemplate(src string) *robonetv1.Template {
	return &robonetv1.Template{Kind: &robonetv1.Template_Expr{Expr: &robonetv1.Expr{Source: src}}}
}

// randomWorkflow builds a random valid IR: tasks t00..tNN where each may need
// earlier tasks, with random joins, spreads, guards, inputs, failure
// policies, retry policies and timeouts.
func randomWorkflow(rng *rand.Rand) *robonetv1.Workflow {
	n := 1 + rng.IntN(10)
	wf := &robonetv1.Workflow{Name: "random", Version: 1, Inputs: []*robonetv1.Input{
		{Name: "flag", Type: robonetv1.ValueType_VALUE_TYPE_BOOL, Required: true},
		{Name: "n", Type: robonetv1.ValueType_VALUE_TYPE_INT, Required: true},
		{Name: "xs", Type: robonetv1.ValueType_VALUE_TYPE_LIST, Required: true},
	}}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	for i := range n {
		t := &robonetv1.Task{Name: fmt.Sprintf("t%02d", i), Capability: "c", Action: "a"}
		if i > 0 {
			for range rng.IntN(4) {
				t.Needs = append(t.Needs, fmt.Sprintf("t%02d", rng.IntN(i)))
			}
			slices.Sort(t.Needs)
			t.Needs = slices.Compact(t.Needs)
		}
		if len(t.Needs) >= 2 && rng.IntN(3) == 0 {
			t.Join = &robonetv1.Join{Min: uint32(1 + rng.IntN(len(t.Needs))), CancelRest: rng.IntN(2) == 0}
		}
		var upstream string
		if len(t.Needs) > 0 {
			upstream = pick(t.Needs)
		}
		if rng.IntN(10) < 3 {
			src := "inputs.xs"
			if upstream != "" && rng.IntN(2) == 0 {
				src = "tasks." + upstream + ".output.items"
			}
			t.Spread = &robonetv1.Expr{Source: src}
		} else if rng.IntN(5) == 0 {
			t.Loop = randomLoop(rng, upstream)
		} else if rng.IntN(5) == 0 {
			t.On = robonetv1.TaskOn_TASK_ON_EVERY_NODE // over everyNodes(t.Name)
		}
		if t.On == robonetv1.TaskOn_TASK_ON_UNSPECIFIED && rng.IntN(4) == 0 {
			// A child workflow task is scheduled as any task is (the
			// reference knows nothing of it); its count is in the
			// snapshot, which the replay and restore checks compare.
			t.Capability, t.Action = "", ""
			t.Workflow = &robonetv1.ChildWorkflow{Name: "child", Version: uint32(rng.IntN(3))}
		}
		switch r := rng.IntN(5); {
		case r == 0:
			t.With = &robonetv1.Template{Kind: &robonetv1.Template_LiteralJson{LiteralJson: []byte(`{"k":1}`)}}
		case r == 1 && upstream != "":
			t.With = exprTemplate("tasks." + upstream + ".output")
		case r == 2 && (t.Spread != nil || t.On == robonetv1.TaskOn_TASK_ON_EVERY_NODE):
			t.With = &robonetv1.Template{Kind: &robonetv1.Template_Map{Map: &robonetv1.TemplateMap{Entries: []*robonetv1.TemplateEntry{
				{Key: "i", Value: exprTemplate("index")}, {Key: "item", Value: exprTemplate("item")},
			}}}}
		case r == 2 && t.Loop != nil:
			entries := []*robonetv1.TemplateEntry{
				{Key: "i", Value: exprTemplate("iteration")}, {Key: "prev", Value: exprTemplate("previous")},
			}
			if t.Loop.GetOver() != nil {
				entries = append(entries, &robonetv1.TemplateEntry{Key: "item", Value: exprTemplate("item")})
			}
			t.With = &robonetv1.Template{Kind: &robonetv1.Template_Map{Map: &robonetv1.TemplateMap{Entries: entries}}}
		case r == 3:
			t.With = &robonetv1.Template{Kind: &robonetv1.Template_Interpolation{Interpolation: &robonetv1.Interpolation{Parts: []*robonetv1.InterpolationPart{
				{Part: &robonetv1.InterpolationPart_Text{Text: "n="}},
				{Part: &robonetv1.InterpolationPart_Expr{Expr: &robonetv1.Expr{Source: "inputs.n"}}},
			}}}}
		}
		if rng.IntN(4) == 0 {
			guards := []string{"inputs.flag", "!inputs.flag", "size(inputs.xs) > 1", "inputs.n"}
			if upstream != "" {
				guards = append(guards, "tasks."+upstream+".output != null")
			}
			t.When = &robonetv1.Expr{Source: pick(guards)}
		}
		t.OnFailure = []robonetv1.FailurePolicy{
			robonetv1.FailurePolicy_FAILURE_POLICY_RETRY,
			robonetv1.FailurePolicy_FAILURE_POLICY_SKIP,
			robonetv1.FailurePolicy_FAILURE_POLICY_ABORT,
		}[rng.IntN(3)]
		attempts := uint32(1 + rng.IntN(3))
		if t.OnFailure == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT {
			attempts = 1
		}
		t.Retry = &robonetv1.RetryPolicy{MaxAttempts: attempts, Initial: durationpb.New(time.Second), Factor: 2, Max: durationpb.New(3 * time.Second)}
		if rng.IntN(5) == 0 {
			t.Timeout = durationpb.New(10 * time.Second)
		}
		wf.Tasks = append(wf.Tasks, t)
	}
	wf.Outputs = append(wf.Outputs, &robonetv1.Output{Name: "last", Value: exprTemplate(fmt.Sprintf("tasks.t%02d.output", n-1))})
	if rng.IntN(2) == 0 {
		wf.Outputs = append(wf.Outputs, &robonetv1.Output{Name: "count", Value: exprTemplate("size(inputs.xs)")})
	}
	return wf
}

// everyNodes is the nodes that serve a task with on: every_node in the
// differential test: a fixed answer per task name, from none to four with
// a duplicate, not sorted (the graph sorts and deduplicates).
func everyNodes(task string) []string {
	h := fnv.New32a()
	h.Write([]byte(task))
	return []string{"node-c", "node-a", "node-b", "node-a"}[:h.Sum32()%5]
}
