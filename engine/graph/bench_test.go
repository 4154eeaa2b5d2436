package graph

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// chainPlan is a chain t0000000 → t0000001 → … where every task passes its
// predecessor's output on: `with: ${{ tasks.<prev>.output }}`.
func chainPlan(tb testing.TB, n int) *Plan {
	ts := make([]*robonetv1.Task, n)
	ts[0] = newTask(chainName(0), with(lit(`1`)))
	for i := 1; i < n; i++ {
		ts[i] = newTask(chainName(i), needs(chainName(i-1)), with(ex("tasks."+chainName(i-1)+".output")))
	}
	return mustPlan(tb, newWorkflow(tasks(ts...), output("last", ex("tasks."+chainName(n-1)+".output"))), Options{})
}

// BenchmarkCompleteChain measures one completion on a chain: accept the
// result, resolve, evaluate the successor's `with` and dispatch it. The two
// lengths show the cost does not grow with the graph. Building the
// 1,000,000-task plan takes about 40 s (one CEL type-check per task); it
// happens once, outside the timed loop.
func BenchmarkCompleteChain(b *testing.B) {
	for _, n := range []int{100, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("length=%d", n), func(b *testing.B) {
			p := chainPlan(b, n)
			completeInOrder(b, p)
		})
	}
}

// BenchmarkCompleteJoinChain measures one completion on a chain of 1-of-2
// joins: t(i) needs t(i-1) and t(i-2) with join: {min: 1}, and passes the
// output of t(i-2) on. Completing t(i) in order fires t(i+2) and is the
// rest of t(i+1), which fired already: the two paths of a join, per
// completion. The two lengths show the cost does not grow with the graph.
func BenchmarkCompleteJoinChain(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("length=%d", n), func(b *testing.B) {
			ts := make([]*robonetv1.Task, n)
			ts[0] = newTask(chainName(0), with(lit(`1`)))
			ts[1] = newTask(chainName(1), needs(chainName(0)), with(ex("tasks."+chainName(0)+".output")))
			for i := 2; i < n; i++ {
				ts[i] = newTask(chainName(i), needs(chainName(i-1), chainName(i-2)), join(1, false),
					with(ex("tasks."+chainName(i-2)+".output")))
			}
			p := mustPlan(b, newWorkflow(tasks(ts...), output("last", ex("tasks."+chainName(n-1)+".output"))), Options{})
			completeInOrder(b, p)
		})
	}
}

// completeInOrder times completing the tasks of p one by one in node
// order, starting a new instance whenever the last one is done.
func completeInOrder(b *testing.B, p *Plan) {
	n := int32(p.NumTasks())
	// Finish the collection that building the plan set off, so the
	// timed loop does not pay write barriers for a setup GC.
	runtime.GC()
	out := any(int64(42))
	var g *Graph
	next := n
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if next == n {
			b.StopTimer()
			g = p.NewGraph("bench")
			if _, err := g.Start(nil, t0); err != nil {
				b.Fatal(err)
			}
			next = 0
			b.StartTimer()
		}
		g.Complete(Ref(next), 1, Result{Output: out}, t0)
		next++
	}
}

// spreadPlan is src → s (spread over src's output, `with: ${{ item }}`) →
// after.
func spreadPlan(tb testing.TB, width int, opts ...taskOpt) *Plan {
	return mustPlan(tb, newWorkflow(tasks(
		newTask("src"),
		newTask("s", append([]taskOpt{needs("src"), spreadOver("tasks.src.output"), with(ex("item"))}, opts...)...),
		newTask("after", needs("s"), with(lit(`null`))),
	), output("n", ex("size(tasks.s.output)"))), Options{MaxSpreadWidth: max(width, DefaultMaxSpreadWidth)})
}

func intList(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = int64(i)
	}
	return l
}

// expandedSpread returns a graph whose spread task has just been expanded.
func expandedSpread(tb testing.TB, p *Plan, items []any) *Graph {
	g := p.NewGraph("bench")
	if _, err := g.Start(nil, t0); err != nil {
		tb.Fatal(err)
	}
	src, _ := p.Lookup("src")
	if fx := g.Complete(Ref(src), 1, Result{Output: items}, t0); len(fx) < len(items) {
		tb.Fatalf("expansion emitted %d effects", len(fx))
	}
	return g
}

// BenchmarkCompleteSpread measures one instance completion; the cost must
// not depend on the width.
func BenchmarkCompleteSpread(b *testing.B) {
	for _, width := range []int{100, 1_000_000} {
		b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
			p := spreadPlan(b, width)
			s, _ := p.Lookup("s")
			items := intList(width)
			out := any(int64(7))
			var g *Graph
			next := int32(width)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if next == int32(width) {
					b.StopTimer()
					if width >= 100_000 {
						g = nil
						runtime.GC() // do not bill the previous round's garbage
					}
					g = expandedSpread(b, p, items)
					next = 0
					b.StartTimer()
				}
				g.Complete(TaskRef{Node: s, Index: next}, 1, Result{Output: out}, t0)
				next++
			}
		})
	}
}

// BenchmarkSpreadExpandGather runs a whole instance: start, expand the
// spread, complete every instance, gather, finish.
func BenchmarkSpreadExpandGather(b *testing.B) {
	for _, width := range []int{100_000} {
		b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
			p := spreadPlan(b, width)
			src, _ := p.Lookup("src")
			s, _ := p.Lookup("s")
			after, _ := p.Lookup("after")
			items := intList(width)
			out := any(int64(7))
			b.ReportAllocs()
			for b.Loop() {
				g := p.NewGraph("bench")
				if _, err := g.Start(nil, t0); err != nil {
					b.Fatal(err)
				}
				g.Complete(Ref(src), 1, Result{Output: items}, t0)
				for i := range int32(width) {
					g.Complete(TaskRef{Node: s, Index: i}, 1, Result{Output: out}, t0)
				}
				g.Complete(Ref(after), 1, Result{Output: out}, t0)
				if g.State() != Complete {
					b.Fatalf("state %s", g.State())
				}
			}
		})
	}
}

// pendingNodeHeap returns the live heap per pending instance of a spread of
// the given width right after expansion: with the Dispatch effects the
// expansion returned, and after the graph dropped them.
func pendingNodeHeap(tb testing.TB, width int, opts ...taskOpt) (withEffects, stateOnly float64) {
	p := spreadPlan(tb, width, opts...)
	items := intList(width) // the upstream output: not counted
	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	g := expandedSpread(tb, p, items)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	g.Complete(TaskRef{Node: -1}, 0, Result{}, t0) // stale: releases the effects
	runtime.GC()
	runtime.ReadMemStats(&m2)
	runtime.KeepAlive(g)
	runtime.KeepAlive(items)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(width),
		float64(int64(m2.HeapAlloc)-int64(m0.HeapAlloc)) / float64(width)
}

// heapCases are the spread shapes whose memory is measured: plain, and with
// a timeout and retries (a due time per instance, two effects each).
var heapCases = []struct {
	name string
	opts []taskOpt
}{
	{"plain", nil},
	{"timeout+retry", []taskOpt{timeoutAfter(time.Minute), retry(3, time.Second, 2, time.Minute, 0.1)}},
}

// BenchmarkPendingNodeHeap reports heap bytes per pending instance of a
// 1,000,000-wide spread (B/node includes the returned Dispatch and SetTimer
// effects, B/node-state only what the graph keeps).
func BenchmarkPendingNodeHeap(b *testing.B) {
	for _, tc := range heapCases {
		b.Run(tc.name, func(b *testing.B) {
			var withFx, state float64
			for b.Loop() {
				withFx, state = pendingNodeHeap(b, 1_000_000, tc.opts...)
			}
			b.ReportMetric(withFx, "B/node")
			b.ReportMetric(state, "B/node-state")
		})
	}
}

func TestPendingNodeHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a 1,000,000-wide spread")
	}
	for _, tc := range heapCases {
		withFx, state := pendingNodeHeap(t, 1_000_000, tc.opts...)
		t.Logf("%s: %.1f B/pending node with effects, %.1f B/pending node of state", tc.name, withFx, state)
		if withFx > 400 {
			t.Errorf("%s: %.1f B per pending node, budget 400", tc.name, withFx)
		}
	}
}

// BenchmarkCompleteLoop measures one iteration of a loop: complete the
// current iteration, evaluate until (`output >= N-1`, false until the
// last), evaluate the next iteration's with (`${{ iteration }}`) and
// dispatch it. The loop runs N iterations, then a new instance starts; the
// three lengths show an iteration costs the same however many came before
// (the outputs list grows by appending).
func BenchmarkCompleteLoop(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("iterations=%d", n), func(b *testing.B) {
			p := mustPlan(b, newWorkflow(tasks(newTask("poll",
				loopUntil(fmt.Sprintf("output >= %d", n-1), uint32(n)), with(ex("iteration"))),
			), output("n", ex("size(tasks.poll.output)"))), Options{})
			runtime.GC()
			var g *Graph
			next := int32(n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if next == int32(n) {
					b.StopTimer()
					g = p.NewGraph("bench")
					if _, err := g.Start(nil, t0); err != nil {
						b.Fatal(err)
					}
					next = 0
					b.StartTimer()
				}
				g.Complete(TaskRef{Node: 0, Index: next}, 1, Result{Output: int64(next)}, t0)
				next++
			}
			b.StopTimer()
			if next == int32(n) && g.State() != Complete {
				b.Fatalf("state %s after %d iterations: %v", g.State(), n, g.Err())
			}
		})
	}
}
