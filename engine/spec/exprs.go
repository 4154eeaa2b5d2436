package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"
	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/engine/expr"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// scope says what an expression may read.
type scope struct {
	task    string // the task the expression belongs to; "" for outputs
	field   string // "with", "spread", "when" or "outputs.NAME"
	graph   *graph
	inputs  []string // declared input names
	anyTask bool     // outputs may read every task
	spread  bool     // item and index are defined (the with or accept of a spread task)
	accept  bool     // output is defined (a task's accept)
	// loop: iteration and previous are defined (the with, accept and
	// until of a loop task); loopItem: item too (a loop over a list);
	// until: output is defined (a loop's until).
	loop, loopItem, until bool
}

// checkExpr type-checks one expression piece of scalar n and checks that it
// reads only what its scope allows.
func (c *compiler) checkExpr(n *yaml.Node, p piece, sc *scope, w where) (*expr.Checked, bool) {
	if c.exprs++; c.exprs > c.limits.MaxExpressions {
		if c.exprs == c.limits.MaxExpressions+1 {
			line, col := c.valuePosition(n, p.open)
			c.errorAt(line, col, w, "compute more in fewer expressions, or split the workflow",
				"spec has more than %d expressions, the limit", c.limits.MaxExpressions)
		}
		return nil, false
	}
	checked, issue := c.env.Check(p.text)
	if issue != nil {
		off := p.open
		if issue.Column >= 0 {
			off = p.offset + issue.Column
		}
		line, col := c.valuePosition(n, off)
		c.errorAt(line, col, w, issue.Hint, "%s", issue.Msg)
		return nil, false
	}
	if !c.checkRefs(n, p, checked.Refs, sc, w) {
		return nil, false
	}
	return checked, true
}

// checkRefs reports reads of tasks that are unknown or not upstream, of
// undeclared inputs, and of item or index outside a spread task's with.
func (c *compiler) checkRefs(n *yaml.Node, p piece, refs expr.Refs, sc *scope, w where) bool {
	ok := true
	report := func(word, hint, format string, args ...any) {
		line, col := c.valuePosition(n, p.offset+findWord(p.text, word, p.open-p.offset))
		c.errorAt(line, col, w, hint, format, args...)
		ok = false
	}
	for _, t := range refs.Tasks {
		switch {
		case !sc.graph.has(t):
			report("tasks."+t, didYouMean(t, sc.graph.names, nil, "tasks"), "unknown task %q", t)
		case sc.anyTask:
		case t == sc.task:
			report("tasks."+t, "a task can read only the outputs of the tasks it needs", "a task cannot read its own output")
		case !sc.graph.isUpstream(sc.task, t):
			report("tasks."+t, fmt.Sprintf("add %q to needs", t), "task %q is not upstream of %q", t, sc.task)
		}
	}
	for _, in := range refs.Inputs {
		if slices.Contains(sc.inputs, in) {
			continue
		}
		hint := didYouMean(in, sc.inputs, nil, "inputs")
		if !strings.HasPrefix(hint, "did you mean") {
			hint = fmt.Sprintf("declare it under inputs: (e.g. %s: {type: string})", in)
		}
		report("inputs."+in, hint, "unknown input %q", in)
	}
	for _, name := range []string{expr.VarItem, expr.VarIndex} {
		used := (name == expr.VarItem && refs.Item) || (name == expr.VarIndex && refs.Index)
		if used && !sc.spread && sc.loopItem && name == expr.VarItem {
			continue
		}
		if used && sc.loop {
			hint := "a loop over a list reads its element as item, and every loop its iteration as iteration"
			if name == expr.VarItem {
				hint = "item is the element of a loop over a list (loop: {over: ${{ <list> }}}); this loop has no list"
			}
			report(name, hint, "%q is not defined in a loop's %s", name, sc.field)
			continue
		}
		if used && !sc.spread {
			hint := "add spread: ${{ <list> }} to the task to run it once per element"
			if sc.task == "" || (sc.field != "with" && sc.field != "accept") {
				hint = "item and index name the element a spread task instance works on; read them in its with or accept"
			}
			report(name, hint, "%q is only defined inside the with or accept of a task that has spread", name)
		}
	}
	for _, name := range []string{expr.VarIteration, expr.VarPrevious} {
		used := (name == expr.VarIteration && refs.Iteration) || (name == expr.VarPrevious && refs.Previous)
		if used && !sc.loop {
			report(name, "add loop: {until: ..., max: N} or loop: {over: ...} to the task to run it once per iteration",
				"%q is only defined inside the with, accept or loop.until of a task that has loop", name)
		}
	}
	if refs.Output && !sc.accept && !sc.until {
		hint := "read a task's result as tasks.<name>.output"
		if sc.task != "" {
			hint = "output is the attempt's own output, read by the task's accept check and a loop's until; read other tasks' results as tasks.<name>.output"
		}
		report(expr.VarOutput, hint, "%q is only defined inside accept and loop.until", expr.VarOutput)
	}
	return ok
}

// findWord returns the rune offset of word (as a whole word) in an
// expression, or fallback when it is not found as written.
func findWord(src, word string, fallback int) int {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_.])` + regexp.QuoteMeta(word) + `($|[^A-Za-z0-9_])`)
	loc := re.FindStringSubmatchIndex(src)
	if loc == nil {
		return fallback
	}
	return len([]rune(src[:loc[3]]))
}

// guardExpr compiles `spread` or `when`: a single whole expression (or, for
// when, a YAML boolean) whose static type is want (or dyn).
func (c *compiler) guardExpr(v *yaml.Node, sc *scope, field, want, example string) *robonetv1.Expr {
	n := c.resolve(v)
	if n == nil {
		return nil
	}
	if field == "when" && n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		if strings.EqualFold(n.Value, "true") {
			return &robonetv1.Expr{Source: "true"}
		}
		return &robonetv1.Expr{Source: "false"}
	}
	checked, _, ok := c.wholeExpr(n, sc, field, want, example)
	if !ok {
		return nil
	}
	return &robonetv1.Expr{Source: checked.Canonical}
}

// acceptExpr compiles a task's `accept`: a single whole expression of type
// bool (or dyn) that reads `output`. It returns the IR expression and the
// text as written, which a rejected attempt's error quotes.
func (c *compiler) acceptExpr(v *yaml.Node, sc *scope) (*robonetv1.Expr, string) {
	n := c.resolve(v)
	if n == nil {
		return nil, ""
	}
	const example = "${{ output.score >= 0.8 }}"
	checked, p, ok := c.wholeExpr(n, sc, "accept", "bool", example)
	if !ok {
		return nil, ""
	}
	if !checked.Refs.Output {
		line, col := c.valuePosition(n, p.open)
		c.errorAt(line, col, where{task: sc.task, field: "accept"}, "judge the attempt's output, e.g. accept: "+example,
			"accept must read output, the attempt's output; this expression does not")
		return nil, ""
	}
	return &robonetv1.Expr{Source: checked.Canonical}, strings.TrimSpace(n.Value)
}

// wholeExpr checks that scalar n is a single whole ${{ expression }} whose
// static type is want (or dyn), and type-checks it in scope sc.
func (c *compiler) wholeExpr(n *yaml.Node, sc *scope, field, want, example string) (*expr.Checked, piece, bool) {
	w := where{task: sc.task, field: field}
	hint := fmt.Sprintf("write e.g. %s: %s", field, example)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		c.errorf(n, w, hint, "%s, not %s", describeWant(want), describe(n))
		return nil, piece{}, false
	}
	pieces, ok := c.splitString(n, w)
	if !ok {
		return nil, piece{}, false
	}
	if len(pieces) != 1 || !pieces[0].isExpr {
		c.errorf(n, w, hint, "%s, not text", describeWant(want))
		return nil, piece{}, false
	}
	checked, ok := c.checkExpr(n, pieces[0], sc, w)
	if !ok {
		return nil, piece{}, false
	}
	if !typeFits(checked.Type.Kind(), want) {
		line, col := c.valuePosition(n, pieces[0].open)
		c.errorAt(line, col, w, hint, "%s, but this expression has type %s", describeWant(want), checked.Type)
		return nil, piece{}, false
	}
	return checked, pieces[0], true
}

// typeFits reports whether a static type is acceptable where want ("list",
// "bool" or "string") is expected; dyn always is, since it is only known at run time.
func typeFits(k types.Kind, want string) bool {
	switch k {
	case types.DynKind, types.AnyKind:
		return true
	case types.ListKind:
		return want == "list"
	case types.BoolKind:
		return want == "bool"
	case types.StringKind:
		return want == "string"
	}
	return false
}

// valuePosition returns the line and column of the character at rune offset
// off within the value of scalar n. That is exact for single-line plain and
// quoted scalars whose text is written as-is; otherwise (escapes, block
// scalars, folded lines) it falls back to the position of the node itself.
func (c *compiler) valuePosition(n *yaml.Node, off int) (line, col int) {
	if n.Line == 0 || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return n.Line, n.Column
	}
	quote := 0
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
		quote = 1
	}
	src := []rune(c.lineText(n.Line))
	val := []rune(n.Value)
	start := n.Column - 1 + quote
	end := start + off + 1
	if off < 0 || off >= len(val) || start < 0 || end > len(src) {
		return n.Line, n.Column
	}
	if string(src[start:end]) != string(val[:off+1]) {
		return n.Line, n.Column
	}
	return n.Line, n.Column + quote + off
}
