package engine_test

import (
	"context"
	"testing"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// submitted submits chainSpec and checks how the Store holds the instance
// when Submit returns.
func (h *harness) submitted(e *engine.Engine, want port.InstanceState) engine.SubmitResult {
	h.t.Helper()
	res, err := e.Submit(ctxOf(h.t), engine.SubmitRequest{Spec: []byte(chainSpec), SpecFile: "chain.yaml", Inputs: map[string]any{"x": 1}})
	if err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
	rec, err := h.store.GetInstance(ctxOf(h.t), res.InstanceID)
	if err != nil {
		h.t.Fatalf("GetInstance: %v", err)
	}
	if rec.Status != want {
		h.t.Fatalf("instance %s is %s in the store when Submit returns, want %s", res.InstanceID, rec.Status, want)
	}
	return res
}

// runChain answers the three tasks of the chainSpec instance in flight.
func (h *harness) runChain(e *engine.Engine) {
	h.t.Helper()
	for _, task := range []string{"a", "b", "c"} {
		echo(e, h.disp.one(h.t, task, 1))
	}
}

// TestSubmissionsStartWithoutAClaim: a running engine with room stores what
// is submitted to it already claimed and starts it at once: no claim
// transaction, on either store.
func TestSubmissionsStartWithoutAClaim(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		h.store.waitClaims(t, 1) // the claim at start, which finds nothing
		calls, _ := h.store.claims()

		for range 3 {
			res := h.submitted(e, port.StateRunning)
			h.runChain(e)
			if v := h.wait(e, res.InstanceID); v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"result":5}` {
				t.Fatalf("instance ended %s with %v (%s)", v.State, v.Outputs, v.Error)
			}
		}
		if now, claimed := h.store.claims(); now != calls || claimed != 0 {
			t.Fatalf("%d more claims took %d instances; want none: submissions start claimed", now-calls, claimed)
		}
	})
}

// TestSubmissionsQueueWhenMemoryIsFull: with no room in memory a
// submission is queued, and the claimer takes it once room frees.
func TestSubmissionsQueueWhenMemoryIsFull(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) { c.MaxInstances = 1 })
	h.store.waitClaims(t, 1)

	first := h.submitted(e, port.StateRunning)
	second := h.submitted(e, port.StatePending)
	a := h.disp.one(t, "a", 1)
	if a.InstanceID != first.InstanceID {
		t.Fatalf("dispatched a task of %s, want one of the instance in memory, %s", a.InstanceID, first.InstanceID)
	}
	echo(e, a)
	echo(e, h.disp.one(t, "b", 1))
	echo(e, h.disp.one(t, "c", 1))
	if v := h.wait(e, first.InstanceID); v.State != port.StateComplete {
		t.Fatalf("the first instance ended %s (%s)", v.State, v.Error)
	}

	h.runChain(e) // the second, claimed once the first left memory
	if v := h.wait(e, second.InstanceID); v.State != port.StateComplete {
		t.Fatalf("the queued instance ended %s (%s)", v.State, v.Error)
	}
	if _, claimed := h.store.claims(); claimed != 1 {
		t.Fatalf("claims took %d instances, want 1: the one queued while memory was full", claimed)
	}
}

// TestSubmissionToAStoppingEngine: an engine that stops while a submission
// to it is being stored claimed does not take the instance, and releases
// its lease, so the next engine — of the same term, which a live lease
// would keep out for an hour — runs it at once.
func TestSubmissionToAStoppingEngine(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	h.store.waitClaims(t, 1)
	h.store.mu.Lock()
	h.store.queueGate, h.store.queueCommitted = make(chan struct{}), make(chan struct{})
	gate := h.store.queueGate
	h.store.mu.Unlock()

	done := make(chan engine.SubmitResult, 1)
	go func() {
		res, err := e.Submit(context.Background(), engine.SubmitRequest{Spec: []byte(chainSpec), SpecFile: "chain.yaml", Inputs: map[string]any{"x": 1}})
		if err != nil {
			t.Errorf("Submit: %v", err)
		}
		done <- res
	}()
	<-h.store.queueCommitted
	if err := e.Stop(ctxOf(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	h.store.mu.Lock()
	h.store.queueGate = nil
	h.store.mu.Unlock()
	close(gate)
	res := <-done
	if rec, err := h.store.GetInstance(ctxOf(t), res.InstanceID); err != nil || rec.Status != port.StateRunning {
		t.Fatalf("after the engine stopped: %+v, %v; want the instance stored running (claimed at submission)", rec, err)
	}
	if h.disp.pending() != 0 {
		t.Fatalf("the stopped engine dispatched %d tasks", h.disp.pending())
	}

	next := h.start(1)
	h.runChain(next)
	if v := h.wait(next, res.InstanceID); v.State != port.StateComplete {
		t.Fatalf("the instance ended %s (%s) under the next engine", v.State, v.Error)
	}
}
