package engine_test

import (
	"errors"
	"testing"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// owning makes an engine the owner of partitions at epoch in a mesh of
// count partitions.
func owning(count int, epoch uint64, ps ...int) func(*engine.Config) {
	return func(c *engine.Config) {
		c.PartitionCount = count
		c.Partitions = map[int]uint64{}
		for _, p := range ps {
			c.Partitions[p] = epoch
		}
	}
}

// A new owner's fence makes the store refuse the earlier owner's writes at
// once, though its leases are live and its term is the same: the epoch
// check, not the term and not the lease, is what keeps the earlier owner
// from recording anything more.
func TestAPartitionsNewOwnerFencesTheEarlierOne(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		a := h.start(1, owning(4, 1, 0, 1, 2, 3))
		id := h.submit(a, pairSpec, nil)
		ds := h.disp.take(t, 2)

		b := h.start(1, owning(4, 2, port.PartitionOf(id, 4))) // same term, newer epoch
		redo := h.disp.take(t, 2)                              // b claimed it at once and dispatches again
		for _, d := range redo {
			if d.InstanceID != id {
				t.Fatalf("the new owner dispatched %s, want %s", d.InstanceID, id)
			}
		}
		echo(a, ds[0]) // the earlier owner's write is refused: it evicts the instance
		waitUntil(t, "the earlier owner's eviction", func() bool { return a.Stats().Evictions == 1 && a.Stats().Held == 0 })
		if hist := h.history(id); len(hist) != 0 {
			t.Fatalf("the fenced owner recorded %d results", len(hist))
		}
		for _, d := range redo {
			echo(b, d)
		}
		d := h.disp.take(t, 1)[0]
		echo(b, d)
		v := h.wait(b, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"sum":3}` {
			t.Fatalf("the instance ended %s with %v", v.State, v.Outputs)
		}
		if n := len(h.history(id)); n != 3 {
			t.Fatalf("%d results recorded, want 3 (one per task)", n)
		}
	})
}

// Each owner mints its submissions' ids in its own partitions and claims
// only those.
func TestPartitionsScopeSubmissionsAndClaims(t *testing.T) {
	h := newHarness(t)
	a := h.start(1, owning(4, 1, 0, 2))
	b := h.start(1, owning(4, 1, 1, 3))
	owner := map[int]*engine.Engine{0: a, 2: a, 1: b, 3: b}
	seen := map[int]bool{}
	for i := range 8 {
		e := a
		if i%2 == 1 {
			e = b
		}
		id := h.submit(e, pairSpec, nil)
		p := port.PartitionOf(id, 4)
		seen[p] = true
		if owner[p] != e {
			t.Fatalf("submission %d through one owner landed in partition %d of the other", i, p)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("submissions went to partitions %v, want every owned one in turn", seen)
	}
	for _, d := range h.disp.take(t, 16) {
		e := owner[port.PartitionOf(d.InstanceID, 4)]
		echo(e, d)
	}
	for _, d := range h.disp.take(t, 8) {
		echo(owner[port.PartitionOf(d.InstanceID, 4)], d)
	}
	waitUntil(t, "every instance finished", func() bool { return a.Stats().Held == 0 && b.Stats().Held == 0 })
	if a.Stats().Evictions+b.Stats().Evictions != 0 {
		t.Fatalf("an owner lost an instance of its own partition")
	}
}

// An engine whose epoch is not above the stored one does not start.
func TestAStaleEpochDoesNotStart(t *testing.T) {
	h := newHarness(t)
	h.start(5, owning(2, 3, 0, 1))
	e := h.newEngine(6, owning(2, 3, 1))
	if err := e.Start(ctxOf(t)); !errors.Is(err, port.ErrStaleEpoch) {
		t.Fatalf("Start with an epoch another owner holds = %v, want ErrStaleEpoch", err)
	}
}
