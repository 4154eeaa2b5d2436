package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// planEntry is a compiled workflow version with what the runloop and the
// views need besides the graph.Plan: names, successor lists and a display
// order. It is immutable and shared by every instance of the version.
type planEntry struct {
	id   int64 // workflow version id in the Store
	plan *graph.Plan
	wf   *robonetv1.Workflow
	info WorkflowInfo
	// order lists the tasks in dependency order: by depth (longest path
	// from a root), then by name.
	order []int32
	// succ lists the direct successors of every task.
	succ [][]int32
	// maxAttempts per task: retry.max_attempts (at least 1), 1 under abort.
	maxAttempts []uint32
	// rootCaps are the capabilities of the tasks that need none, sorted:
	// what a new instance dispatches first (see admission.go); rootKey
	// joins them. None when a first task runs a child workflow, which no
	// capability's backlog holds up.
	rootCaps []string
	rootKey  string
	// labels are the tasks' capabilities as metrics count them: a task
	// whose body is a child workflow counts as "workflow:NAME".
	labels []string
	// latestChildren names the child workflows that tasks run without
	// naming a version, sorted: each instance runs the latest version at
	// its submission (instanceState.pins).
	latestChildren []string
	// waitSignals names the signals its wait: {signal: …} tasks take,
	// sorted: a signal of another name is refused (SignalInstance).
	waitSignals []string
}

// executionID names a task, spread instance or loop iteration within an
// instance, as the Store and AttemptKey do: "task", "task[3]" (a spread's
// element 3) or "task#3" (a loop's iteration 3).
func (pe *planEntry) executionID(ref graph.TaskRef) string {
	t := pe.wf.GetTasks()[ref.Node]
	if ref.Index < 0 {
		return t.GetName()
	}
	if t.GetLoop() != nil {
		return t.GetName() + "#" + strconv.Itoa(int(ref.Index))
	}
	return t.GetName() + "[" + strconv.Itoa(int(ref.Index)) + "]"
}

// parseExecution reverses executionID.
func (pe *planEntry) parseExecution(exec string) (graph.TaskRef, bool) {
	if name, iter, ok := strings.Cut(exec, "#"); ok {
		i, err := strconv.ParseInt(iter, 10, 32)
		node, known := pe.plan.Lookup(name)
		if err != nil || i < 0 || !known || pe.task(node).GetLoop() == nil {
			return graph.TaskRef{}, false
		}
		return graph.TaskRef{Node: node, Index: int32(i)}, true
	}
	name, index := exec, int32(-1)
	if strings.HasSuffix(exec, "]") {
		open := strings.LastIndexByte(exec, '[')
		if open <= 0 {
			return graph.TaskRef{}, false
		}
		i, err := strconv.ParseInt(exec[open+1:len(exec)-1], 10, 32)
		if err != nil || i < 0 {
			return graph.TaskRef{}, false
		}
		name, index = exec[:open], int32(i)
	}
	node, ok := pe.plan.Lookup(name)
	if !ok {
		return graph.TaskRef{}, false
	}
	return graph.TaskRef{Node: node, Index: index}, true
}

// task returns the IR of a task.
func (pe *planEntry) task(node int32) *robonetv1.Task { return pe.wf.GetTasks()[node] }

// taskNames lists the workflow's tasks by name.
func (pe *planEntry) taskNames() []string {
	names := make([]string, 0, len(pe.wf.GetTasks()))
	for _, t := range pe.wf.GetTasks() {
		names = append(names, t.GetName())
	}
	return names
}

// isChild reports whether task node's body is a child workflow.
func (pe *planEntry) isChild(node int32) bool { return pe.task(node).GetWorkflow() != nil }

// plans caches compiled workflow versions by store id. Versions are
// immutable, so an entry never goes stale; the cache holds one entry per
// version ever run by this engine, which is small next to the instances.
type plans struct {
	q  *Query
	mu sync.Mutex
	by map[int64]*planEntry
}

// get returns the plan of a workflow version, compiling it on first use.
func (p *plans) get(ctx context.Context, id int64) (*planEntry, error) {
	p.mu.Lock()
	pe := p.by[id]
	p.mu.Unlock()
	if pe != nil {
		return pe, nil
	}
	wfv, err := p.q.cfg.Store.GetWorkflowByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("loading workflow version %d: %w", id, err)
	}
	return p.add(wfv)
}

// add compiles and caches a workflow version read from the Store. A version
// that cannot be loaded (its IR does not decode, or this engine's limits
// refuse its plan) fails with an error wrapping ErrUnloadable.
func (p *plans) add(wfv port.WorkflowVersion) (*planEntry, error) {
	p.mu.Lock()
	pe := p.by[wfv.ID]
	p.mu.Unlock()
	if pe != nil {
		return pe, nil
	}
	wf := &robonetv1.Workflow{}
	if err := proto.Unmarshal(wfv.IR, wf); err != nil {
		return nil, unloadable(wfv, fmt.Errorf("decoding the stored IR: %w", err))
	}
	pe, err := p.q.newPlanEntry(wfv.ID, wf)
	if err != nil {
		return nil, unloadable(wfv, err)
	}
	return p.put(wfv, pe), nil
}

// put caches pe, built from wfv's IR, as the plan of wfv and returns the
// cached entry (another one, when the version was cached concurrently).
func (p *plans) put(wfv port.WorkflowVersion, pe *planEntry) *planEntry {
	pe.id = wfv.ID
	pe.info.IRHash, pe.info.CreatedAt = wfv.IRHash, wfv.CreatedAt
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.by[wfv.ID]; cur != nil {
		return cur
	}
	p.by[wfv.ID] = pe
	return pe
}

func unloadable(wfv port.WorkflowVersion, err error) error {
	return fmt.Errorf("workflow %s v%d is stored but cannot be loaded (%w: %w); register the corrected spec as a new version",
		wfv.Name, wfv.Version, ErrUnloadable, err)
}

// newPlanEntry builds the plan of wf with the configured limits.
func (q *Query) newPlanEntry(id int64, wf *robonetv1.Workflow) (*planEntry, error) {
	plan, err := graph.NewPlan(wf, q.env, graph.Options{MaxSpreadWidth: q.cfg.SpreadLimit, MaxStepCost: q.cfg.StepCost,
		MaxLoop: q.cfg.Spec.MaxLoop, MaxChildDepth: q.cfg.ChildDepth, MaxChildren: q.cfg.ChildrenPerInstance})
	if err != nil {
		return nil, err
	}
	n := len(wf.GetTasks())
	pe := &planEntry{
		id:          id,
		plan:        plan,
		wf:          wf,
		succ:        make([][]int32, n),
		maxAttempts: make([]uint32, n),
		info: WorkflowInfo{
			Name:         wf.GetName(),
			Version:      wf.GetVersion(),
			Description:  wf.GetDescription(),
			Tasks:        n,
			Capabilities: capabilitiesOf(wf),
		},
	}
	indeg := make([]int, n)
	pe.labels = make([]string, n)
	for i, t := range wf.GetTasks() {
		pe.labels[i] = t.GetCapability()
		if c := t.GetWorkflow(); c != nil {
			pe.labels[i] = "workflow:" + c.GetName()
			if c.GetVersion() == 0 && !slices.Contains(pe.latestChildren, c.GetName()) {
				pe.latestChildren = append(pe.latestChildren, c.GetName())
			}
		}
		if w := t.GetWait(); w != nil {
			pe.labels[i] = "wait"
			if sig := w.GetSignal(); sig != "" && !slices.Contains(pe.waitSignals, sig) {
				pe.waitSignals = append(pe.waitSignals, sig)
			}
		}
		for _, need := range t.GetNeeds() {
			pred, _ := plan.Lookup(need) // NewPlan checked every need
			pe.succ[pred] = append(pe.succ[pred], int32(i))
			indeg[i]++
		}
		pe.maxAttempts[i] = max(t.GetRetry().GetMaxAttempts(), 1)
		if t.GetOnFailure() == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT {
			pe.maxAttempts[i] = 1
		}
	}
	// Kahn's algorithm level by level; tasks are numbered by name, so each
	// level comes out sorted by name.
	level := make([]int32, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			level = append(level, int32(i))
			if c := wf.GetTasks()[i].GetCapability(); !slices.Contains(pe.rootCaps, c) {
				pe.rootCaps = append(pe.rootCaps, c)
			}
		}
	}
	slices.Sort(pe.latestChildren)
	slices.Sort(pe.waitSignals)
	slices.Sort(pe.rootCaps)
	if slices.Contains(pe.rootCaps, "") { // a first task runs a child workflow
		pe.rootCaps = nil
	}
	pe.rootKey = strings.Join(pe.rootCaps, ",")
	for len(level) > 0 {
		pe.order = append(pe.order, level...)
		var next []int32
		for _, t := range level {
			for _, s := range pe.succ[t] {
				if indeg[s]--; indeg[s] == 0 {
					next = append(next, s)
				}
			}
		}
		slices.Sort(next)
		level = next
	}
	return pe, nil
}

// capabilitiesOf lists the capabilities a workflow's tasks need, sorted.
func capabilitiesOf(wf *robonetv1.Workflow) []string {
	var caps []string
	for _, t := range wf.GetTasks() {
		if c := t.GetCapability(); c != "" && !slices.Contains(caps, c) { // "": a child workflow
			caps = append(caps, c)
		}
	}
	slices.Sort(caps)
	return caps
}
