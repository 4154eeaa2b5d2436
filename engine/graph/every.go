package graph

import (
	"fmt"
	"slices"
	"time"
)

// A task with on: every_node runs once on each node serving its capability.
// When it becomes ready the graph cannot know those nodes (membership is
// not part of its state), so it emits a Scatter effect and waits; the
// runloop answers with Scatter(ref, nodes), at once. From then on the task
// is a spread over the node names in sorted order: run i is TaskRef{node,
// i}, pinned to nodes[i], with item = nodes[i] and index = i in its with,
// its own attempts, retries and timeout. Its output is the list of
// {node: NAME, output: VALUE} in that order (output null for a run that
// failed under on_failure: skip). The node list is part of the snapshot,
// so a restored graph never needs to ask again.

// Scatter expands ref, a task with on: every_node waiting for its node
// list (after its Scatter effect), over nodes: the names of the nodes that
// serve its capability. Duplicates are dropped and the names sorted. No
// node fails the task before its first attempt ("no node serves CAP"),
// under its failure policy. Anything else (a task not waiting, an instance
// that ended) is ignored.
func (g *Graph) Scatter(ref TaskRef, nodes []string, now time.Time) []Effect {
	g.begin()
	if !g.state.active() || ref.Index >= 0 || ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) {
		g.stats.StaleCompletions++
		return nil
	}
	node := ref.Node
	sp := g.spreads[node]
	if g.ns[node].status != TaskSpreading || sp == nil || !sp.every || sp.nodes != nil {
		g.stats.StaleCompletions++
		return nil
	}
	nd := &g.plan.nodes[node]
	names := slices.Clone(nodes)
	slices.Sort(names)
	names = slices.Compact(names)
	switch {
	case len(names) == 0:
		g.spreads[node] = nil
		g.taskFailed(node, "no node serves "+nd.capability)
	case len(names) > g.plan.opts.MaxSpreadWidth:
		g.spreads[node] = nil
		g.taskFailed(node, fmt.Sprintf("%d nodes serve %s, more than the spread limit of %d", len(names), nd.capability,
			g.plan.opts.MaxSpreadWidth))
	default:
		g.scatter(node, names, now)
	}
	g.drain(now)
	return g.result()
}

// scatter dispatches one run per node.
func (g *Graph) scatter(node int32, names []string, now time.Time) {
	nd := &g.plan.nodes[node]
	items := make([]any, len(names))
	for i, n := range names {
		items[i] = n
	}
	sp := newSpread(items, nd.needsDue())
	sp.every, sp.nodes = true, names
	g.spreads[node] = sp
	g.dispatchInstances(node, sp, now)
}

// NodeOf returns the node a run of a task with on: every_node is pinned
// to, and false for anything else (or a task still waiting for its list).
func (g *Graph) NodeOf(ref TaskRef) (string, bool) {
	if ref.Node < 0 || int(ref.Node) >= len(g.plan.nodes) || ref.Index < 0 {
		return "", false
	}
	sp := g.spreads[ref.Node]
	if sp == nil || !sp.every || int(ref.Index) >= len(sp.nodes) {
		return "", false
	}
	return sp.nodes[ref.Index], true
}

// Nodes returns the node list of a task with on: every_node once Scatter
// gave it (sorted, shared: read-only), nil otherwise.
func (g *Graph) Nodes(node int32) []string {
	if node < 0 || int(node) >= len(g.plan.nodes) || g.spreads[node] == nil {
		return nil
	}
	return g.spreads[node].nodes
}

// everyOutput is the output of a task with on: every_node: one
// {node, output} per run, in node order.
func everyOutput(nodes []string, outputs []any) []any {
	out := make([]any, len(nodes))
	for i, n := range nodes {
		out[i] = map[string]any{"node": n, "output": outputs[i]}
	}
	return out
}

// everyOutputs reverses everyOutput for a restored task: the runs' own
// outputs, or false when list is not such an output of nodes.
func everyOutputs(nodes []string, list []any) ([]any, bool) {
	if len(list) != len(nodes) {
		return nil, false
	}
	outs := make([]any, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok || m["node"] != nodes[i] {
			return nil, false
		}
		outs[i] = m["output"]
	}
	return outs, true
}
