package wag

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock/clocktest"
)

// The Router's backlog per capability: saturated at BacklogPerSlot per
// slot (at least MinBacklog), reported drained once at half of that, not
// saturated while no result comes for BacklogStall, and exact through
// results, cancels and duplicates.
func TestRouterBacklogSaturatesAndDrains(t *testing.T) {
	clk := clocktest.New()
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	var (
		mu      sync.Mutex
		drained []string
	)
	r, err := NewRouter(RouterConfig{Term: 1, Sink: newSink(), Directory: dir, Logger: zaptest.NewLogger(t), Clock: clk,
		MinBacklog: 4, BacklogPerSlot: 2, Slots: func(c string) int { return map[string]int{"code.exec": 3}[c] },
		OnDrain: func(c string) {
			mu.Lock()
			defer mu.Unlock()
			drained = append(drained, c)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	drainedNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(drained)
	}
	dispatch := func(n int) []port.TaskDispatch {
		ds := make([]port.TaskDispatch, n)
		for i := range ds {
			ds[i] = task("echo", nil)
			ds[i].Term = 1
		}
		if errs := r.Dispatch(t.Context(), ds); errs != nil {
			t.Fatalf("dispatch: %v", errs)
		}
		return ds
	}
	finish := func(ds ...port.TaskDispatch) {
		t.Helper()
		waitUntil(t, "a session with a", func() bool { return dir.link("a") != nil })
		rs := make([]SeqResult, len(ds))
		for i, d := range ds {
			rs[i] = SeqResult{Seq: uint64(i + 1), TaskResult: port.TaskResult{AttemptKey: d.AttemptKey, OK: true}}
		}
		if err := dir.link("a").up.Results(rs); err != nil {
			t.Fatal(err)
		}
	}
	wantInFlight := func(want int) {
		t.Helper()
		r.mu.Lock()
		got := r.bl.inflight["code.exec"]
		r.mu.Unlock()
		if got != want {
			t.Fatalf("in flight: %d, want %d", got, want)
		}
	}

	ds := dispatch(5)
	r.Dispatch(t.Context(), ds[:1]) // a duplicate is not counted again
	wantInFlight(5)
	if r.Saturated("code.exec") {
		t.Fatal("saturated at 5 in flight; the limit is 2 per slot × 3 slots = 6")
	}
	ds = append(ds, dispatch(1)...)
	if !r.Saturated("code.exec") {
		t.Fatal("not saturated at 6 in flight")
	}
	if r.Saturated("other") {
		t.Fatal("a capability with nothing in flight is saturated")
	}
	finish(ds[0], ds[1])
	wantInFlight(4)
	if got := drainedNow(); len(got) != 0 {
		t.Fatalf("reported drained at 4 in flight (half the limit is 3): %v", got)
	}
	if err := r.Cancel(t.Context(), 1, []port.AttemptKey{ds[2].AttemptKey}); err != nil {
		t.Fatal(err)
	}
	wantInFlight(3)
	if got := drainedNow(); !slices.Equal(got, []string{"code.exec"}) {
		t.Fatalf("drained reports %v, want one for code.exec", got)
	}
	finish(ds[3])
	if got := drainedNow(); len(got) != 1 {
		t.Fatalf("drained reported again though Saturated was not asked since: %v", got)
	}

	// Saturated again; then no result for BacklogStall: not saturated.
	ds = append(ds[4:], dispatch(4)...)
	wantInFlight(6)
	if !r.Saturated("code.exec") {
		t.Fatal("not saturated at 6 in flight")
	}
	clk.Advance(DefaultBacklogStall)
	if r.Saturated("code.exec") {
		t.Fatalf("saturated though no result came for %v", DefaultBacklogStall)
	}
	finish(ds...)
	wantInFlight(0)
	if got := drainedNow(); len(got) != 2 {
		t.Fatalf("drained reports %v, want a second one once the backlog emptied", got)
	}
}

// An engine that owns a part of the mesh's partitions saturates a
// capability at its share of the mesh-wide limit: the engines dispatch to
// the same workers, so their backlogs add up.
func TestRouterBacklogIsShared(t *testing.T) {
	for _, tc := range []struct {
		count, owned, limit int
	}{{0, 0, 12}, {1, 1, 12}, {4, 2, 6}, {16, 5, 3}, {16, 1, 1}} {
		parts := map[int]uint64{}
		for p := range tc.owned {
			parts[p] = 1
		}
		r, err := NewRouter(RouterConfig{Term: 1, Sink: newSink(), Directory: newFakeDir(), Clock: clocktest.New(),
			MinBacklog: 4, BacklogPerSlot: 2, Slots: func(string) int { return 6 }, PartitionCount: tc.count, Partitions: parts})
		if err != nil {
			t.Fatal(err)
		}
		saturatedAt := 0
		for n := 1; n <= 20 && saturatedAt == 0; n++ {
			r.mu.Lock()
			r.bl.inflight["code.exec"] = n
			r.bl.done["code.exec"]++ // results keep coming
			r.mu.Unlock()
			if r.Saturated("code.exec") {
				saturatedAt = n
			}
		}
		if saturatedAt != tc.limit {
			t.Errorf("%d of %d partitions: saturated at %d in flight, want %d", tc.owned, tc.count, saturatedAt, tc.limit)
		}
	}
}
