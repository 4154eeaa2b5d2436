package wag

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
)

// pinned is an attempt of a task with on: every_node, pinned to node.
func pinned(exec, node string) port.TaskDispatch {
	d := task("echo", exec)
	d.AttemptKey, d.Node = testKey(exec), node
	return d
}

// An attempt pinned to a node goes only to a worker of that node, even
// with another node's worker free, and waits for one (visibly) while the
// other attempts go on; with no worker of its node for InheritGrace it
// fails, rather than run elsewhere.
func TestWagglerPinnedGoesOnlyToItsNode(t *testing.T) {
	a1, b1 := newFakeWorker("na/c/1"), newFakeWorker("nb/c/1")
	h := newHarness(t, a1, b1)
	h.w.enqueue([]port.TaskDispatch{pinned("inv[1]", "nb")})
	a := b1.assigned(t)
	if a.ExecutionID != "inv[1]" || a.Node != "nb" {
		t.Fatalf("nb got %+v", a)
	}
	a1.idle(t)
	b1.report(h.w, a, "b")

	lost := pinned("inv[2]", "nc")
	h.w.enqueue([]port.TaskDispatch{lost})
	a1.idle(t)
	b1.idle(t)
	plain := h.dispatch("plain")
	// The most recently freed worker (nb's) takes the unpinned attempt.
	if a = b1.assigned(t); a.AttemptKey != plain[0].AttemptKey {
		t.Fatalf("nb got %+v, want the unpinned attempt", a)
	}
	b1.report(h.w, a, "a")
	a1.idle(t)
	h.clk.Advance(500 * time.Millisecond)
	notices := h.sink.Progress()
	if len(notices) != 1 || notices[0].AttemptKey != lost.AttemptKey || !strings.Contains(notices[0].Message, "pinned to node nc") {
		t.Fatalf("progress %+v, want a waiting notice for inv[2]", notices)
	}
	if rs := h.sink.Results(); len(rs) != 2 {
		t.Fatalf("results before the grace: %+v", rs)
	}
	for range 14 { // InheritGrace: 6 s
		h.clk.Advance(500 * time.Millisecond)
	}
	r := h.sink.result(t, lost.AttemptKey)
	if r.OK || !strings.Contains(r.Error, "node nc left while running") {
		t.Fatalf("result %+v", r)
	}
	if st := h.w.Status(); st.Queued != 0 || st.Failovers != 0 || st.Workers != 2 {
		t.Fatalf("status %+v", st)
	}
}

// A pinned attempt whose node is declared dead fails ("node X left while
// running") instead of failing over to another node's worker; an unpinned
// one on the same node fails over.
func TestWagglerPinnedNodeDeathFails(t *testing.T) {
	a1, b1, b2 := newFakeWorker("na/c/1"), newFakeWorker("nb/c/1"), newFakeWorker("nb/c/2")
	h := newHarness(t, b1, b2)
	d := pinned("inv[1]", "nb")
	h.w.enqueue([]port.TaskDispatch{d})
	var on *fakeWorker
	select {
	case <-b1.runs:
		on = b2
	case <-b2.runs:
		on = b1
	default:
		t.Fatal("the pinned attempt was not assigned")
	}
	plain := h.dispatch("plain")
	if a := on.assigned(t); a.AttemptKey != plain[0].AttemptKey {
		t.Fatalf("got %+v", a)
	}
	if err := h.w.AddWorker(a1); err != nil {
		t.Fatal(err)
	}
	h.w.workersOfNodeDead("nb")
	r := h.sink.result(t, d.AttemptKey)
	if r.OK || !strings.Contains(r.Error, "node nb left while running") {
		t.Fatalf("result %+v", r)
	}
	if a := a1.assigned(t); a.AttemptKey != plain[0].AttemptKey {
		t.Fatalf("na got %+v, want only the unpinned attempt failed over", a)
	}
	a1.idle(t)
	if st := h.w.Status(); st.Queued != 0 || st.Running != 1 || st.Failovers != 1 {
		t.Fatalf("status %+v", st)
	}
}

// The Router's Nodes are RouterConfig.Nodes' answer without the
// quarantined nodes, sorted and without duplicates; none without it.
func TestRouterNodes(t *testing.T) {
	dir := newFakeDir()
	dir.quar = []string{"nb"}
	r, err := NewRouter(RouterConfig{Term: 1, Sink: newSink(), Directory: dir, Logger: zaptest.NewLogger(t),
		Nodes: func(c string) []string {
			if c != "net.scan" {
				return nil
			}
			return []string{"nc", "nb", "na", "nc"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	if got := r.Nodes("net.scan"); !slices.Equal(got, []string{"na", "nc"}) {
		t.Fatalf("Nodes(net.scan) = %v", got)
	}
	if got := r.Nodes("other"); len(got) != 0 {
		t.Fatalf("Nodes(other) = %v", got)
	}
	if got := startRouter(t, newFakeDir()).Nodes("net.scan"); got != nil {
		t.Fatalf("without RouterConfig.Nodes: %v", got)
	}
}
