package spec

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// taskSpec is one task as written, after its simple fields are checked and
// before its expressions are (which needs the whole graph).
type taskSpec struct {
	name       string
	keyN       *yaml.Node // the task's name in the tasks mapping
	w          where
	ok         bool // false when the task had a problem that stops IR building
	capability string
	action     string
	desc       string
	needs      []need
	with       *yaml.Node // nil when absent
	spread     *yaml.Node
	when       *yaml.Node
	accept     *yaml.Node
	policy     policy
	verify     uint32 // 0: absent
	join       *joinSpec
	loop       *loopSpec
	onN        *yaml.Node // the on key, nil when absent
	on         robonetv1.TaskOn
	// child is the workflow the task runs as a child instance (workflow:),
	// nil when absent or invalid; workflowN is its key.
	child     *robonetv1.ChildWorkflow
	workflowN *yaml.Node
	// wait is the task's wait (wait:), nil when absent or invalid.
	wait *waitSpec
}

// joinSpec is a task's `join: {min, cancel_rest}` as written.
type joinSpec struct {
	keyN       *yaml.Node // the join key, for errors about the whole join
	minN       *yaml.Node // nil when min is absent or invalid
	min        int64
	cancelRest bool
}

// need is one entry of a task's `needs`.
type need struct {
	name string
	node *yaml.Node
	w    where
}

// tasks reads the `tasks` mapping in source order.
func (c *compiler) tasks(root *yaml.Node, top map[string]entry) []*taskSpec {
	e, ok := top["tasks"]
	const hint = "add a tasks: mapping with at least one task"
	if !ok {
		c.errorf(root, where{field: "tasks"}, hint, "missing required field \"tasks\"")
		return nil
	}
	n := c.resolve(e.value)
	if n == nil {
		return nil
	}
	if isNull(n) || (n.Kind == yaml.MappingNode && len(n.Content) == 0) {
		c.errorf(n, where{field: "tasks"}, hint, "workflow has no tasks")
		return nil
	}
	entries, ok := c.mapping(n, where{field: "tasks"}, "tasks")
	if !ok {
		return nil
	}
	if len(entries) > c.limits.MaxTasks {
		c.errorf(n, where{field: "tasks"}, "split the workflow into smaller ones, or use spread to fan out over a list",
			"workflow has %d tasks, the limit is %d", len(entries), c.limits.MaxTasks)
		return nil
	}
	var out []*taskSpec
	for _, te := range entries {
		out = append(out, c.task(te))
		if c.stopped {
			return nil
		}
	}
	return out
}

// task reads the simple fields of one task.
func (c *compiler) task(e entry) *taskSpec {
	t := &taskSpec{name: e.key, keyN: e.keyN, w: where{task: e.key}, ok: true}
	if !c.checkIdent(e.keyN, e.key, where{task: e.key}, "task", "tasks."+e.key+".output") {
		t.ok = false
	}
	n := c.resolve(e.value)
	if n == nil {
		t.ok = false
		return t
	}
	entries, ok := c.mapping(n, t.w, "a task")
	if !ok {
		t.ok = false
		return t
	}
	fields := c.checkKeys(entries, taskKeys, t.w, "a task")
	if f, ok := fields["wait"]; ok {
		// The task runs nothing: it waits for a signal, a duration or a
		// time.
		if t.wait = c.wait(f, t.w.child("wait")); t.wait == nil {
			t.ok = false
		}
		c.checkWait(t, fields)
	} else if f, ok := fields["workflow"]; ok {
		// The task's body is another workflow: it has no action of its own.
		t.workflowN = f.keyN
		if t.child = c.childWorkflow(f.value, t.w.child("workflow")); t.child == nil {
			t.ok = false
		}
		c.checkChild(t, fields)
	} else {
		t.capability = c.requiredName(fields, "capability", t, capabilityRE,
			"add e.g. capability: net.scan (the class of workers that run the task), or workflow: NAME@VERSION to run a registered workflow",
			"use lowercase words separated by dots, each starting with a letter, e.g. net.scan or ai.inference")
		t.action = c.requiredName(fields, "action", t, actionRE,
			"add e.g. action: exec (exec, http, sleep or echo)",
			"use lowercase letters, digits, '_', '.' and '-', starting with a letter, e.g. exec")
	}
	if f, ok := fields["description"]; ok {
		t.desc, _ = c.str(f.value, t.w.child("description"))
	}
	if f, ok := fields["needs"]; ok {
		t.needs = c.needs(f, t.w.child("needs"))
	}
	if f, ok := fields["with"]; ok {
		t.with = f.value
	}
	if f, ok := fields["spread"]; ok {
		t.spread = f.value
	}
	if f, ok := fields["when"]; ok {
		t.when = f.value
	}
	if f, ok := fields["accept"]; ok {
		t.accept = f.value
	}
	if f, ok := fields["verify"]; ok {
		t.verify = c.verify(f.value, t.w.child("verify"))
	}
	if f, ok := fields["join"]; ok {
		t.join = c.join(f, t.w.child("join"))
		if t.join == nil {
			t.ok = false
		}
	}
	if f, ok := fields["loop"]; ok {
		if t.loop = c.loop(f, t.w.child("loop")); t.loop == nil {
			t.ok = false
		}
	}
	if f, ok := fields["on"]; ok {
		t.onN = f.keyN
		if t.on = c.on(f.value, t.w.child("on")); t.on == robonetv1.TaskOn_TASK_ON_UNSPECIFIED {
			t.ok = false
		}
		c.checkOn(t)
	}
	t.policy = c.policy(fields, t.w)
	if t.policy.onFailure == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT && t.policy.retryNode != nil {
		c.errorf(t.policy.retryNode, t.w.child("retry"), "use on_failure: retry to retry and then fail the workflow, or remove retry",
			"on_failure: abort never retries, so a retry policy here has no effect")
	}
	return t
}

// requiredName reads a required string field that must match re.
func (c *compiler) requiredName(fields map[string]entry, key string, t *taskSpec, re interface{ MatchString(string) bool }, missingHint, syntaxHint string) string {
	w := t.w.child(key)
	f, ok := fields[key]
	if !ok {
		c.errorf(t.keyN, w, missingHint, "missing required field %q", key)
		t.ok = false
		return ""
	}
	s, ok := c.str(f.value, w)
	if !ok {
		t.ok = false
		return ""
	}
	if !re.MatchString(s) {
		c.errorf(c.resolve(f.value), w, syntaxHint, "invalid %s %q", key, s)
		t.ok = false
	}
	return s
}

// maxVerify is the most nodes an attempt can be verified on.
const maxVerify = 3

// verify reads how many distinct nodes run each attempt: 1..maxVerify.
func (c *compiler) verify(v *yaml.Node, w where) uint32 {
	n := c.resolve(v)
	if n == nil {
		return 0
	}
	hint := "verify: 2 runs each attempt on two worker nodes and compares their outputs (a third breaks a tie); verify: 1 runs it once"
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		c.errorf(n, w, hint, "verify must be a whole number, not %s", describe(n))
		return 0
	}
	i, ok := intValue(n)
	if !ok || i < 1 || i > maxVerify {
		c.errorf(n, w, hint, "verify must be between 1 and %d, not %s", maxVerify, n.Value)
		return 0
	}
	return uint32(i)
}

// join reads `join: {min: N, cancel_rest: bool}`; nil when it is invalid.
// min is checked against the task's needs later, by checkJoin.
func (c *compiler) join(f entry, w where) *joinSpec {
	n := c.resolve(f.value)
	if n == nil {
		return nil
	}
	const hint = "write join: {min: 2} to start once 2 of the needs completed (add cancel_rest: true to cancel the others)"
	if n.Kind != yaml.MappingNode {
		c.errorf(n, w, hint, "join must be a mapping, not %s", describe(n))
		return nil
	}
	entries, ok := c.mapping(n, w, "join")
	if !ok {
		return nil
	}
	j := &joinSpec{keyN: f.keyN}
	valid := true
	fields := c.checkKeys(entries, joinKeys, w, "join")
	if len(fields) < len(entries) {
		valid = false
	}
	m, ok := fields["min"]
	switch {
	case !ok:
		c.errorf(f.keyN, w.child("min"), hint, "missing required field \"min\"")
		valid = false
	case m.value == nil: // a misspelt key, reported already
		valid = false
	default:
		mn := c.resolve(m.value)
		if mn == nil {
			return nil
		}
		const minHint = "min is how many needs must complete before the task starts: a whole number from 1 to the number of needs"
		if mn.Kind != yaml.ScalarNode || mn.Tag != "!!int" {
			c.errorf(mn, w.child("min"), minHint, "join.min must be a whole number, not %s", describe(mn))
			valid = false
			break
		}
		v, ok := intValue(mn)
		if !ok || v < 1 {
			c.errorf(mn, w.child("min"), minHint, "join.min must be at least 1, not %s", mn.Value)
			valid = false
			break
		}
		j.min, j.minN = v, mn
	}
	if cr, ok := fields["cancel_rest"]; ok && cr.value != nil {
		cn := c.resolve(cr.value)
		if cn == nil {
			return nil
		}
		if cn.Kind != yaml.ScalarNode || cn.Tag != "!!bool" {
			c.errorf(cn, w.child("cancel_rest"), "write cancel_rest: true to cancel the needs still running when the join starts, or cancel_rest: false (the default) to let them finish",
				"join.cancel_rest must be true or false, not %s", describe(cn))
			valid = false
		} else {
			j.cancelRest = cn.Value == "true" || cn.Value == "True" || cn.Value == "TRUE"
		}
	}
	if !valid {
		return nil
	}
	return j
}

// checkJoin checks a join against the task's direct needs (de-duplicated)
// and returns its IR.
func (c *compiler) checkJoin(t *taskSpec, needs []string) *robonetv1.Join {
	j := t.join
	w := t.w.child("join")
	switch {
	case len(needs) == 0:
		c.errorf(j.keyN, w, "add needs: [a, b, c] to the task, or remove join",
			"join without needs: a join waits for some of the task's needs, and it has none")
		return nil
	case j.min > int64(len(needs)):
		noun := "needs"
		if len(needs) == 1 {
			noun = "need"
		}
		c.errorf(j.minN, w.child("min"), fmt.Sprintf("use a min from 1 to %d, or add needs", len(needs)),
			"join.min is %d, but the task has only %d %s", j.min, len(needs), noun)
		return nil
	}
	return &robonetv1.Join{Min: uint32(j.min), CancelRest: j.cancelRest}
}

// needs reads a list of task names, or a single name.
func (c *compiler) needs(f entry, w where) []need {
	n := c.resolve(f.value)
	if n == nil {
		return nil
	}
	switch {
	case isNull(n):
		return nil
	case n.Kind == yaml.ScalarNode:
		if name, ok := c.str(n, w); ok {
			return []need{{name: name, node: n, w: w}}
		}
		return nil
	case n.Kind != yaml.SequenceNode:
		c.errorf(n, w, "write needs: [a, b] or needs: a", "needs must be a task name or a list of task names, not %s", describe(n))
		return nil
	}
	var out []need
	for i, item := range n.Content {
		iw := w.index(i)
		name, ok := c.str(item, iw)
		if !ok {
			continue
		}
		out = append(out, need{name: name, node: c.resolve(item), w: iw})
	}
	return out
}

// buildTask produces the IR of one task: templates and expressions checked in
// the task's scope, policies folded with the defaults.
func (c *compiler) buildTask(t *taskSpec, defaults policy, g *graph, inputs []string) *robonetv1.Task {
	ir := &robonetv1.Task{
		Name:        t.name,
		Capability:  t.capability,
		Action:      t.action,
		Description: t.desc,
		Needs:       g.directNeeds(t.name),
	}
	sc := &scope{task: t.name, graph: g, inputs: inputs}
	if t.spread != nil {
		sc.field = "spread"
		ir.Spread = c.guardExpr(t.spread, sc, "spread", "list", "${{ tasks.discover.output.hosts }}")
	}
	if t.when != nil {
		sc.field = "when"
		ir.When = c.guardExpr(t.when, sc, "when", "bool", "${{ size(tasks.probe.output) > 0 }}")
	}
	if t.loop != nil {
		if ir.Loop = c.buildLoop(t, sc); ir.Loop == nil {
			t.ok = false
		}
		// An iteration's with and accept read iteration, previous and,
		// in a loop over a list, item.
		sc.loop, sc.loopItem = true, t.loop.over != nil
	}
	if t.with != nil {
		sc.field = "with"
		// An every_node run reads its node's name as item, its place in
		// the node list as index.
		sc.spread = t.spread != nil || t.on == robonetv1.TaskOn_TASK_ON_EVERY_NODE
		ir.With = c.template(t.with, sc)
	}
	if t.accept != nil {
		sc.field, sc.spread, sc.accept = "accept", t.spread != nil || t.on == robonetv1.TaskOn_TASK_ON_EVERY_NODE, true
		ir.Accept, ir.AcceptText = c.acceptExpr(t.accept, sc)
	}
	ir.OnFailure, ir.Retry, ir.Timeout = fold(t.policy, defaults)
	if t.wait != nil {
		// A signal wait's timeout is the wait's own; defaults.timeout
		// bounds attempts that run something.
		ir.Timeout = nil
		if ir.Wait = c.buildWait(t, sc); ir.Wait == nil {
			t.ok = false
		}
	}
	if t.verify > 1 {
		ir.Verify = t.verify
	}
	ir.On = t.on
	ir.Workflow = t.child
	if t.join != nil {
		if ir.Join = c.checkJoin(t, ir.Needs); ir.Join == nil {
			t.ok = false
		}
	}
	if !t.ok {
		return nil
	}
	return ir
}

// describeWant is the start of messages about spread and when.
func describeWant(want string) string {
	return fmt.Sprintf("must be a single ${{ expression }} of type %s", want)
}

// on reads a task's `on:`; only every_node exists. UNSPECIFIED means the
// value was refused (an error was reported).
func (c *compiler) on(v *yaml.Node, w where) robonetv1.TaskOn {
	const hint = "on: every_node runs the task once on each node serving its capability; remove on to run it once"
	n := c.resolve(v)
	if n == nil {
		return robonetv1.TaskOn_TASK_ON_UNSPECIFIED
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Value != "every_node" {
		c.errorf(n, w, hint, "unknown on %s (only every_node exists)", describe(n))
		return robonetv1.TaskOn_TASK_ON_UNSPECIFIED
	}
	return robonetv1.TaskOn_TASK_ON_EVERY_NODE
}

// checkOn refuses what on: every_node cannot be combined with (yet):
// spread, loop and verify.
func (c *compiler) checkOn(t *taskSpec) {
	w := t.w.child("on")
	for _, other := range []struct {
		set  bool
		key  string
		hint string
	}{
		{t.spread != nil, "spread", "put the spread in a task of its own; on: every_node already runs one execution per node"},
		{t.loop != nil, "loop", "put the loop in a task of its own that needs this one"},
		{t.verify > 0, "verify", "remove verify: each run of on: every_node is pinned to its own node, so it cannot be compared across nodes"},
	} {
		if other.set {
			c.errorf(t.onN, w, other.hint, "a task cannot have both on: every_node and %s", other.key)
			t.ok = false
		}
	}
}
