package graph

import (
	"fmt"
	"strconv"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Child workflows. A task whose body is another workflow (Task.workflow)
// is, to the graph, a task like any: each attempt is a Dispatch whose input
// is the evaluated with (the child's inputs), completed by Complete with
// the child's outputs or its failure; spreads, loops, retries, timeouts and
// cancels apply unchanged. Starting the child instance is the runloop's
// (the graph does no I/O). The graph bounds two things, deterministically,
// so that a replay after a restart refuses exactly what the first run
// refused:
//
//   - depth: an instance at Options.MaxChildDepth (its depth is set by
//     SetDepth) starts no child;
//   - count: an instance starts at most Options.MaxChildren children in
//     its life (every attempt of a child task is one), counted in the
//     snapshot.
//
// A refused attempt fails without retry (another attempt would be refused
// the same way), and the task's on_failure decides, as for a with that
// cannot be evaluated.

// Defaults of the child workflow limits (Options).
const (
	// DefaultMaxChildDepth: a child of a child ... eight deep.
	DefaultMaxChildDepth = 8
	// DefaultMaxChildren: child instances one instance may start.
	DefaultMaxChildren = 1000
)

// childPlan is the compiled child workflow reference of a task.
type childPlan struct {
	name    string
	version uint32 // 0: the latest, resolved by the runloop at submission
}

// label is the reference as written in a spec: name@version, or name.
func (c *childPlan) label() string {
	if c.version == 0 {
		return c.name
	}
	return c.name + "@" + strconv.FormatUint(uint64(c.version), 10)
}

// compileChild checks a task's child workflow reference: a task whose body
// is a workflow has no action of its own.
func compileChild(nd *node, t *robonetv1.Task) error {
	c := t.GetWorkflow()
	if c == nil {
		return nil
	}
	switch {
	case c.GetName() == "":
		return planErr("task %q: its child workflow has no name", nd.name)
	case t.GetCapability() != "" || t.GetAction() != "":
		return planErr("task %q: a task whose body is a child workflow has no capability or action", nd.name)
	case t.GetVerify() > 1 || t.GetOn() != robonetv1.TaskOn_TASK_ON_UNSPECIFIED:
		return planErr("task %q: a task whose body is a child workflow cannot have verify or on", nd.name)
	}
	nd.child = true
	nd.childRef = &childPlan{name: c.GetName(), version: c.GetVersion()}
	return nil
}

// Child returns the workflow that task node runs as a child instance —
// its name and version, 0 for the latest — and whether it runs one.
func (p *Plan) Child(node int32) (name string, version uint32, ok bool) {
	if node < 0 || int(node) >= len(p.nodes) || !p.nodes[node].child {
		return "", 0, false
	}
	c := p.nodes[node].childRef
	return c.name, c.version, true
}

// HasChildren reports whether some task of the plan runs a child workflow.
func (p *Plan) HasChildren() bool { return p.children }

// SetDepth sets the instance's depth among child workflows: 0 for an
// instance that was submitted, its parent's depth plus one for a child
// instance. It is not part of the snapshot: the runloop keeps it with the
// instance and sets it after NewGraph or Restore, before Start or Resume.
func (g *Graph) SetDepth(depth int) { g.depth = depth }

// Depth is the depth SetDepth set.
func (g *Graph) Depth() int { return g.depth }

// Children is how many child instances the instance started: one per
// attempt of a child workflow task that was not refused.
func (g *Graph) Children() uint32 { return g.children }

// startChild counts an attempt of a child workflow task about to be
// dispatched, or returns why it is refused.
func (g *Graph) startChild(nd *node) string {
	o := g.plan.opts
	switch {
	case g.depth >= o.MaxChildDepth:
		return fmt.Sprintf("child workflow %s not started: it would run %d deep, past the child-depth limit of %d "+
			"(a workflow that runs itself as a child needs a when: that ends the recursion)",
			nd.childRef.label(), g.depth+1, o.MaxChildDepth)
	case g.children >= uint32(o.MaxChildren):
		return fmt.Sprintf("child workflow %s not started: this instance started %d child workflows, the children-per-instance limit",
			nd.childRef.label(), g.children)
	}
	g.children++
	return ""
}
