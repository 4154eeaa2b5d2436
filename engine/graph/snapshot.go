package graph

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

// snapshotVersion is the first byte of every snapshot.
const snapshotVersion = 1

// ErrBadSnapshot wraps every error of Restore.
var ErrBadSnapshot = errors.New("invalid graph snapshot")

// Snapshot encodes the state of the instance. The encoding is deterministic:
// equal states give equal bytes. Stats and the effect buffer are not part of
// it; readiness counters are derived again by Restore.
//
// Layout (version 1; "uv" is an unsigned varint, "v" a signed one, "str"
// uv length + bytes, "val" a str holding canonical JSON):
//
//	byte 1, str instanceID, str workflow name, uv version, uv tasks
//	byte state; val inputs unless PENDING
//	FAILED:   str task, v index, uv attempt, uv policy, str output, str reason
//	COMPLETE: val outputs
//	per task: byte status, uv attempt, [v due], [val output],
//	  byte 0 (nothing more), 1 (spread), 2 (loop) or 3 (on: every_node)
//	  every_node: uv nodes, str per node (sorted), then, unless there
//	          are none yet (the task waits for Graph.Scatter), as a spread
//	  spread: uv width, width status bytes,
//	          per instance: uv attempt, [v due], [val output]
//	  loop:   uv items (the length of the list while a loop over one
//	          runs, else 0), uv iterations completed, byte status and
//	          uv attempt of the current iteration, [v due],
//	          [val output] per completed iteration unless the task completed
//	uv errors, per error sorted by (node, index): v node, v index, str reason
//	only when the plan has joins: uv seq, per task: uv resolvedAt,
//	  [uv firedAt] for a join (see Graph.firedAt)
//	only when the plan has child workflow tasks: uv children started
//	then optional sections, each a tag byte and its content, by tag:
//	  1 (only when some task has an attempt base, see SetAttemptBase):
//	    uv count, per task with a base in node order: uv node, uv base
//
// A due time is present for a retrying attempt and for a running attempt of
// a task with a timeout, or of a wait for a duration or until a time.
//
// The optional sections keep the bytes of a snapshot that needs none as
// they were before sections existed, and let such a snapshot decode as it
// always did (every attempt base 0). A reader refuses a tag it does not
// know, as trailing data. An output is present for a completed task, and for
// a completed instance of a spread task that has not completed.
func (g *Graph) Snapshot() ([]byte, error) {
	p := g.plan
	w := writer{buf: make([]byte, 0, 64+16*len(g.plan.nodes))}
	w.byte(snapshotVersion)
	w.str(g.id)
	w.str(p.wf.GetName())
	w.uv(uint64(p.wf.GetVersion()))
	w.uv(uint64(len(p.nodes)))
	g.snapshotState(&w)
	for node := range g.plan.nodes {
		g.snapshotTask(&w, int32(node))
	}
	g.snapshotErrors(&w)
	if p.joins {
		g.snapshotOrder(&w)
	}
	if p.children {
		w.uv(uint64(g.children))
	}
	g.snapshotSections(&w)
	if w.err != nil {
		return nil, fmt.Errorf("graph: snapshot of %s: %w", g.id, w.err)
	}
	return w.buf, nil
}

// snapshotState writes the instance's state and what goes with it: its
// inputs once started, its failure or its outputs once ended so.
func (g *Graph) snapshotState(w *writer) {
	w.byte(byte(g.state))
	if g.state != Pending {
		w.val(g.inputs)
	}
	switch g.state {
	case Failed:
		e := g.err
		w.str(e.Task)
		w.v(int64(e.Index))
		w.uv(uint64(e.Attempt))
		w.uv(uint64(e.Policy))
		w.str(e.Output)
		w.str(e.Reason)
	case Complete:
		w.val(g.outputs)
	}
}

// snapshotTask writes the state of task node: its status, attempt, due
// time and output, then its loop or spread, if any.
func (g *Graph) snapshotTask(w *writer, node int32) {
	st := g.ns[node].status
	nd := &g.plan.nodes[node]
	w.byte(byte(st))
	w.uv(uint64(g.ns[node].attempt))
	if hasDue(st, nd) {
		w.v(g.due[node])
	}
	if st == TaskCompleted {
		w.val(g.output[node])
	}
	if lp := g.loopOf(node); lp != nil {
		w.byte(2)
		w.uv(uint64(len(lp.items)))
		w.uv(uint64(len(lp.outputs)))
		w.byte(byte(lp.status))
		w.uv(uint64(lp.attempt))
		if loopHasDue(lp.status, nd) {
			w.v(lp.due)
		}
		if st != TaskCompleted {
			for _, out := range lp.outputs {
				w.val(out)
			}
		}
		return
	}
	if sp := g.spreads[node]; sp != nil {
		snapshotSpread(w, sp, nd, st)
		return
	}
	w.byte(0)
}

// snapshotSpread writes sp, the spread of task nd in status st: for on:
// every_node its nodes, then, unless it waits for them, its instances.
func snapshotSpread(w *writer, sp *spread, nd *node, st TaskStatus) {
	if sp.every {
		w.byte(3)
		w.uv(uint64(len(sp.nodes)))
		for _, n := range sp.nodes {
			w.str(n)
		}
		if sp.nodes == nil {
			return // waiting for its nodes
		}
	} else {
		w.byte(1)
	}
	w.uv(uint64(len(sp.status)))
	for _, ist := range sp.status {
		w.byte(byte(ist))
	}
	for i, ist := range sp.status {
		w.uv(uint64(sp.attempt[i]))
		if hasDue(ist, nd) {
			w.v(sp.due[i])
		}
		if ist == TaskCompleted && st != TaskCompleted {
			w.val(sp.output[i])
		}
	}
}

// snapshotErrors writes the errors of the tasks and instances that failed,
// sorted by (node, index).
func (g *Graph) snapshotErrors(w *writer) {
	keys := make([]TaskRef, 0, len(g.errs))
	for k := range g.errs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b TaskRef) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Index, b.Index))
	})
	w.uv(uint64(len(keys)))
	for _, k := range keys {
		w.v(int64(k.Node))
		w.v(int64(k.Index))
		w.str(g.errs[k])
	}
}

// snapshotOrder writes the order in which the tasks of a plan with joins
// resolved, and in which its joins fired.
func (g *Graph) snapshotOrder(w *writer) {
	w.uv(g.seq)
	for node := range g.plan.nodes {
		w.uv(g.resolvedAt[node])
		if g.plan.nodes[node].joinMin > 0 {
			w.uv(g.firedAt[node])
		}
	}
}

// snapshotSections writes the optional sections that have content, in tag
// order.
func (g *Graph) snapshotSections(w *writer) {
	if n := countNonZero(g.base); n > 0 {
		w.byte(sectionAttemptBase)
		w.uv(uint64(n))
		for node, b := range g.base {
			if b != 0 {
				w.uv(uint64(node))
				w.uv(uint64(b))
			}
		}
	}
}

// hasDue reports whether a task or instance in status st carries a due time
// in the snapshot.
func hasDue(st TaskStatus, nd *node) bool {
	return st == TaskRetrying || (st == TaskRunning && nd.runningDue())
}

// loopHasDue is hasDue for the current iteration of a loop, which also
// has one while it waits for its pause.
func loopHasDue(st TaskStatus, nd *node) bool { return st == TaskWaiting || hasDue(st, nd) }

// loopOf returns the loop state of node, nil when it has none (yet).
func (g *Graph) loopOf(node int32) *loopState {
	if g.loops == nil {
		return nil
	}
	return g.loops[node]
}

// Restore rebuilds an instance from a Snapshot of an instance of the same
// plan. Call Resume on the result to get the effects the runloop must
// re-apply. Spread tasks that are still spreading evaluate their spread
// expression again (upstream outputs are immutable, so the list is the same).
func (p *Plan) Restore(instanceID string, snap []byte) (*Graph, error) {
	g, err := p.restore(instanceID, snap)
	if err != nil {
		return nil, fmt.Errorf("%w: instance %s: %w", ErrBadSnapshot, instanceID, err)
	}
	return g, nil
}

func (p *Plan) restore(instanceID string, snap []byte) (*Graph, error) {
	r := reader{buf: snap}
	if err := p.restoreHeader(&r, instanceID); err != nil {
		return nil, err
	}
	g := p.NewGraph(instanceID)
	if err := g.restoreState(&r); err != nil {
		return nil, err
	}
	for node := range p.nodes {
		if err := g.restoreTask(&r, int32(node)); err != nil {
			return nil, err
		}
	}
	if err := g.restoreErrors(&r); err != nil {
		return nil, err
	}
	var seq uint64
	var resolvedAt, firedAt []uint64
	if p.joins {
		var err error
		if seq, resolvedAt, firedAt, err = p.restoreOrder(&r); err != nil {
			return nil, err
		}
	}
	if p.children {
		g.children = uint32(min(r.uv(), math.MaxUint32))
	}
	if err := g.restoreSections(&r); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.buf) != 0 {
		return nil, fmt.Errorf("%d bytes of trailing data", len(r.buf))
	}
	if p.joins {
		// deriveReadiness resolves again in node order: it needs the
		// recorded order for spreads of joins, and must not renumber it.
		g.seq, g.resolvedAt, g.firedAt = seq, resolvedAt, firedAt
		g.restoring = true
	}
	err := g.deriveReadiness()
	g.restoring = false
	if err != nil {
		return nil, err
	}
	return g, nil
}

// restoreHeader reads the header of a snapshot and checks that it is one
// of instance instanceID of this plan's workflow.
func (p *Plan) restoreHeader(r *reader, instanceID string) error {
	if v := r.byte(); r.err == nil && v != snapshotVersion {
		return fmt.Errorf("unknown snapshot version %d", v)
	}
	if id := r.str(); r.err == nil && id != instanceID {
		return fmt.Errorf("snapshot is of instance %q", id)
	}
	name, version, ntasks := r.str(), r.uv(), r.uv()
	if r.err != nil {
		return r.err
	}
	if name != p.wf.GetName() || version != uint64(p.wf.GetVersion()) || ntasks != uint64(len(p.nodes)) {
		return fmt.Errorf("snapshot is of workflow %s v%d with %d tasks, the plan is %s v%d with %d tasks",
			name, version, ntasks, p.wf.GetName(), p.wf.GetVersion(), len(p.nodes))
	}
	return nil
}

// restoreState reads the instance's state and what goes with it: its
// inputs once started, its failure or its outputs once ended so.
func (g *Graph) restoreState(r *reader) error {
	p := g.plan
	g.state = State(r.byte())
	if g.state > Cancelled {
		return fmt.Errorf("unknown state %d", g.state)
	}
	if g.state != Pending {
		in, ok := r.val().(map[string]any)
		if !ok && r.err == nil {
			return errors.New("inputs are not a map")
		}
		g.inputs = in
	}
	switch g.state {
	case Failed:
		e := &WorkflowError{}
		e.Task, e.Index, e.Attempt = r.str(), int32(r.v()), uint32(r.uv())
		e.Policy = robonetv1.FailurePolicy(r.uv())
		e.Output, e.Reason = r.str(), r.str()
		if n, ok := p.names[e.Task]; ok && e.Output == "" {
			e.Loop = p.nodes[n].loop != nil
		}
		g.err = e
	case Complete:
		out, ok := r.val().(map[string]any)
		if !ok && r.err == nil {
			return errors.New("outputs are not a map")
		}
		g.outputs = out
	}
	return nil
}

// restoreTask reads the state of task node: its status, attempt, due time
// and output, then its loop or spread, if any.
func (g *Graph) restoreTask(r *reader, node int32) error {
	nd := &g.plan.nodes[node]
	st := TaskStatus(r.byte())
	if st >= TaskUnknown {
		return fmt.Errorf("task %q: unknown status %d", nd.name, st)
	}
	g.ns[node].status, g.ns[node].attempt = st, uint32(r.uv())
	if hasDue(st, nd) {
		g.due[node] = r.v()
	}
	if st == TaskCompleted {
		g.output[node] = r.val()
	}
	switch r.byte() {
	case 0:
		if st == TaskSpreading || st == TaskLooping {
			return fmt.Errorf("task %q is %s without its state", nd.name, st)
		}
		return nil
	case 2:
		return g.restoreLoop(r, node)
	case 1:
		if nd.spread == nil {
			return fmt.Errorf("task %q has instances but no spread", nd.name)
		}
	case 3:
		if !nd.everyNode {
			return fmt.Errorf("task %q has nodes but no on: every_node", nd.name)
		}
	default:
		return fmt.Errorf("task %q: unknown task state kind", nd.name)
	}
	return g.restoreSpread(r, node)
}

// restoreSpread reads the spread of node (after its status and output):
// for on: every_node its nodes, then its instances.
func (g *Graph) restoreSpread(r *reader, node int32) error {
	p := g.plan
	nd := &p.nodes[node]
	st := g.ns[node].status
	var nodes []string
	if nd.everyNode {
		n := r.uv()
		if n > uint64(p.opts.MaxSpreadWidth) || n > uint64(len(r.buf)) {
			return fmt.Errorf("task %q: bad node count %d", nd.name, n)
		}
		if n == 0 {
			if st != TaskSpreading && st != TaskCancelled {
				return fmt.Errorf("task %q is %s, waiting for its nodes", nd.name, st)
			}
			g.spreads[node] = &spread{every: true}
			return nil
		}
		nodes = make([]string, n)
		for i := range nodes {
			nodes[i] = r.str()
		}
	}
	width := r.uv()
	if width == 0 || width > uint64(p.opts.MaxSpreadWidth) || width > uint64(len(r.buf)) ||
		(nodes != nil && width != uint64(len(nodes))) {
		return fmt.Errorf("task %q: bad spread width %d", nd.name, width)
	}
	sp := newSpread(make([]any, width), nd.needsDue())
	if nodes != nil {
		sp.every, sp.nodes = true, nodes
		for i, n := range nodes {
			sp.items[i] = n
		}
	}
	if err := restoreInstances(r, sp, nd, st); err != nil {
		return err
	}
	if st == TaskCompleted {
		list, ok := g.output[node].([]any)
		if !ok || len(list) != len(sp.status) || sp.pending != 0 {
			return fmt.Errorf("task %q: output does not match its instances", nd.name)
		}
		sp.output, sp.items, sp.due = list, nil, nil
		if sp.every {
			if sp.output, ok = everyOutputs(sp.nodes, list); !ok {
				return fmt.Errorf("task %q: output does not match its nodes", nd.name)
			}
		}
	}
	g.spreads[node] = sp
	return nil
}

// restoreInstances reads the instances of sp, a spread of task nd in
// status st: their statuses, then each one's attempt, due time and, while
// the task has not completed, output.
func restoreInstances(r *reader, sp *spread, nd *node, st TaskStatus) error {
	sp.pending = 0
	for i := range sp.status {
		ist := TaskStatus(r.byte())
		if hasDue(ist, nd) && sp.due == nil {
			return fmt.Errorf("task %q[%d] is %s but has no retries", nd.name, i, ist)
		}
		switch ist {
		case TaskRunning, TaskRetrying:
			sp.pending++
		case TaskCompleted, TaskFailed, TaskCancelled:
		default:
			return fmt.Errorf("task %q[%d]: bad instance status %d", nd.name, i, ist)
		}
		sp.status[i] = ist
	}
	for i, ist := range sp.status {
		sp.attempt[i] = uint32(r.uv())
		if hasDue(ist, nd) {
			sp.due[i] = r.v()
		}
		if ist == TaskCompleted && st != TaskCompleted {
			sp.output[i] = r.val()
		}
	}
	return nil
}

// restoreErrors reads the errors of the tasks and instances that failed.
func (g *Graph) restoreErrors(r *reader) error {
	nerr := r.uv()
	if nerr > uint64(len(r.buf)) {
		return errors.New("bad error count")
	}
	for range nerr {
		ref := TaskRef{Node: int32(r.v()), Index: int32(r.v())}
		if r.err == nil && (ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) || ref.Index < -1) {
			return fmt.Errorf("error recorded for unknown task %v", ref)
		}
		g.errs[ref] = r.str()
	}
	return nil
}

// restoreOrder reads the order in which the tasks of a plan with joins
// resolved, and in which its joins fired: the last number given, and each
// task's (see Graph.firedAt).
func (p *Plan) restoreOrder(r *reader) (seq uint64, resolvedAt, firedAt []uint64, err error) {
	seq = r.uv()
	resolvedAt, firedAt = make([]uint64, len(p.nodes)), make([]uint64, len(p.nodes))
	for node := range p.nodes {
		resolvedAt[node] = r.uv()
		if p.nodes[node].joinMin > 0 {
			firedAt[node] = r.uv()
		}
		if r.err == nil && (resolvedAt[node] > seq || firedAt[node] > seq) {
			return 0, nil, nil, fmt.Errorf("task %q: resolution order beyond %d", p.nodes[node].name, seq)
		}
	}
	return seq, resolvedAt, firedAt, nil
}

// Tags of the optional sections at the end of a snapshot.
const (
	sectionAttemptBase = 1
)

// restoreSections reads the optional sections, in tag order.
func (g *Graph) restoreSections(r *reader) error {
	last := byte(0)
	for r.err == nil && len(r.buf) > 0 {
		tag := r.byte()
		if tag <= last {
			return fmt.Errorf("snapshot section %d after section %d", tag, last)
		}
		last = tag
		switch tag {
		case sectionAttemptBase:
			n := r.uv()
			if n == 0 || n > uint64(len(g.plan.nodes)) {
				return fmt.Errorf("bad attempt base count %d", n)
			}
			g.base = make([]uint32, len(g.plan.nodes))
			prev := int64(-1)
			for range n {
				node, b := r.uv(), r.uv()
				if r.err != nil {
					return r.err
				}
				if int64(node) <= prev || node >= uint64(len(g.plan.nodes)) || b == 0 || b >= math.MaxUint32 {
					return fmt.Errorf("bad attempt base %d of task %d", b, node)
				}
				prev = int64(node)
				g.base[node] = uint32(b)
			}
		default:
			return fmt.Errorf("unknown snapshot section %d", tag)
		}
	}
	return nil
}

func countNonZero(s []uint32) int {
	n := 0
	for _, x := range s {
		if x != 0 {
			n++
		}
	}
	return n
}

// restoreLoop reads the loop state of node (after its status and output).
func (g *Graph) restoreLoop(r *reader, node int32) error {
	nd := &g.plan.nodes[node]
	if nd.loop == nil {
		return fmt.Errorf("task %q has iterations but no loop", nd.name)
	}
	st := g.ns[node].status
	items, done := r.uv(), r.uv()
	ist, attempt := TaskStatus(r.byte()), uint32(r.uv())
	limit, _ := nd.loop.limit(g.plan.opts)
	if r.err != nil {
		return r.err
	}
	if done > uint64(limit) || (st != TaskCompleted && done > uint64(len(r.buf))) || items > uint64(limit) || (items > 0) != (st == TaskLooping && nd.loop.over != nil) ||
		(items > 0 && done >= items) {
		return fmt.Errorf("task %q: bad loop of %d items with %d iterations done", nd.name, items, done)
	}
	switch {
	case st == TaskLooping && (ist == TaskRunning || ist == TaskRetrying || ist == TaskWaiting):
	case st == TaskCompleted && ist == TaskCompleted,
		st == TaskFailed && (ist == TaskFailed || ist == TaskCompleted),
		st == TaskCancelled && (ist == TaskCancelled || ist == TaskCompleted):
	default:
		return fmt.Errorf("task %q is %s with its current iteration %s", nd.name, st, ist)
	}
	lp := &loopState{status: ist, attempt: attempt}
	if loopHasDue(ist, nd) {
		lp.due = r.v()
	}
	if st == TaskCompleted {
		list, ok := g.output[node].([]any)
		if !ok || uint64(len(list)) != done {
			return fmt.Errorf("task %q: output does not match its %d iterations", nd.name, done)
		}
		lp.outputs = list
	} else {
		lp.outputs = make([]any, done)
		for i := range lp.outputs {
			lp.outputs[i] = r.val()
		}
	}
	if items > 0 {
		// Evaluated again once the readiness is derived (upstream
		// outputs are immutable, so the list is the same).
		lp.items = make([]any, items)
	}
	g.loops[node] = lp
	return r.err
}

// deriveReadiness recomputes the readiness counters from the task statuses,
// checks that the statuses are consistent with them, and evaluates the
// spread lists of spreading tasks.
func (g *Graph) deriveReadiness() error {
	p := g.plan
	for node := range g.plan.nodes {
		st := g.ns[node].status
		if st == TaskWaiting {
			g.waiting++
		}
		switch st {
		case TaskCompleted:
			g.resolve(int32(node), completedOutcome)
		case TaskFailed:
			g.resolve(int32(node), failedOutcome)
		case TaskSkipped:
			g.resolve(int32(node), skippedOutcome)
		case TaskCancelled:
			if g.state.active() { // cancelled by a join; at the end, by the end
				g.resolve(int32(node), skippedOutcome)
			}
		}
	}
	g.work, g.joinq = g.work[:0], g.joinq[:0]
	if !g.state.active() {
		return nil
	}
	if (g.waiting == 0) != (g.state == Gathering) {
		return fmt.Errorf("state %s with %d tasks waiting", g.state, g.waiting)
	}
	if g.ns[len(p.nodes)].remaining == 0 {
		return errors.New("every task is resolved but the outputs were not evaluated")
	}
	for node := range g.plan.nodes {
		st := g.ns[node].status
		nd := &p.nodes[node]
		switch {
		case st == TaskCancelled:
			if !g.cancelledByJoin(int32(node)) {
				return fmt.Errorf("task %q is cancelled in state %s", nd.name, g.state)
			}
		case g.ns[node].join:
			// A decided join keeps the counts it was decided with.
			if st == TaskWaiting && (g.ns[node].remaining <= 0 || g.slack[node] < 0) {
				return fmt.Errorf("task %q is waiting, but its join was decided", nd.name)
			}
		case (st == TaskWaiting) != (g.ns[node].remaining > 0):
			return fmt.Errorf("task %q is %s with %d unresolved predecessors", nd.name, st, g.ns[node].remaining)
		}
		if st == TaskLooping && nd.loop.over != nil {
			lp := g.loops[node]
			g.sc.reset(g.cutoffOf(int32(node)))
			v, err := nd.loop.over.Eval(&g.sc)
			items, ok := v.([]any)
			if err != nil || !ok || len(items) != len(lp.items) {
				return fmt.Errorf("task %q: loop.over no longer yields its %d items", nd.name, len(lp.items))
			}
			lp.items = items
		}
		sp := g.spreads[node]
		switch st {
		case TaskSpreading:
			if sp.every && sp.nodes == nil {
				continue // waiting for its nodes: Resume asks again
			}
			if sp.pending == 0 {
				return fmt.Errorf("task %q is spreading with no instance pending", nd.name)
			}
			if sp.every {
				continue // items are the node names
			}
			g.sc.reset(g.cutoffOf(int32(node)))
			v, err := nd.spread.Eval(&g.sc)
			items, ok := v.([]any)
			if err != nil || !ok || len(items) != len(sp.status) {
				return fmt.Errorf("task %q: the spread expression no longer yields its %d items", nd.name, len(sp.status))
			}
			sp.items = items
		}
	}
	return nil
}

// cancelledByJoin reports whether a task cancelled in an active instance is
// a need of a decided join with cancel_rest, the only way there is one.
func (g *Graph) cancelledByJoin(node int32) bool {
	for _, s := range g.plan.successors(node) {
		if int(s) < len(g.plan.nodes) && g.plan.nodes[s].cancelRest && g.ns[s].status != TaskWaiting {
			return true
		}
	}
	return false
}

type writer struct {
	buf     []byte
	scratch []byte
	err     error
}

func (w *writer) byte(b byte)  { w.buf = append(w.buf, b) }
func (w *writer) uv(x uint64)  { w.buf = binary.AppendUvarint(w.buf, x) }
func (w *writer) v(x int64)    { w.buf = binary.AppendVarint(w.buf, x) }
func (w *writer) str(s string) { w.uv(uint64(len(s))); w.buf = append(w.buf, s...) }

func (w *writer) val(x any) {
	var err error
	w.scratch, err = value.AppendEncode(w.scratch[:0], x)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.uv(uint64(len(w.scratch)))
	w.buf = append(w.buf, w.scratch...)
}

type reader struct {
	buf []byte
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) byte() byte {
	if r.err != nil || len(r.buf) == 0 {
		r.fail(errTruncated)
		return 0
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b
}

func (r *reader) uv() uint64 {
	x, n := binary.Uvarint(r.buf)
	if r.err != nil || n <= 0 {
		r.fail(errTruncated)
		return 0
	}
	r.buf = r.buf[n:]
	return x
}

func (r *reader) v() int64 {
	x, n := binary.Varint(r.buf)
	if r.err != nil || n <= 0 {
		r.fail(errTruncated)
		return 0
	}
	r.buf = r.buf[n:]
	return x
}

func (r *reader) bytes() []byte {
	n := r.uv()
	if r.err != nil || n > uint64(len(r.buf)) {
		r.fail(errTruncated)
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) val() any {
	b := r.bytes()
	if r.err != nil {
		return nil
	}
	v, err := value.Decode(b)
	if err != nil {
		r.fail(err)
	}
	return v
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
