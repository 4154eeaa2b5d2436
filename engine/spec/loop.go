package spec

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// loopSpec is a task's `loop: {until | over, max, every}` as written. The
// expressions are checked later, in the task's scope (buildLoop).
type loopSpec struct {
	keyN  *yaml.Node // the loop key, for errors about the whole loop
	until *yaml.Node // nil when absent
	over  *yaml.Node // nil when absent
	max   uint32     // 0: absent
	every time.Duration
}

const loopHint = "write loop: {until: ${{ output.done }}, max: 10} to run the task until its output says so, " +
	"or loop: {over: ${{ inputs.items }}} to run it once per element of a list, one after the other"

// loop reads `loop:`; nil when it is invalid (the problems are reported).
func (c *compiler) loop(f entry, w where) *loopSpec {
	n := c.resolve(f.value)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, w, loopHint, "loop must be a mapping, not %s", describe(n))
		return nil
	}
	entries, ok := c.mapping(n, w, "loop")
	if !ok {
		return nil
	}
	l := &loopSpec{keyN: f.keyN}
	valid := true
	fields := c.checkKeys(entries, loopKeys, w, "loop")
	for _, e := range fields {
		if e.value == nil { // a misspelt key, reported already
			valid = false
		}
	}
	u, hasUntil := fields["until"]
	o, hasOver := fields["over"]
	switch {
	case hasUntil && hasOver:
		c.errorf(o.keyN, w.child("over"),
			"keep until to run the task until its output says so, or over to run it once per element of a list",
			"loop has both until and over; a loop has one of them")
		valid = false
	case !hasUntil && !hasOver:
		c.errorf(f.keyN, w, loopHint, "loop needs until or over")
		valid = false
	}
	l.until, l.over = u.value, o.value
	m, hasMax := fields["max"]
	switch {
	case hasMax && m.value != nil:
		mn := c.resolve(m.value)
		if mn == nil {
			return nil
		}
		hint := fmt.Sprintf("max is the most iterations the loop runs: a whole number from 1 to %d (the loop-max limit)", c.limits.MaxLoop)
		if mn.Kind != yaml.ScalarNode || mn.Tag != "!!int" {
			c.errorf(mn, w.child("max"), hint, "loop.max must be a whole number, not %s", describe(mn))
			valid = false
			break
		}
		v, ok := intValue(mn)
		if !ok || v < 1 || v > int64(c.limits.MaxLoop) {
			c.errorf(mn, w.child("max"), hint, "loop.max must be between 1 and %d, not %s", c.limits.MaxLoop, mn.Value)
			valid = false
			break
		}
		l.max = uint32(v)
	case !hasMax && hasUntil && !hasOver:
		c.errorf(f.keyN, w.child("max"), "add the most iterations to run, e.g. loop: {until: ${{ output.done }}, max: 30}",
			"loop.until needs max: a loop whose condition never holds must stop somewhere")
		valid = false
	}
	if e, ok := fields["every"]; ok && e.value != nil {
		d, ok := c.pause(e.value, w.child("every"))
		if !ok {
			valid = false
		}
		l.every = d
	}
	if !valid {
		return nil
	}
	return l
}

// pause reads a duration that may be zero, such as loop.every.
func (c *compiler) pause(v *yaml.Node, w where) (time.Duration, bool) {
	n := c.resolve(v)
	if n == nil {
		return 0, false
	}
	const hint = "write a duration with a unit, e.g. 500ms, 10s or 5m (0s: no pause)"
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && (n.Tag != "!!int" || n.Value != "0")) {
		c.errorf(n, w, hint, "must be a duration, not %s", describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		c.errorf(n, w, hint, "invalid duration %q", n.Value)
		return 0, false
	}
	if d < 0 {
		c.errorf(n, w, hint, "duration %q is negative", n.Value)
		return 0, false
	}
	return d, true
}

// buildLoop compiles a task's loop: over in the scope of a guard (no item
// yet), until in the scope of the task's with plus output, the iteration's
// output. It reports combinations that are not supported.
func (c *compiler) buildLoop(t *taskSpec, sc *scope) *robonetv1.Loop {
	l := t.loop
	w := t.w.child("loop")
	if t.spread != nil {
		c.errorf(l.keyN, w, "use loop: {over: ...} to go through a list one element at a time, or spread to run the elements side by side",
			"a task cannot have both loop and spread")
		return nil
	}
	ir := &robonetv1.Loop{Max: l.max}
	if l.every > 0 {
		ir.Every = durationpb.New(l.every)
	}
	if l.over != nil {
		sub := *sc
		sub.field, sub.spread, sub.accept, sub.loop, sub.loopItem, sub.until = "loop.over", false, false, false, false, false
		if ir.Over = c.guardExpr(l.over, &sub, "loop.over", "list", "${{ tasks.list.output }}"); ir.Over == nil {
			return nil
		}
		return ir
	}
	n := c.resolve(l.until)
	if n == nil {
		return nil
	}
	sub := *sc
	sub.field, sub.spread, sub.accept, sub.loop, sub.loopItem, sub.until = "loop.until", false, false, true, false, true
	const example = `${{ output.state == "done" }}`
	checked, p, ok := c.wholeExpr(n, &sub, "loop.until", "bool", example)
	if !ok {
		return nil
	}
	if !checked.Refs.Output {
		line, col := c.valuePosition(n, p.open)
		c.errorAt(line, col, w.child("until"), "read the iteration's output, e.g. until: "+example,
			"until never reads output: it would be true or false for every iteration")
		return nil
	}
	ir.Until = &robonetv1.Expr{Source: checked.Canonical}
	return ir
}
