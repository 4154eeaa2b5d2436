package engine_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// states reads an instance's state as every reader sees it: the engine's
// get and list, and the Store's record as another node's list would.
func (h *harness) states(e *engine.Engine, id uuid.UUID) (get, list, stored port.InstanceState) {
	h.t.Helper()
	v, err := e.GetInstance(ctxOf(h.t), id)
	if err != nil {
		h.t.Fatalf("GetInstance: %v", err)
	}
	page, err := e.ListInstances(ctxOf(h.t), engine.ListRequest{})
	if err != nil {
		h.t.Fatalf("ListInstances: %v", err)
	}
	for _, s := range page.Instances {
		if s.ID == id {
			list = s.State
		}
	}
	rec, err := h.store.GetInstance(ctxOf(h.t), id)
	if err != nil {
		h.t.Fatalf("store GetInstance: %v", err)
	}
	stored = port.StateRunning
	if rec.Gathering {
		stored = port.StateGathering
	}
	return v.State, list, stored
}

// GATHERING is shown once the Store has it, by the engine's gets and lists
// alike, and an engine that takes the instance over shows it at once: no
// reader, on the owner, on another node (the Store) or after a restart,
// sees the instance go back to RUNNING.
func TestGatheringIsShownOnceDurable(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.FlushInterval = time.Minute }) // the fake clock decides
		id := h.submit(e, pairSpec, nil)
		for _, d := range h.disp.take(t, 2) {
			echo(e, d)
		}
		h.disp.take(t, 1) // c: every task dispatched, the graph gathers
		if get, list, stored := h.states(e, id); get != port.StateRunning || list != port.StateRunning || stored != port.StateRunning {
			t.Fatalf("before the flush: get %s, list %s, store %s; want RUNNING everywhere", get, list, stored)
		}
		h.clock.AdvanceToTimer(t, time.Minute)
		waitUntil(t, "the gathering mark to be durable", func() bool {
			get, list, stored := h.states(e, id)
			return get == port.StateGathering && list == port.StateGathering && stored == port.StateGathering
		})

		e.Abandon()
		h.disp.mu.Lock()
		h.disp.next = len(h.disp.dispatched)
		h.disp.mu.Unlock()
		e2 := h.start(2)
		d := h.disp.take(t, 1)[0] // c again, from the new owner
		if get, list, _ := h.states(e2, id); get != port.StateGathering || list != port.StateGathering {
			t.Fatalf("the new owner shows get %s, list %s; want GATHERING as before", get, list)
		}
		echo(e2, d)
		if v := h.wait(e2, id); v.State != port.StateComplete {
			t.Fatalf("the instance ended %s", v.State)
		}
	})
}
