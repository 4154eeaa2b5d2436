package dashboard

import (
	"fmt"
	"slices"
)

// A workflow's DAG drawn left to right: each task in the layer after its
// deepest dependency, the tasks of a layer ordered to keep edges short
// (barycenters of their neighbours, sweeping down and up a few times), the
// layers centred on one another. Pure computation, so the drawing of any
// workflow is tested without a browser.

// dagNode is one task to draw.
type dagNode struct {
	Name   string
	Needs  []string
	Status string // the CSS class of its state: waiting, running, completed, failed, skipped, cancelled, retrying
	Label  string // a second line: "3/10 done" for a spread, the attempt for a retried task
	Title  string // shown on hover: capability, action, attempts, the last error
}

// placed is a node with its box.
type placed struct {
	dagNode
	X, Y, W, H int
}

// edge is one dependency, drawn from its need to its task.
type edge struct {
	From, To string
	Path     string // SVG path data
	Status   string // the need's status: an edge is "done" once its need completed
}

// dag is a drawing.
type dag struct {
	Width, Height int
	Nodes         []placed
	Edges         []edge
}

// Box sizes and gaps, in SVG units (pixels at 100 %).
const (
	boxW, boxH   = 168, 46
	gapX, gapY   = 56, 16
	pad          = 12
	orderSweeps  = 4
	maxDrawnDAG  = 2000 // tasks; a workflow has at most 1,000
	nameRunesMax = 22   // longer names are clipped in the box (the title has them whole)
)

// layoutDAG places nodes, given in dependency order (every need before
// the task that needs it, as the API lists them).
func layoutDAG(nodes []dagNode) dag {
	if len(nodes) > maxDrawnDAG {
		nodes = nodes[:maxDrawnDAG]
	}
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.Name] = i
	}
	// Layers: one after the deepest need.
	layer := make([]int, len(nodes))
	depth := 0
	for i, n := range nodes {
		for _, need := range n.Needs {
			if j, ok := index[need]; ok && j < i {
				layer[i] = max(layer[i], layer[j]+1)
			}
		}
		depth = max(depth, layer[i]+1)
	}
	layers := make([][]int, depth)
	for i := range nodes {
		layers[layer[i]] = append(layers[layer[i]], i)
	}
	// Order within layers: barycenter sweeps.
	pos := make([]float64, len(nodes))
	renumber := func() {
		for _, l := range layers {
			for k, i := range l {
				pos[i] = float64(k)
			}
		}
	}
	renumber()
	succ := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, need := range n.Needs {
			if j, ok := index[need]; ok && j < i {
				succ[j] = append(succ[j], i)
			}
		}
	}
	pred := func(i int) []int {
		var out []int
		for _, need := range nodes[i].Needs {
			if j, ok := index[need]; ok && j < i {
				out = append(out, j)
			}
		}
		return out
	}
	bary := func(i int, neighbours []int) float64 {
		if len(neighbours) == 0 {
			return pos[i]
		}
		sum := 0.0
		for _, j := range neighbours {
			sum += pos[j]
		}
		return sum / float64(len(neighbours))
	}
	for sweep := range orderSweeps {
		down := sweep%2 == 0
		for k := range layers {
			l := k
			if !down {
				l = len(layers) - 1 - k
			}
			key := make(map[int]float64, len(layers[l]))
			for _, i := range layers[l] {
				if down {
					key[i] = bary(i, pred(i))
				} else {
					key[i] = bary(i, succ[i])
				}
			}
			slices.SortStableFunc(layers[l], func(a, b int) int {
				switch {
				case key[a] < key[b]:
					return -1
				case key[a] > key[b]:
					return 1
				}
				return 0
			})
			for k, i := range layers[l] {
				pos[i] = float64(k)
			}
		}
	}
	// Coordinates: layers left to right, each centred vertically.
	rows := 0
	for _, l := range layers {
		rows = max(rows, len(l))
	}
	d := dag{
		Width:  2*pad + depth*boxW + max(depth-1, 0)*gapX,
		Height: 2*pad + rows*boxH + max(rows-1, 0)*gapY,
	}
	at := make([]placed, len(nodes))
	for l, members := range layers {
		offset := (rows - len(members)) * (boxH + gapY) / 2
		for k, i := range members {
			at[i] = placed{dagNode: nodes[i], X: pad + l*(boxW+gapX), Y: pad + offset + k*(boxH+gapY), W: boxW, H: boxH}
		}
	}
	for _, l := range layers {
		for _, i := range l {
			d.Nodes = append(d.Nodes, at[i])
		}
	}
	for i, n := range nodes {
		for _, need := range n.Needs {
			j, ok := index[need]
			if !ok || j >= i {
				continue
			}
			from, to := at[j], at[i]
			x1, y1 := from.X+from.W, from.Y+from.H/2
			x2, y2 := to.X, to.Y+to.H/2
			mid := (x1 + x2) / 2
			d.Edges = append(d.Edges, edge{From: need, To: n.Name, Status: from.Status,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
		}
	}
	return d
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
