package spec

import (
	"fmt"
	"slices"
	"strings"
)

// graph is the task dependency graph: an edge from a task to each task it
// needs. Only needs that name another existing task become edges.
type graph struct {
	names []string            // every task name, in source order
	set   map[string]bool     // the same names, for lookups
	needs map[string][]string // direct needs, sorted and de-duplicated
	// upstream caches the transitive needs of each task.
	upstream map[string]map[string]bool
}

// graph checks every task's needs (unknown names, self-needs, cycles) and
// builds the dependency graph.
func (c *compiler) graph(tasks []*taskSpec) *graph {
	g := &graph{set: map[string]bool{}, needs: map[string][]string{}, upstream: map[string]map[string]bool{}}
	for _, t := range tasks {
		g.names = append(g.names, t.name)
		g.set[t.name] = true
	}
	for _, t := range tasks {
		var direct []string
		for _, n := range t.needs {
			switch {
			case n.name == t.name:
				c.errorf(n.node, n.w, "remove it from needs", "a task cannot need itself")
			case !g.has(n.name):
				hint := didYouMean(n.name, g.names, nil, "tasks")
				c.errorf(n.node, n.w, hint, "unknown task %q", n.name)
				// Assume the suggested task was meant, so expressions that
				// read it are not reported as well. The spec is rejected
				// anyway, so this edge never reaches the IR.
				if s := suggest(n.name, g.names, nil); s != "" && s != t.name {
					direct = append(direct, s)
				}
			default:
				direct = append(direct, n.name)
			}
		}
		slices.Sort(direct)
		g.needs[t.name] = slices.Compact(direct)
	}
	c.reportCycles(tasks, g)
	return g
}

// directNeeds returns the sorted, de-duplicated direct needs of a task.
func (g *graph) directNeeds(task string) []string {
	return slices.Clone(g.needs[task])
}

// isUpstream reports whether task (transitively) needs other.
func (g *graph) isUpstream(task, other string) bool {
	up, ok := g.upstream[task]
	if !ok {
		up = map[string]bool{}
		stack := slices.Clone(g.needs[task])
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if up[n] {
				continue
			}
			up[n] = true
			stack = append(stack, g.needs[n]...)
		}
		g.upstream[task] = up
	}
	return up[other]
}

func (g *graph) has(task string) bool { return g.set[task] }

// reportCycles finds cycles with a depth-first search and reports each one
// once, at the needs entry that closes it.
func (c *compiler) reportCycles(tasks []*taskSpec, g *graph) {
	const (
		unvisited = iota
		inProgress
		done
	)
	state := map[string]int{}
	byName := map[string]*taskSpec{}
	for _, t := range tasks {
		if _, dup := byName[t.name]; !dup {
			byName[t.name] = t
		}
	}
	var path []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = inProgress
		path = append(path, name)
		seen := map[string]bool{}
		for _, n := range byName[name].needs {
			if n.name == name || !g.has(n.name) || seen[n.name] {
				continue
			}
			seen[n.name] = true
			switch state[n.name] {
			case unvisited:
				visit(n.name)
			case inProgress:
				c.reportCycle(path, n)
			}
		}
		path = path[:len(path)-1]
		state[name] = done
	}
	for _, t := range tasks {
		if state[t.name] == unvisited {
			visit(t.name)
		}
	}
}

// reportCycle reports the cycle that the needs entry n closes: path ends with
// the task that holds n, and n names a task earlier in the path.
func (c *compiler) reportCycle(path []string, n need) {
	start := slices.Index(path, n.name)
	cycle := path[start:]
	// Start the message at the task that holds the entry: "c -> a -> b -> c"
	// reads as "c needs a, which needs b, which needs c".
	holder := cycle[len(cycle)-1]
	ordered := append([]string{holder}, cycle[:len(cycle)-1]...)
	ordered = append(ordered, holder)
	c.errorf(n.node, n.w, fmt.Sprintf("tasks cannot depend on each other in a circle; remove %q from the needs of %q or break the cycle elsewhere", n.name, holder),
		"cycle: %s", strings.Join(ordered, " -> "))
}
