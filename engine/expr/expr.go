// Package expr compiles and evaluates the CEL expressions of workflow specs.
//
// Expressions see these names:
//
//	inputs        the workflow inputs, a map (inputs.targets)
//	tasks         upstream results, read as tasks.<name>.output
//	item, index   the element and its position, inside the `with` of a spread task
//	              (item also in a loop over a list)
//	output        the output of the attempt being checked, inside a task's `accept`,
//	              and of the iteration, inside a loop's `until`
//	iteration     the 0-based iteration of a loop, in its `with` and `until`
//	previous      the output of the loop's previous iteration (null at 0)
//
// The environment declares them all; which an expression may use depends on
// where it is written, and the compiler (package spec) enforces that from Refs.
//
// Check type-checks an expression, extracts the tasks and inputs it reads (so
// the compiler can reject references to tasks that are not upstream), computes
// its canonical text (so whitespace does not change the IR hash) and bounds its
// worst-case cost. Compile turns canonical text from the IR into a Program.
//
// Most expressions in real workflows are a single reference
// (`tasks.fetch.output.hosts`, `inputs.url`, `item`). Programs recognise that
// shape and evaluate it with plain map lookups, without building a CEL
// activation; anything else, and every error, goes through CEL so messages
// are the same either way.
package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// Names visible to expressions.
const (
	VarInputs = "inputs"
	VarTasks  = "tasks"
	VarItem   = "item"
	VarIndex  = "index"
	// VarOutput is the output of the attempt an `accept` check judges.
	VarOutput = "output"
	// VarIteration is a loop's 0-based iteration, VarPrevious the output
	// of the iteration before it (null at iteration 0).
	VarIteration = "iteration"
	VarPrevious  = "previous"
	// FieldOutput is the one field of tasks.<name>.
	FieldOutput = "output"
)

// Limits protect the engine from expensive expressions.
type Limits struct {
	// MaxSourceLen is the longest expression text accepted, in bytes.
	MaxSourceLen int
	// MaxCost bounds the estimated worst-case cost of an expression at
	// compile time, in CEL cost units (about one per operation).
	MaxCost uint64
	// AssumedSize is the size assumed for lists, maps and strings of unknown
	// size when estimating cost at compile time.
	AssumedSize uint64
	// MaxEvalCost bounds the actual cost of one evaluation, in CEL cost
	// units. It is deterministic: an expression that stays under it does
	// so on every node, however busy.
	MaxEvalCost uint64
	// MaxEvalTime bounds the wall time of one evaluation. It is a watchdog
	// for what cost units misjudge (a slow machine, a function whose cost
	// model is wrong); MaxEvalCost stops ordinary expressions long before.
	MaxEvalTime time.Duration
	// MaxResultBytes bounds the size of an evaluation's result (and of an
	// interpolated string), as JSON. A list built from references to one
	// large value costs nothing to build but everything to send or store.
	MaxResultBytes int
}

// DefaultLimits are the limits used when a field of Limits is zero.
var DefaultLimits = Limits{
	MaxSourceLen:   4096,
	MaxCost:        10_000_000,
	AssumedSize:    1000,
	MaxEvalCost:    1_000_000,
	MaxEvalTime:    time.Second,
	MaxResultBytes: 4 << 20,
}

// WithDefaults returns a copy of l with zero fields set from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	if l.MaxSourceLen <= 0 {
		l.MaxSourceLen = DefaultLimits.MaxSourceLen
	}
	if l.MaxCost == 0 {
		l.MaxCost = DefaultLimits.MaxCost
	}
	if l.AssumedSize == 0 {
		l.AssumedSize = DefaultLimits.AssumedSize
	}
	if l.MaxEvalCost == 0 {
		l.MaxEvalCost = DefaultLimits.MaxEvalCost
	}
	if l.MaxEvalTime <= 0 {
		l.MaxEvalTime = DefaultLimits.MaxEvalTime
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultLimits.MaxResultBytes
	}
	return l
}

// Env is a CEL environment with the workflow's names declared. It is safe for
// concurrent use.
type Env struct {
	cel    *cel.Env
	limits Limits
}

// NewEnv builds an environment.
func NewEnv(limits Limits) (*Env, error) {
	limits = limits.WithDefaults()
	opts := []cel.EnvOption{
		cel.Variable(VarInputs, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(VarTasks, cel.MapType(cel.StringType, cel.MapType(cel.StringType, cel.DynType))),
		cel.Variable(VarItem, cel.DynType),
		cel.Variable(VarIndex, cel.IntType),
		cel.Variable(VarOutput, cel.DynType),
		cel.Variable(VarIteration, cel.IntType),
		cel.Variable(VarPrevious, cel.DynType),
		cel.EnableMacroCallTracking(),
		ext.Strings(),
		ext.Math(),
		ext.Lists(ext.ListsMaxRangeSize(maxRange)),
		ext.Encoders(),
	}
	// Declared after the extensions, so their bindings win.
	opts = append(opts, boundedBuiltins(limits.MaxResultBytes)...)
	opts = append(opts, rangeCostModel())
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("building CEL environment: %w", err)
	}
	return &Env{cel: env, limits: limits}, nil
}

// Limits returns the environment's limits.
func (e *Env) Limits() Limits { return e.limits }

// Refs lists what an expression reads.
type Refs struct {
	Tasks     []string // task names read as tasks.<name>.output, sorted, unique
	Inputs    []string // input names read as inputs.<name>, sorted, unique
	AllInputs bool     // `inputs` used as a whole
	Item      bool
	Index     bool
	Output    bool // `output`, the attempt's output (accept, a loop's until)
	Iteration bool // `iteration`, a loop's iteration
	Previous  bool // `previous`, the output of a loop's previous iteration
}

func (r *Refs) merge(o Refs) {
	r.Tasks = mergeSorted(r.Tasks, o.Tasks)
	r.Inputs = mergeSorted(r.Inputs, o.Inputs)
	r.AllInputs = r.AllInputs || o.AllInputs
	r.Item = r.Item || o.Item
	r.Index = r.Index || o.Index
	r.Output = r.Output || o.Output
	r.Iteration = r.Iteration || o.Iteration
	r.Previous = r.Previous || o.Previous
}

func mergeSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Issue is a problem found by Check.
type Issue struct {
	// Column is the 0-based rune offset of the problem within the expression
	// text, or -1 when unknown.
	Column int
	Msg    string
	// Hint says how to fix it; may be empty.
	Hint string
}

func (i *Issue) Error() string {
	if i.Hint != "" {
		return i.Msg + " (" + i.Hint + ")"
	}
	return i.Msg
}

// Checked is a type-checked expression.
type Checked struct {
	// Canonical is the expression re-printed from its syntax tree: the form
	// stored in the IR.
	Canonical string
	Refs      Refs
	// Type is the statically known result type; its Kind is DynKind when the
	// result depends on runtime values.
	Type    *cel.Type
	checked *cel.Ast
}

// Check parses and type-checks src, extracts its references and verifies its
// estimated cost. It returns the first issue found.
func (e *Env) Check(src string) (*Checked, *Issue) {
	if strings.TrimSpace(src) == "" {
		return nil, &Issue{Column: -1, Msg: "empty expression", Hint: "write an expression between ${{ and }}"}
	}
	if len(src) > e.limits.MaxSourceLen {
		return nil, &Issue{Column: -1, Msg: fmt.Sprintf("expression is %d bytes long, the limit is %d", len(src), e.limits.MaxSourceLen),
			Hint: "move the logic into a task"}
	}
	parsed, iss := e.cel.Parse(src)
	if iss.Err() != nil {
		return nil, celIssue("syntax error", iss)
	}
	canonical, err := cel.AstToString(parsed)
	if err != nil {
		return nil, &Issue{Column: -1, Msg: "expression cannot be printed: " + err.Error()}
	}
	refs, issue := extractRefs(parsed.NativeRep())
	if issue != nil {
		return nil, issue
	}
	checked, iss := e.cel.Check(parsed)
	if iss.Err() != nil {
		return nil, celIssue("type error", iss)
	}
	if issue := checkConstantRegexes(checked.NativeRep()); issue != nil {
		return nil, issue
	}
	est, err := e.cel.EstimateCost(checked, sizeEstimator{size: e.limits.AssumedSize})
	if err != nil {
		return nil, &Issue{Column: -1, Msg: "cannot estimate the cost of the expression: " + err.Error()}
	}
	if est.Max > e.limits.MaxCost {
		cost := fmt.Sprint(est.Max)
		if est.Max == math.MaxUint64 {
			cost = "an unbounded amount"
		}
		return nil, &Issue{Column: -1,
			Msg:  fmt.Sprintf("expression may cost %s in the worst case, the limit is %d", cost, e.limits.MaxCost),
			Hint: "avoid nested iteration over lists; do heavy work in a task"}
	}
	return &Checked{Canonical: canonical, Refs: refs, Type: checked.OutputType(), checked: checked}, nil
}

func celIssue(kind string, iss *cel.Issues) *Issue {
	errs := iss.Errors()
	if len(errs) == 0 {
		return &Issue{Column: -1, Msg: kind}
	}
	first := errs[0]
	msg := strings.ReplaceAll(first.Message, " (in container '')", "")
	// CEL's parser already names the kind ("Syntax error: ..."); say it once.
	if rest, ok := strings.CutPrefix(msg, "Syntax error: "); ok && kind == "syntax error" {
		msg = rest
	}
	issue := &Issue{Column: -1, Msg: kind + ": " + msg}
	if loc := first.Location; loc != nil && loc.Line() == 1 && loc.Column() >= 0 {
		issue.Column = loc.Column()
	}
	if strings.Contains(msg, "undeclared reference") {
		issue.Hint = "expressions can use inputs.<name>, tasks.<name>.output, item and index inside a spread task, output inside accept, and iteration and previous inside a loop"
	}
	return issue
}

// extractRefs walks the syntax tree and records every use of the four names,
// rejecting forms other than inputs.<name> and tasks.<name>.output.
func extractRefs(a *celast.AST) (Refs, *Issue) {
	var refs Refs
	var issue *Issue
	info := a.SourceInfo()
	column := func(e celast.Expr) int {
		if loc := info.GetStartLocation(e.ID()); loc.Line() == 1 {
			return loc.Column()
		}
		return -1
	}
	// Selects that consume an identifier are visited before the identifier
	// (pre-order), so remember the identifiers they already accounted for.
	consumed := map[int64]bool{}
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if issue != nil {
			return
		}
		switch e.Kind() {
		case celast.SelectKind:
			sel := e.AsSelect()
			op := sel.Operand()
			if op.Kind() == celast.IdentKind && op.AsIdent() == VarInputs {
				consumed[op.ID()] = true
				refs.Inputs = append(refs.Inputs, sel.FieldName())
				return
			}
			if op.Kind() == celast.SelectKind {
				inner := op.AsSelect()
				root := inner.Operand()
				if root.Kind() == celast.IdentKind && root.AsIdent() == VarTasks {
					consumed[op.ID()], consumed[root.ID()] = true, true
					if sel.FieldName() != FieldOutput {
						issue = &Issue{Column: column(e), Msg: fmt.Sprintf("tasks.%s has no field %q", inner.FieldName(), sel.FieldName()),
							Hint: fmt.Sprintf("use tasks.%s.output", inner.FieldName())}
						return
					}
					refs.Tasks = append(refs.Tasks, inner.FieldName())
				}
			}
		case celast.IdentKind:
			if consumed[e.ID()] {
				return
			}
			switch e.AsIdent() {
			case VarTasks:
				issue = &Issue{Column: column(e), Msg: "tasks must be read as tasks.<name>.output",
					Hint: "name the task whose result you want, e.g. tasks.fetch.output"}
			case VarInputs:
				refs.AllInputs = true
			case VarItem:
				refs.Item = true
			case VarIndex:
				refs.Index = true
			case VarOutput:
				refs.Output = true
			case VarIteration:
				refs.Iteration = true
			case VarPrevious:
				refs.Previous = true
			}
		}
	}))
	if issue != nil {
		return Refs{}, issue
	}
	slices.Sort(refs.Tasks)
	refs.Tasks = slices.Compact(refs.Tasks)
	slices.Sort(refs.Inputs)
	refs.Inputs = slices.Compact(refs.Inputs)
	return refs, nil
}

// checkConstantRegexes compiles every constant pattern given to matches(),
// so that a bad pattern is a compile error at registration and not an
// evaluation failure (or, when the program is optimised, a program that
// cannot be built) at run time. CEL patterns are RE2, as Go's regexp.
func checkConstantRegexes(a *celast.AST) *Issue {
	info := a.SourceInfo()
	var issue *Issue
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if issue != nil || e.Kind() != celast.CallKind {
			return
		}
		call := e.AsCall()
		if call.FunctionName() != "matches" {
			return
		}
		args := call.Args()
		if len(args) == 0 {
			return
		}
		pat := args[len(args)-1] // s.matches(p) and matches(s, p)
		if pat.Kind() != celast.LiteralKind {
			return
		}
		src, ok := pat.AsLiteral().Value().(string)
		if !ok {
			return
		}
		if _, err := regexp.Compile(src); err != nil {
			col := -1
			if loc := info.GetStartLocation(pat.ID()); loc.Line() == 1 {
				col = loc.Column()
			}
			issue = &Issue{Column: col, Msg: "invalid regular expression: " + strings.TrimPrefix(err.Error(), "error parsing regexp: "),
				Hint: "patterns use RE2 syntax (https://github.com/google/re2/wiki/Syntax)"}
		}
	}))
	return issue
}

// sizeEstimator assumes every collection and string of unknown size holds
// size elements. The estimate is a compile-time screen for runaway shapes
// (iteration nested two or three deep); the runtime cost limit is what bounds
// an actual evaluation.
type sizeEstimator struct{ size uint64 }

func (s sizeEstimator) EstimateSize(cost.AstNode) *cost.SizeEstimate {
	return &cost.SizeEstimate{Min: 0, Max: s.size}
}

func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// Scope supplies the values an evaluation reads.
type Scope interface {
	// Inputs returns the bound workflow inputs.
	Inputs() map[string]any
	// TaskOutput returns the output of a resolved task; ok is false when the
	// task has not resolved (which the engine never lets happen).
	TaskOutput(name string) (out any, ok bool)
	// TaskOutputAt is TaskOutput for a task numbered by Program.BindTasks.
	TaskOutputAt(slot int32) (out any, ok bool)
	// Item and Index return the spread element being evaluated.
	Item() any
	Index() int64
	// Output is the output of the attempt an accept check judges, or of
	// the iteration a loop's until judges; nil elsewhere (the compiler
	// lets only those read it).
	Output() any
	// Iteration and Previous are a loop's 0-based iteration and the
	// output of the iteration before it (nil at 0); 0 and nil elsewhere.
	Iteration() int64
	Previous() any
}

// ErrEval wraps every evaluation error.
var ErrEval = errors.New("expression failed")

// Program is a compiled expression, safe for concurrent use.
type Program struct {
	src  string
	refs Refs

	// The CEL program is built on first use: single-reference expressions
	// rarely need it, and a plan with thousands of tasks should not pay for
	// thousands of CEL programs up front. Fast-path programs do not even keep
	// their syntax tree (kilobytes each, which would scatter the hot data of
	// a large plan across memory); they re-check their source if they ever
	// need CEL.
	env     *Env
	checked *cel.Ast
	once    sync.Once
	prg     cel.Program
	prgErr  error
	// loops is set when the expression iterates (a comprehension): only
	// those can run long enough to need the wall-time watchdog, whose
	// timer is not free.
	loops bool

	// Fast path for single references: root names the value (one of the
	// Var* constants), name the input or task, path the fields selected from
	// it. fast is false when the expression has another shape. slot is the
	// task's index in the caller's numbering once BindTasks has run, else -1.
	fast bool
	root string
	name string
	path []string
	slot int32
}

// Compile checks src and builds a Program from it.
func (e *Env) Compile(src string) (*Program, error) {
	c, issue := e.Check(src)
	if issue != nil {
		return nil, fmt.Errorf("expression ${{ %s }}: %w", src, issue)
	}
	return e.Program(c)
}

// Program builds an executable program from a checked expression.
func (e *Env) Program(c *Checked) (*Program, error) {
	p := &Program{src: c.Canonical, refs: c.Refs, env: e, checked: c.checked, slot: -1}
	p.detectFastPath(c.checked.NativeRep().Expr())
	if p.fast {
		p.checked = nil
		return p, nil
	}
	if _, err := p.program(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Program) program() (cel.Program, error) {
	p.once.Do(func() {
		checked := p.checked
		if checked == nil {
			c, issue := p.env.Check(p.src)
			if issue != nil {
				p.prgErr = fmt.Errorf("expression ${{ %s }}: %w", p.src, issue)
				return
			}
			checked = c.checked
		}
		p.loops = hasComprehension(checked.NativeRep().Expr())
		p.prg, p.prgErr = p.env.cel.Program(checked,
			cel.CostLimit(p.env.limits.MaxEvalCost),
			cel.InterruptCheckFrequency(interruptCheckFrequency),
			cel.EvalOptions(cel.OptOptimize),
		)
		if p.prgErr != nil {
			p.prgErr = fmt.Errorf("expression ${{ %s }}: %w", p.src, p.prgErr)
		}
	})
	return p.prg, p.prgErr
}

// BindTasks numbers the task a single-reference program reads, using the
// caller's lookup, so evaluation can ask the scope for the output by index
// (Scope.TaskOutputAt) instead of by name. Call it once, before the program
// is shared between goroutines.
func (p *Program) BindTasks(lookup func(name string) (int32, bool)) {
	if p.fast && p.root == VarTasks {
		if i, ok := lookup(p.name); ok {
			p.slot = i
		}
	}
}

// Source returns the canonical text of the expression.
func (p *Program) Source() string { return p.src }

// Refs returns what the expression reads.
func (p *Program) Refs() Refs { return p.refs }

func (p *Program) detectFastPath(e celast.Expr) {
	var path []string
	for e.Kind() == celast.SelectKind {
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return
		}
		path = append(path, sel.FieldName())
		e = sel.Operand()
	}
	if e.Kind() != celast.IdentKind {
		return
	}
	slices.Reverse(path)
	switch root := e.AsIdent(); root {
	case VarItem, VarIndex, VarOutput, VarIteration, VarPrevious:
		if (root == VarIndex || root == VarIteration) && len(path) > 0 {
			return
		}
		p.root, p.path = root, path
	case VarInputs:
		if len(path) == 0 {
			return
		}
		p.root, p.name, p.path = root, path[0], path[1:]
	case VarTasks:
		if len(path) < 2 {
			return
		}
		p.root, p.name, p.path = root, path[0], path[2:]
	default:
		return
	}
	p.fast = true
}

// interruptCheckFrequency is how many comprehension iterations run between
// checks of the evaluation's wall-time limit.
const interruptCheckFrequency = 100

// Eval evaluates the expression. The result is a canonical value (see package
// value). Errors wrap ErrEval and name the expression. Each evaluation is
// bounded by the environment's limits: cost units, wall time and result
// size; when the scope is a Budget, the cost is also charged to it.
func (p *Program) Eval(s Scope) (any, error) {
	if p.fast {
		if v, ok := p.evalFast(s); ok {
			return v, nil
		}
	}
	prg, err := p.program()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrEval, err.Error())
	}
	lim := &p.env.limits
	act := &activation{scope: s, refs: &p.refs}
	var (
		out ref.Val
		det *cel.EvalDetails
	)
	if p.loops {
		ctx, cancel := context.WithTimeoutCause(context.Background(), lim.MaxEvalTime, errEvalTime)
		out, det, err = prg.ContextEval(ctx, act)
		cancel()
	} else {
		out, det, err = prg.Eval(act)
	}
	if b, ok := s.(Budget); ok && det != nil && det.ActualCost() != nil {
		if berr := b.Spend(*det.ActualCost()); berr != nil && err == nil {
			err = berr
		}
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		switch {
		case errors.Is(err, errEvalTime):
			msg = fmt.Sprintf("evaluation took longer than %s, the limit", lim.MaxEvalTime)
		case strings.Contains(msg, "cost limit exceeded"):
			msg = fmt.Sprintf("evaluation cost more than %d units, the limit", lim.MaxEvalCost)
		}
		return nil, fmt.Errorf("%w: ${{ %s }}: %s", ErrEval, p.src, msg)
	}
	c := converter{left: lim.MaxResultBytes}
	v, err := c.toNative(out, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: ${{ %s }}: %w", ErrEval, p.src, err)
	}
	return v, nil
}

// hasComprehension reports whether e iterates anywhere.
func hasComprehension(e celast.Expr) bool {
	found := false
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

// errEvalTime is the cause of an evaluation interrupted by MaxEvalTime.
var errEvalTime = errors.New("evaluation time limit")

// Budget is implemented by a Scope that bounds the total cost of several
// evaluations (the engine bounds what one event of an instance may spend).
// Spend is called with the actual cost of every CEL evaluation and fails
// once the budget is exhausted; the evaluation then fails with its error.
type Budget interface {
	Spend(units uint64) error
}

// evalFast follows a single reference with map lookups; ok is false whenever
// the answer is anything but a plain hit, and CEL then produces the result or
// the error.
func (p *Program) evalFast(s Scope) (any, bool) {
	var v any
	switch p.root {
	case VarItem:
		v = s.Item()
	case VarIndex:
		return s.Index(), true
	case VarOutput:
		v = s.Output()
	case VarIteration:
		return s.Iteration(), true
	case VarPrevious:
		v = s.Previous()
	case VarInputs:
		in, ok := s.Inputs()[p.name]
		if !ok {
			return nil, false
		}
		v = in
	case VarTasks:
		var out any
		var ok bool
		if p.slot >= 0 {
			out, ok = s.TaskOutputAt(p.slot)
		} else {
			out, ok = s.TaskOutput(p.name)
		}
		if !ok {
			return nil, false
		}
		v = out
	}
	return FollowPath(v, p.path)
}

// FollowPath selects fields from nested maps: FollowPath(v, ["a", "b"]) is
// v.a.b. ok is false if a step is not a map or lacks the field.
func FollowPath(v any, path []string) (any, bool) {
	for _, f := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[f]; !ok {
			return nil, false
		}
	}
	return v, true
}

// activation resolves names lazily, building only the maps an expression
// actually reads.
type activation struct {
	scope Scope
	refs  *Refs
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarInputs:
		return a.scope.Inputs(), true
	case VarTasks:
		m := make(map[string]any, len(a.refs.Tasks))
		for _, t := range a.refs.Tasks {
			if out, ok := a.scope.TaskOutput(t); ok {
				m[t] = map[string]any{FieldOutput: out}
			}
		}
		return m, true
	case VarItem:
		return a.scope.Item(), true
	case VarIndex:
		return a.scope.Index(), true
	case VarOutput:
		return a.scope.Output(), true
	case VarIteration:
		return a.scope.Iteration(), true
	case VarPrevious:
		return a.scope.Previous(), true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
