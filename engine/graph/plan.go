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

// DefaultMaxSpreadWidth is the widest spread allowed when Options leaves
// MaxSpreadWidth zero.
const DefaultMaxSpreadWidth = 100_000

// Options tune a Plan.
type Options struct {
	// MaxSpreadWidth bounds the number of instances of one spread task; a
	// wider spread fails the task (without retry). Zero means
	// DefaultMaxSpreadWidth.
	MaxSpreadWidth int
	// MaxStepCost bounds the CEL cost units that the expressions evaluated
	// for one event of an instance (Start, one Complete, one Fire) may
	// spend together: every evaluation has its own limit, but one event
	// can evaluate many (the with of every instance of a spread, the guards
	// of every task a completion makes ready), and the runloop handles
	// other instances only between events. An evaluation that finds the
	// budget spent fails its task, as any evaluation error does. Resume is
	// not charged: it re-evaluates what earlier events already paid for.
	// Zero means DefaultMaxStepCost.
	MaxStepCost uint64
	// MaxLoop bounds the iterations of one loop: a loop over a longer list
	// fails its task (without retry), and so does a loop that reaches it
	// (before its own max). Zero means DefaultMaxLoop.
	MaxLoop int
	// MaxChildDepth bounds how deep child workflows nest: an instance at
	// this depth (Graph.SetDepth) starts no child, its attempt failing
	// without retry. Zero means DefaultMaxChildDepth.
	MaxChildDepth int
	// MaxChildren bounds the child instances one instance starts in its
	// life; the attempt past it fails without retry. Zero means
	// DefaultMaxChildren.
	MaxChildren int
}

// DefaultMaxLoop is the longest loop allowed when Options leaves MaxLoop
// zero; the spec compiler's default bound on loop.max is the same.
const DefaultMaxLoop = 10_000

// DefaultMaxStepCost is the default of Options.MaxStepCost: five times the
// default cost limit of one evaluation.
const DefaultMaxStepCost = 5_000_000

// WithDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.MaxSpreadWidth == 0 {
		o.MaxSpreadWidth = DefaultMaxSpreadWidth
	}
	if o.MaxStepCost == 0 {
		o.MaxStepCost = DefaultMaxStepCost
	}
	if o.MaxLoop == 0 {
		o.MaxLoop = DefaultMaxLoop
	}
	if o.MaxChildDepth == 0 {
		o.MaxChildDepth = DefaultMaxChildDepth
	}
	if o.MaxChildren == 0 {
		o.MaxChildren = DefaultMaxChildren
	}
	return o
}

func (o Options) validate() error {
	if o.MaxSpreadWidth < 0 || o.MaxSpreadWidth > math.MaxInt32 {
		return fmt.Errorf("graph: MaxSpreadWidth %d out of range [1, %d]", o.MaxSpreadWidth, math.MaxInt32)
	}
	if o.MaxLoop < 0 || o.MaxLoop > math.MaxInt32 {
		return fmt.Errorf("graph: MaxLoop %d out of range [1, %d]", o.MaxLoop, math.MaxInt32)
	}
	if o.MaxChildDepth < 0 || o.MaxChildren < 0 || o.MaxChildren > math.MaxInt32 {
		return fmt.Errorf("graph: MaxChildDepth %d and MaxChildren %d must not be negative", o.MaxChildDepth, o.MaxChildren)
	}
	return nil
}

// ErrInvalidPlan wraps every error of NewPlan: the IR is not executable.
var ErrInvalidPlan = errors.New("invalid workflow IR")

// ErrInvalidInput wraps every error of BindInputs.
var ErrInvalidInput = errors.New("invalid workflow input")

// Plan is the immutable, compiled form of one workflow version: tasks by
// index, compiled expressions, and the successor lists of the readiness
// graph. It is built once per workflow version and shared read-only by all
// instances; it is safe for concurrent use.
type Plan struct {
	wf    *robonetv1.Workflow
	env   *expr.Env
	opts  Options
	names map[string]int32
	nodes []node

	// succ lists the direct successors of every node in compressed form:
	// the successors of node i are succ[succStart[i]:succStart[i+1]].
	// Node numTasks is the output node; it has no successors.
	succStart []int32
	succ      []int32
	// required is each node's number of required predecessors (the
	// initial readiness count); the output node requires every sink.
	required []int32

	inputs  []inputSpec
	outputs []outputSpec

	// joins is set when some task has a join (N-of-M needs). A join can
	// run before all its needs resolve, so sinks no longer cover every
	// task: the output node then requires every task instead, each having
	// it as an extra successor.
	joins bool
	// loops is set when some task has a loop.
	loops bool
	// children is set when some task runs a child workflow: the snapshot
	// then carries how many the instance started.
	children bool
	// waits is set when some task is a wait task.
	waits bool
}

// node is the compiled form of one task.
type node struct {
	// Fields read on every completion come first and the struct fits one
	// 64-byte cache line, so completing tasks of a large plan streams one
	// line per task; what only failures and errors read lives behind
	// taskMeta (promoted fields: nd.name, nd.policy, ...).
	*taskMeta
	with *expr.Template
	// withSlot and withPath inline the commonest `with`, a single reference
	// tasks.<name>.output.<path>, so a completion on a large plan reads
	// sequential arrays instead of chasing the template; withSlot is -1
	// otherwise, and withPath is nil when there is no path.
	withSlot int32
	// child: the task's body is a child workflow (childRef, see child.go).
	child bool
	// wait: what a wait task waits for (see wait.go); 0 for other tasks.
	wait     WaitKind
	withPath *[]string
	spread   *expr.Program // nil unless the task fans out
	when     *expr.Program // nil unless the task is guarded
	timeout  time.Duration
}

// taskMeta is the cold part of a compiled task: its name and its failure
// policy, read when an attempt fails and for messages.
type taskMeta struct {
	name        string
	policy      robonetv1.FailurePolicy
	maxAttempts uint32
	initial     time.Duration
	maxDelay    time.Duration
	factor      float64
	jitter      float64
	// accept is the task's acceptance check (nil: none) and acceptText
	// the check as written, quoted by the error of a rejected attempt.
	accept     *expr.Program
	acceptText string
	// joinMin is join.min, 0 for a task without a join; joinNeeds lists
	// the task's needs when cancel_rest is set (nil otherwise).
	joinMin    int32
	cancelRest bool
	joinNeeds  []int32
	// loop is the task's loop; nil for a task without one.
	loop *loopPlan
	// everyNode is set for a task with on: every_node (see Graph.Scatter);
	// capability is then its capability, for messages.
	everyNode  bool
	capability string
	// childRef is the workflow the task runs as a child instance; nil
	// unless node.child.
	childRef *childPlan
	// signal names the signal of a WaitSignal task; waitFor is the
	// duration of a WaitFor task; until (nil for a literal time) and
	// untilText (the expression as written, or the literal) are a
	// WaitUntil task's time.
	signal    string
	waitFor   time.Duration
	until     *expr.Program
	untilText string
}

// loopPlan is the compiled loop of a task: exactly one of until and over.
type loopPlan struct {
	until *expr.Program
	over  *expr.Program
	// max is loop.max, 0 when the loop has none (a loop over a list).
	max   int32
	every time.Duration
}

// limit returns the most iterations the loop may run, and the words that
// name that bound in an error.
func (l *loopPlan) limit(opts Options) (int, string) {
	if l.max > 0 && int(l.max) <= opts.MaxLoop {
		return int(l.max), fmt.Sprintf("loop.max %d", l.max)
	}
	return opts.MaxLoop, fmt.Sprintf("the loop limit of %d (loop-max)", opts.MaxLoop)
}

// needsDue reports whether instances of the task ever carry a due time.
func (n *node) needsDue() bool { return n.runningDue() || n.maxAttempts > 1 }

type inputSpec struct {
	name       string
	typ        robonetv1.ValueType
	required   bool
	hasDefault bool
	def        any
}

type outputSpec struct {
	name string
	tmpl *expr.Template
}

// NewPlan compiles wf. It checks the structure defensively, since the IR may
// come from storage: unique names, known `needs`, no cycles, expressions
// that compile and only read declared inputs and upstream tasks, sane retry
// policies and input defaults of the declared type. env may be nil for an
// environment with default limits.
func NewPlan(wf *robonetv1.Workflow, env *expr.Env, opts Options) (*Plan, error) {
	if wf == nil {
		return nil, fmt.Errorf("%w: nil workflow", ErrInvalidPlan)
	}
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if env == nil {
		var err error
		if env, err = expr.NewEnv(expr.Limits{}); err != nil {
			return nil, err
		}
	}
	if len(wf.GetTasks()) >= math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d tasks is too many", ErrInvalidPlan, len(wf.GetTasks()))
	}
	p := &Plan{wf: wf, env: env, opts: opts}
	if err := p.buildInputs(); err != nil {
		return nil, err
	}
	if err := p.buildGraph(); err != nil {
		return nil, err
	}
	if err := p.compile(); err != nil {
		return nil, err
	}
	if err := p.compileTrigger(); err != nil {
		return nil, err
	}
	return p, nil
}

func planErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPlan, fmt.Sprintf(format, args...))
}

func (p *Plan) buildInputs() error {
	seen := make(map[string]bool, len(p.wf.GetInputs()))
	for _, in := range p.wf.GetInputs() {
		name := in.GetName()
		if name == "" {
			return planErr("an input has no name")
		}
		if seen[name] {
			return planErr("input %q is declared twice", name)
		}
		seen[name] = true
		spec := inputSpec{name: name, typ: in.GetType(), required: in.GetRequired()}
		if len(in.GetDefaultJson()) > 0 {
			def, err := value.Decode(in.GetDefaultJson())
			if err != nil {
				return planErr("input %q: default: %v", name, err)
			}
			if msg := checkType(spec.typ, def); msg != "" {
				return planErr("input %q: default %s", name, msg)
			}
			spec.hasDefault, spec.def, spec.required = true, def, false
		}
		p.inputs = append(p.inputs, spec)
	}
	return nil
}

// buildGraph indexes the tasks, resolves `needs`, builds the successor lists
// (adding the output node after the sinks) and rejects cycles.
func (p *Plan) buildGraph() error {
	tasks := p.wf.GetTasks()
	n := len(tasks)
	p.names = make(map[string]int32, n)
	for i, t := range tasks {
		if t.GetName() == "" {
			return planErr("task #%d has no name", i)
		}
		if _, dup := p.names[t.GetName()]; dup {
			return planErr("task %q is declared twice", t.GetName())
		}
		p.names[t.GetName()] = int32(i)
	}
	p.required = make([]int32, n+1)
	outDegree := make([]int32, n+1)
	for i, t := range tasks {
		needs := t.GetNeeds()
		for j, need := range needs {
			pred, ok := p.names[need]
			if !ok {
				return planErr("task %q needs unknown task %q", t.GetName(), need)
			}
			if pred == int32(i) {
				return planErr("task %q needs itself", t.GetName())
			}
			if slices.Contains(needs[:j], need) {
				return planErr("task %q needs %q twice", t.GetName(), need)
			}
			outDegree[pred]++
		}
		p.required[i] = int32(len(needs))
		if j := t.GetJoin(); j != nil {
			if j.GetMin() < 1 || uint64(j.GetMin()) > uint64(len(needs)) {
				return planErr("task %q: join.min %d is not between 1 and its %d needs", t.GetName(), j.GetMin(), len(needs))
			}
			p.joins = true
		}
	}
	// Successor lists in compressed form; a sink (a task no task needs)
	// gets the output node as its only successor. With joins every task
	// gets it, after its other successors.
	p.succStart = make([]int32, n+2)
	for i := range n {
		d := outDegree[i]
		if d == 0 || p.joins {
			d++
			p.required[n]++
		}
		p.succStart[i+1] = p.succStart[i] + d
	}
	p.succStart[n+1] = p.succStart[n]
	p.succ = make([]int32, p.succStart[n])
	fill := slices.Clone(p.succStart[:n])
	for i, t := range tasks {
		for _, need := range t.GetNeeds() {
			pred := p.names[need]
			p.succ[fill[pred]] = int32(i)
			fill[pred]++
		}
	}
	for i := range n {
		if outDegree[i] == 0 || p.joins {
			p.succ[fill[i]] = int32(n)
		}
	}
	return p.checkAcyclic()
}

// checkAcyclic runs Kahn's algorithm over the tasks and, if some remain,
// reports one cycle among them.
func (p *Plan) checkAcyclic() error {
	n := len(p.wf.GetTasks())
	remaining := slices.Clone(p.required[:n])
	queue := make([]int32, 0, n)
	for i := range n {
		if remaining[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	for head := 0; head < len(queue); head++ {
		for _, s := range p.successors(queue[head]) {
			if int(s) == n {
				continue
			}
			if remaining[s]--; remaining[s] == 0 {
				queue = append(queue, s)
			}
		}
	}
	if len(queue) == n {
		return nil
	}
	// Every unvisited task has an unvisited predecessor: walk predecessors
	// from one of them until a task repeats.
	var start int32 = -1
	for i := range n {
		if remaining[i] > 0 {
			start = int32(i)
			break
		}
	}
	pos := map[int32]int{}
	var path []int32
	for cur := start; ; {
		if at, ok := pos[cur]; ok {
			cycle := path[at:]
			slices.Reverse(cycle) // into `needs` order: each task needs the one before
			first := slices.Index(cycle, slices.Min(cycle))
			cycle = slices.Concat(cycle[first:], cycle[:first])
			names := make([]string, 0, len(cycle)+1)
			for _, c := range cycle {
				names = append(names, p.nodeName(c))
			}
			names = append(names, names[0])
			return planErr("tasks form a cycle: %s", strings.Join(names, " -> "))
		}
		pos[cur] = len(path)
		path = append(path, cur)
		for _, need := range p.wf.GetTasks()[cur].GetNeeds() {
			if pred := p.names[need]; remaining[pred] > 0 {
				cur = pred
				break
			}
		}
	}
}

func (p *Plan) successors(i int32) []int32 { return p.succ[p.succStart[i]:p.succStart[i+1]] }

func (p *Plan) nodeName(i int32) string {
	if int(i) == len(p.wf.GetTasks()) {
		return "(outputs)"
	}
	return p.wf.GetTasks()[i].GetName()
}

// lookupTask numbers a task for expr's BindTasks, so the hot path reads
// outputs by index rather than hashing names (the name map of a
// 100,000-task plan does not stay in cache).
func (p *Plan) lookupTask(name string) (int32, bool) {
	i, ok := p.names[name]
	return i, ok
}

// compile compiles every expression, sharing programs between identical
// sources, and checks what they read.
func (p *Plan) compile() error {
	tasks := p.wf.GetTasks()
	p.nodes = make([]node, len(tasks))
	metas := make([]taskMeta, len(tasks))
	progs := programs{}
	up := newUpstreamChecker(p)
	for i, t := range tasks {
		nd := &p.nodes[i]
		nd.taskMeta = &metas[i]
		nd.name = t.GetName()
		if err := p.compileTask(int32(i), nd, t, progs, up); err != nil {
			return err
		}
	}
	return p.compileOutputs()
}

// programs are the expressions a plan compiled, by source.
type programs map[string]*expr.Program

// compile returns the program of e (nil for none), compiling it unless a
// task compiled the same source before; what names e in an error.
func (ps programs) compile(env *expr.Env, task, what string, e *robonetv1.Expr) (*expr.Program, error) {
	if e == nil {
		return nil, nil
	}
	if prg, ok := ps[e.GetSource()]; ok {
		return prg, nil
	}
	prg, err := env.Compile(e.GetSource())
	if err != nil {
		return nil, planErr("task %q: %s: %v", task, what, err)
	}
	ps[e.GetSource()] = prg
	return prg, nil
}

// compileTask compiles task t, node i, into nd and checks what its
// expressions read.
func (p *Plan) compileTask(i int32, nd *node, t *robonetv1.Task, progs programs, up *upstreamChecker) error {
	var err error
	if nd.when, err = progs.compile(p.env, nd.name, "when", t.GetWhen()); err != nil {
		return err
	}
	if nd.spread, err = progs.compile(p.env, nd.name, "spread", t.GetSpread()); err != nil {
		return err
	}
	if err := compileOn(nd, t); err != nil {
		return err
	}
	if err := compileChild(nd, t); err != nil {
		return err
	}
	p.children = p.children || nd.child
	if nd.with, err = p.env.CompileTemplate(t.GetWith()); err != nil {
		return planErr("task %q: with: %v", nd.name, err)
	}
	if nd.accept, err = progs.compile(p.env, nd.name, "accept", t.GetAccept()); err != nil {
		return err
	}
	nd.acceptText = t.GetAcceptText()
	if nd.accept != nil && nd.acceptText == "" {
		nd.acceptText = "${{ " + nd.accept.Source() + " }}"
	}
	refs, err := taskReads(nd)
	if err != nil {
		return err
	}
	if t.GetLoop() != nil {
		if nd.loop, err = p.compileLoop(nd.name, t); err != nil {
			return err
		}
		refs = append(refs, nd.loop.reads())
	}
	if err := p.checkReads(i, nd, refs, up); err != nil {
		return err
	}
	if err := p.compileFailure(nd, t); err != nil {
		return err
	}
	if err := p.compileWait(nd, t); err != nil {
		return err
	}
	if err := p.checkUntil(i, nd, up); err != nil {
		return err
	}
	p.compileJoin(nd, t)
	p.bindTasks(nd)
	return nil
}

// compileOn reads where task t runs: on: every_node, or where its Waggler
// dispatches it.
func compileOn(nd *node, t *robonetv1.Task) error {
	switch t.GetOn() {
	case robonetv1.TaskOn_TASK_ON_EVERY_NODE:
		if t.GetSpread() != nil || t.GetLoop() != nil {
			return planErr("task %q: on: every_node cannot be combined with spread or loop", nd.name)
		}
		nd.everyNode, nd.capability = true, t.GetCapability()
	case robonetv1.TaskOn_TASK_ON_UNSPECIFIED:
	default:
		return planErr("task %q: unknown on %v", nd.name, t.GetOn())
	}
	return nil
}

// taskReads returns what the with, when, spread and accept of a compiled
// task read; only accept may read the output.
func taskReads(nd *node) ([]expr.Refs, error) {
	var refs []expr.Refs
	refs = append(refs, nd.with.Refs())
	if nd.when != nil {
		refs = append(refs, nd.when.Refs())
	}
	if nd.spread != nil {
		refs = append(refs, nd.spread.Refs())
	}
	for _, r := range refs {
		if r.Output {
			return nil, planErr("task %q: only accept and loop.until can read output", nd.name)
		}
	}
	if nd.accept != nil {
		refs = append(refs, nd.accept.Refs())
	}
	return refs, nil
}

// checkReads checks what the expressions of task i read: iteration and
// previous only in a loop, declared inputs, and upstream tasks.
func (p *Plan) checkReads(i int32, nd *node, refs []expr.Refs, up *upstreamChecker) error {
	for _, r := range refs {
		if (r.Iteration || r.Previous) && nd.loop == nil {
			return planErr("task %q: only a loop task can read iteration and previous", nd.name)
		}
		if err := p.checkInputRefs("task "+quote(nd.name), r); err != nil {
			return err
		}
		if err := up.check(i, r.Tasks); err != nil {
			return err
		}
	}
	return nil
}

// checkUntil checks what the wait.until of task i reads (a time: nothing
// only an attempt has, declared inputs, upstream tasks) and binds it.
func (p *Plan) checkUntil(i int32, nd *node, up *upstreamChecker) error {
	if nd.until == nil {
		return nil
	}
	r := nd.until.Refs()
	if r.Output || r.Iteration || r.Previous || r.Item || r.Index {
		return planErr("task %q: wait.until reads what only an attempt has", nd.name)
	}
	if err := p.checkInputRefs("task "+quote(nd.name), r); err != nil {
		return err
	}
	if err := up.check(i, r.Tasks); err != nil {
		return err
	}
	nd.until.BindTasks(p.lookupTask)
	return nil
}

// compileJoin reads the join of task t: its minimum and, with cancel_rest,
// the needs it cancels.
func (p *Plan) compileJoin(nd *node, t *robonetv1.Task) {
	j := t.GetJoin()
	if j == nil {
		return
	}
	nd.joinMin, nd.cancelRest = int32(j.GetMin()), j.GetCancelRest()
	if nd.cancelRest {
		for _, need := range t.GetNeeds() {
			nd.joinNeeds = append(nd.joinNeeds, p.names[need])
		}
	}
}

// bindTasks binds the task references of a compiled task's with, when,
// spread, accept and loop to the plan's nodes, and inlines a with that is
// a single reference (withSlot, withPath).
func (p *Plan) bindTasks(nd *node) {
	nd.with.BindTasks(p.lookupTask)
	var path []string
	nd.withSlot, path, _ = nd.with.TaskRef()
	if len(path) > 0 {
		nd.withPath = &path
	}
	if nd.when != nil {
		nd.when.BindTasks(p.lookupTask)
	}
	if nd.spread != nil {
		nd.spread.BindTasks(p.lookupTask)
	}
	if nd.accept != nil {
		nd.accept.BindTasks(p.lookupTask)
	}
	if nd.loop != nil {
		for _, prg := range []*expr.Program{nd.loop.until, nd.loop.over} {
			if prg != nil {
				prg.BindTasks(p.lookupTask)
			}
		}
	}
}

// compileOutputs compiles the workflow's outputs and checks what they read.
func (p *Plan) compileOutputs() error {
	seen := map[string]bool{}
	for _, o := range p.wf.GetOutputs() {
		if o.GetName() == "" {
			return planErr("an output has no name")
		}
		if seen[o.GetName()] {
			return planErr("output %q is declared twice", o.GetName())
		}
		seen[o.GetName()] = true
		tmpl, err := p.env.CompileTemplate(o.GetValue())
		if err != nil {
			return planErr("output %q: %v", o.GetName(), err)
		}
		// Every task is upstream of the outputs; it only has to exist.
		for _, name := range tmpl.Refs().Tasks {
			if _, ok := p.names[name]; !ok {
				return planErr("output %q reads unknown task %q", o.GetName(), name)
			}
		}
		if err := p.checkInputRefs("output "+quote(o.GetName()), tmpl.Refs()); err != nil {
			return err
		}
		if r := tmpl.Refs(); r.Iteration || r.Previous {
			return planErr("output %q: only a loop task can read iteration and previous", o.GetName())
		}
		if tmpl.Refs().Output {
			return planErr("output %q: only accept and loop.until can read output", o.GetName())
		}
		tmpl.BindTasks(p.lookupTask)
		p.outputs = append(p.outputs, outputSpec{name: o.GetName(), tmpl: tmpl})
	}
	return nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// compileLoop compiles and checks the loop of task t (a list to loop over
// reads nothing only an iteration has).
func (p *Plan) compileLoop(name string, t *robonetv1.Task) (*loopPlan, error) {
	l := t.GetLoop()
	switch {
	case t.GetSpread() != nil:
		return nil, planErr("task %q has both loop and spread", name)
	case (l.GetUntil() == nil) == (l.GetOver() == nil):
		return nil, planErr("task %q: loop needs exactly one of until and over", name)
	case l.GetUntil() != nil && l.GetMax() == 0:
		return nil, planErr("task %q: loop.until needs loop.max", name)
	case l.GetMax() > math.MaxInt32:
		return nil, planErr("task %q: loop.max %d is too large", name, l.GetMax())
	case l.GetEvery().AsDuration() < 0:
		return nil, planErr("task %q: loop.every must not be negative", name)
	}
	lp := &loopPlan{max: int32(l.GetMax()), every: l.GetEvery().AsDuration()}
	var err error
	if l.GetUntil() != nil {
		if lp.until, err = p.env.Compile(l.GetUntil().GetSource()); err != nil {
			return nil, planErr("task %q: loop.until: %v", name, err)
		}
	} else if lp.over, err = p.env.Compile(l.GetOver().GetSource()); err != nil {
		return nil, planErr("task %q: loop.over: %v", name, err)
	}
	if r := lp.reads(); lp.over != nil && (r.Output || r.Iteration || r.Previous || r.Item) {
		return nil, planErr("task %q: loop.over reads what only an iteration has", name)
	}
	p.loops = true
	return lp, nil
}

// reads returns what the loop's until or over reads.
func (l *loopPlan) reads() expr.Refs {
	if l.until != nil {
		return l.until.Refs()
	}
	return l.over.Refs()
}

func (p *Plan) checkInputRefs(where string, r expr.Refs) error {
	for _, name := range r.Inputs {
		if !slices.ContainsFunc(p.inputs, func(s inputSpec) bool { return s.name == name }) {
			return planErr("%s reads undeclared input %q", where, name)
		}
	}
	return nil
}

func (p *Plan) compileFailure(nd *node, t *robonetv1.Task) error {
	nd.policy = t.GetOnFailure()
	switch nd.policy {
	case robonetv1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED:
		nd.policy = robonetv1.FailurePolicy_FAILURE_POLICY_RETRY
	case robonetv1.FailurePolicy_FAILURE_POLICY_RETRY, robonetv1.FailurePolicy_FAILURE_POLICY_SKIP,
		robonetv1.FailurePolicy_FAILURE_POLICY_ABORT:
	default:
		return planErr("task %q: unknown on_failure %d", nd.name, int32(nd.policy))
	}
	r := t.GetRetry()
	nd.maxAttempts = max(r.GetMaxAttempts(), 1)
	if nd.policy == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT {
		nd.maxAttempts = 1
	}
	nd.initial = r.GetInitial().AsDuration()
	nd.maxDelay = r.GetMax().AsDuration()
	nd.factor = r.GetFactor()
	nd.jitter = r.GetJitter()
	nd.timeout = t.GetTimeout().AsDuration()
	switch {
	case nd.initial < 0 || nd.maxDelay < 0:
		return planErr("task %q: retry delays must not be negative", nd.name)
	case math.IsNaN(nd.factor) || math.IsInf(nd.factor, 0) || nd.factor < 0:
		return planErr("task %q: retry factor %v must be a number >= 0", nd.name, nd.factor)
	case math.IsNaN(nd.jitter) || nd.jitter < 0 || nd.jitter > 1:
		return planErr("task %q: retry jitter %v must be in [0, 1]", nd.name, nd.jitter)
	case nd.timeout < 0:
		return planErr("task %q: timeout must not be negative", nd.name)
	}
	if nd.factor == 0 {
		nd.factor = 1
	}
	return nil
}

// upstreamChecker verifies that the tasks an expression reads are upstream
// of the reading task (transitive predecessors): a read of any other task
// would see a result or not depending on timing.
type upstreamChecker struct {
	p     *Plan
	mark  []uint32 // epoch per task, for the backward search
	epoch uint32
	stack []int32
}

func newUpstreamChecker(p *Plan) *upstreamChecker { return &upstreamChecker{p: p} }

func (u *upstreamChecker) check(task int32, reads []string) error {
	t := u.p.wf.GetTasks()[task]
	var far []int32 // reads that are not direct predecessors
	for _, name := range reads {
		r, ok := u.p.names[name]
		if !ok {
			return planErr("task %q reads unknown task %q", t.GetName(), name)
		}
		if !slices.Contains(t.GetNeeds(), name) {
			far = append(far, r)
		}
	}
	if len(far) == 0 {
		return nil
	}
	if u.mark == nil {
		u.mark = make([]uint32, len(u.p.wf.GetTasks()))
	}
	u.epoch++
	u.stack = append(u.stack[:0], task)
	u.mark[task] = u.epoch
	for len(u.stack) > 0 && len(far) > 0 {
		cur := u.stack[len(u.stack)-1]
		u.stack = u.stack[:len(u.stack)-1]
		for _, need := range u.p.wf.GetTasks()[cur].GetNeeds() {
			pred := u.p.names[need]
			if u.mark[pred] == u.epoch {
				continue
			}
			u.mark[pred] = u.epoch
			if i := slices.Index(far, pred); i >= 0 {
				far = slices.Delete(far, i, i+1)
			}
			u.stack = append(u.stack, pred)
		}
	}
	if len(far) > 0 {
		return planErr("task %q reads task %q, which is not upstream of it (add it to needs)",
			t.GetName(), u.p.nodeName(far[0]))
	}
	return nil
}

// Workflow returns the IR the plan was built from. Do not modify it.
func (p *Plan) Workflow() *robonetv1.Workflow { return p.wf }

// NumTasks returns the number of tasks; nodes are numbered 0..NumTasks()-1
// in the order of Workflow().Tasks (sorted by name).
func (p *Plan) NumTasks() int { return len(p.nodes) }

// Task returns the IR of a task node, or nil if node is out of range.
func (p *Plan) Task(node int32) *robonetv1.Task {
	if node < 0 || int(node) >= len(p.nodes) {
		return nil
	}
	return p.wf.GetTasks()[node]
}

// Lookup returns the node of the named task.
func (p *Plan) Lookup(name string) (int32, bool) {
	n, ok := p.names[name]
	return n, ok
}

// Options returns the options the plan was built with, defaults applied.
func (p *Plan) Options() Options { return p.opts }

// BindInputs checks submitted inputs against the declarations and returns
// the bound inputs: values normalized, defaults applied, and null for an
// optional input that was neither given nor has a default. It reports every
// problem at once (joined errors, each wrapping ErrInvalidInput). in is not
// modified.
func (p *Plan) BindInputs(in map[string]any) (map[string]any, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...)))
	}
	out := make(map[string]any, len(p.inputs))
	for _, spec := range p.inputs {
		v, given := in[spec.name]
		if !given {
			switch {
			case spec.hasDefault:
				out[spec.name] = spec.def
			case spec.required:
				bad("missing required input %q (%s): supply it at submission", spec.name, typeName(spec.typ))
			default:
				out[spec.name] = nil
			}
			continue
		}
		nv, err := value.Normalize(v)
		if err != nil {
			bad("input %q: %v: supply a JSON value", spec.name, err)
			continue
		}
		if msg := checkType(spec.typ, nv); msg != "" {
			bad("input %q: %s", spec.name, msg)
			continue
		}
		out[spec.name] = nv
	}
	var unknown []string
	for name := range in {
		if !slices.ContainsFunc(p.inputs, func(s inputSpec) bool { return s.name == name }) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	declared := make([]string, len(p.inputs))
	for i, s := range p.inputs {
		declared[i] = s.name
	}
	for i, name := range unknown {
		if i == maxUnknownInputErrors {
			bad("and %d more unknown inputs", len(unknown)-i)
			break
		}
		if len(p.inputs) == 0 {
			bad("unknown input %s: the workflow declares no inputs", value.QuoteClipped(name, 64))
			continue
		}
		bad("unknown input %s: remove it or use one of %s", value.QuoteClipped(name, 64), strings.Join(declared, ", "))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// maxUnknownInputErrors bounds the unknown inputs BindInputs names one by
// one; the rest are counted. The inputs come from a client, and the errors
// go back to it.
const maxUnknownInputErrors = 10

// checkType returns "" when v has type t, otherwise a message saying what
// was expected and what was found.
func checkType(t robonetv1.ValueType, v any) string {
	ok := true
	switch t {
	case robonetv1.ValueType_VALUE_TYPE_STRING:
		_, ok = v.(string)
	case robonetv1.ValueType_VALUE_TYPE_INT:
		_, ok = v.(int64)
	case robonetv1.ValueType_VALUE_TYPE_NUMBER:
		switch v.(type) {
		case int64, float64:
		default:
			ok = false
		}
	case robonetv1.ValueType_VALUE_TYPE_BOOL:
		_, ok = v.(bool)
	case robonetv1.ValueType_VALUE_TYPE_LIST:
		_, ok = v.([]any)
	case robonetv1.ValueType_VALUE_TYPE_MAP:
		_, ok = v.(map[string]any)
	}
	if ok {
		return ""
	}
	// The value is the client's: it is not echoed whole.
	return fmt.Sprintf("must be %s, got %s %s", typeName(t), value.TypeName(v), value.Clip(value.Render(v), 64))
}

func typeName(t robonetv1.ValueType) string {
	switch t {
	case robonetv1.ValueType_VALUE_TYPE_STRING:
		return "a string"
	case robonetv1.ValueType_VALUE_TYPE_INT:
		return "an int"
	case robonetv1.ValueType_VALUE_TYPE_NUMBER:
		return "a number"
	case robonetv1.ValueType_VALUE_TYPE_BOOL:
		return "a bool"
	case robonetv1.ValueType_VALUE_TYPE_LIST:
		return "a list"
	case robonetv1.ValueType_VALUE_TYPE_MAP:
		return "a map"
	}
	return "any value"
}
