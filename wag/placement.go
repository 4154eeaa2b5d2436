package wag

import (
	"slices"
	"time"

	"github.com/robonet/robonet/trust"
)

// rankOf is a subject's trust rank (cached until the next tick); every
// subject ranks the same without a Trust.
func (w *Waggler) rankOf(subject string) int {
	if w.trust == nil {
		return topRank
	}
	return askOnce(w.rank, subject, w.trust.Rank)
}

// workerRank is ww's rank: its node's, and for a worker program's slot
// the lower of its node's and the program's own.
func (w *Waggler) workerRank(ww *wagWorker) int {
	r := w.rankOf(ww.node)
	if ww.subject != ww.node {
		r = min(r, w.rankOf(ww.subject))
	}
	return r
}

// askOnce returns cache[node], asking ask on a miss and keeping its answer
// (the tick clears the caches: trust moves).
func askOnce(cache map[string]int, node string, ask func(string) int) int {
	v, ok := cache[node]
	if !ok {
		v = ask(node)
		cache[node] = v
	}
	return v
}

// topRank is the highest trust rank: a worker of it is taken at once.
const topRank = int(trust.Trusted)

// Locality. Attempts that run for less than localBelow (the recent mean,
// once localAfter have finished here) go to an idle worker of the
// Waggler's own node when it has one, as the most trusted: sending one to
// another node (the attempt and its start and result each crossing a
// stream, in two more processes) costs more than running it, and where so
// short an attempt runs changes nothing for the load. When this node's
// workers are all busy, such an attempt waits for one of them as long as
// the queue ahead of it would drain in under localBelow by the mean (see
// waitLocal); past that it goes to the others. Longer attempts go to the
// most recently freed worker wherever it is, which spreads them over the
// nodes.
const (
	localBelow = 5 * time.Millisecond
	localAfter = 16
)

// runTimes is an exponentially weighted mean of attempts' run times.
type runTimes struct {
	mean time.Duration
	n    int // samples, counted up to localAfter
}

func (rt *runTimes) observe(d time.Duration) {
	d = max(d, 0)
	if rt.n == 0 {
		rt.mean = d
	} else {
		rt.mean += (d - rt.mean) / 16
	}
	rt.n = min(rt.n+1, localAfter)
}

// short reports whether recent attempts ran for less than localBelow.
func (rt *runTimes) short() bool { return rt.n >= localAfter && rt.mean < localBelow }

// pickLocal returns the index in w.idle of the most recently freed worker
// of this Waggler's node that may run e, or -1. (A worker program on this
// node is taken only once its own rank is the top one: locality never
// hands a program on probation what a trusted worker could run.)
func (w *Waggler) pickLocal(e *entry) int {
	if w.rankOf(w.node) < topRank {
		return -1
	}
	for i := len(w.idle) - 1; i >= 0; i-- {
		if ww := w.idle[i]; ww.node == w.node && (ww.subject == ww.node || w.rankOf(ww.subject) >= topRank) && w.allowed(e, ww) {
			return i
		}
	}
	return -1
}

// waitLocal reports whether short attempt e, finding none of this node's
// workers idle, had better wait for one than go to another node: the
// queue ahead of it drains in under localBelow, at the recent mean time
// this node's workers take from an assignment to its report (the run
// time alone would not see a node whose CPUs are saturated) over its busy
// workers. With 64 workers turning echoes around in 50 µs that is
// thousands of attempts; with 4 ms attempts, a few dozen. Chains of echo
// tasks on three worker nodes ran at 61–66 % of one node when a third of
// their attempts crossed to the Waggler's peers, and at 66–76 % when they
// waited for its own workers (four runs of each, interleaved on one host:
// docs/benchmarks.md at f91b9cc, fourth pass).
//
// It waits only while this node's workers keep finishing (one did within
// localBelow): should they all hang on attempts that run far longer than
// the mean, the waiting attempts go to the others at the next tick.
// Attempts of a verified group do not wait: their runs belong on
// distinct nodes.
func (w *Waggler) waitLocal(e *entry) bool {
	busy := w.busy[w.node]
	if busy == 0 || w.localTurn.n == 0 || e.d.Group != "" || e.d.Node != "" || w.rankOf(w.node) < topRank {
		return false
	}
	if w.clock.Now().Sub(w.localFreed) >= localBelow {
		return false
	}
	return w.localTurn.mean*time.Duration(w.queued+1)/time.Duration(busy) < localBelow
}

// pickIdle returns the index in w.idle of the worker e goes to, or -1:
// for short attempts one of this node's (see localBelow); otherwise, of
// the workers it may run on, one of the most trusted (workerRank), the
// most recently freed among them.
func (w *Waggler) pickIdle(e *entry) int {
	if w.runs.short() {
		if i := w.pickLocal(e); i >= 0 {
			return i
		}
		if w.waitLocal(e) {
			return -1
		}
	}
	best, bestRank := -1, -2
	for i := len(w.idle) - 1; i >= 0; i-- {
		ww := w.idle[i]
		if !w.allowed(e, ww) {
			continue
		}
		r := w.workerRank(ww)
		if r >= topRank {
			return i
		}
		if r > bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

// withinAllowance reports whether ww may run one more attempt here: the
// busy workers of its subject are fewer than the subject's trust allows,
// and, for a worker program's slot, those of its node (programs included)
// fewer than the node's — so a program on probation runs one attempt at
// a time however trusted its node, and a node on probation cannot escape
// it by connecting programs under many names.
func (w *Waggler) withinAllowance(ww *wagWorker) bool {
	if w.trust == nil {
		return true
	}
	if w.busy[ww.node] >= askOnce(w.allowance, ww.node, w.trust.Allowance) {
		return false
	}
	return ww.subject == ww.node || w.busy[ww.subject] < askOnce(w.allowance, ww.subject, w.trust.Allowance)
}

// allowed reports whether ww may run e: not on a quarantined node or
// program, nor on one that runs all its trust allows, and only on its node
// when it is pinned to one (TaskDispatch.Node); and a run of a verified
// attempt goes neither to a node in its Avoid nor to a node that was given
// a run of its group (running or finished), so the runs compare distinct
// nodes (machines: two programs of one node are one node here).
func (w *Waggler) allowed(e *entry, ww *wagWorker) bool {
	node := ww.node
	if w.quarantined[node] || (ww.subject != node && w.quarantined[ww.subject]) || !w.withinAllowance(ww) || (e.d.Node != "" && e.d.Node != node) {
		return false
	}
	if e.d.Group == "" {
		return true
	}
	return !slices.Contains(e.d.Avoid, node) && !w.groupNodes[e.d.Group][node]
}

// ranOn records that a run of e's group went to node.
func (w *Waggler) ranOn(e *entry, node string) {
	if g := e.d.Group; g != "" {
		if w.groupNodes[g] == nil {
			w.groupNodes[g] = map[string]bool{}
		}
		w.groupNodes[g][node] = true
	}
}

// placeable reports whether a live worker, busy or not, may run e.
func (w *Waggler) placeable(e *entry) bool {
	for _, ww := range w.workers {
		if ww.w != nil && !ww.dead && w.allowed(e, ww) {
			return true
		}
	}
	return false
}

// takeIdle takes an idle worker e may move to: not its own, and allowed.
func (w *Waggler) takeIdle(e *entry) *wagWorker {
	for i := len(w.idle) - 1; i >= 0; i-- {
		if ww := w.idle[i]; ww != e.worker && w.allowed(e, ww) {
			return w.takeIdleAt(i)
		}
	}
	return nil
}

// removeIdle takes ww out of the idle workers if it is one.
func (w *Waggler) removeIdle(ww *wagWorker) {
	if !ww.idle {
		return
	}
	if i := slices.Index(w.idle, ww); i >= 0 {
		w.takeIdleAt(i)
	}
}

// takeIdleAt takes the idle worker at index i out of the idle workers.
func (w *Waggler) takeIdleAt(i int) *wagWorker {
	ww := w.idle[i]
	w.idle = slices.Delete(w.idle, i, i+1)
	ww.idle = false
	return ww
}
