package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// fakeAdmission saturates the capabilities a test says.
type fakeAdmission struct {
	mu  sync.Mutex
	sat map[string]bool
}

func (a *fakeAdmission) Saturated(c string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sat[c]
}

func (a *fakeAdmission) set(c string, saturated bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sat[c] = saturated
}

const (
	// coreFirst starts with a task of "core", then one of "gpu".
	coreFirst = `
name: core-first
version: 1
tasks:
  a: {capability: core, action: echo, with: {v: 1}}
  b: {capability: gpu, action: echo, needs: [a], with: {v: 2}}
`
	gpuOnly = `
name: gpu-only
version: 1
tasks:
  g: {capability: gpu, action: echo, with: {v: 3}}
`
)

// An instance whose first tasks need only saturated capabilities waits
// unstarted — nothing dispatched — while one that starts elsewhere runs at
// once; a cancel does not wait for capacity; the waiting ones start when
// told capacity is free, or at the next ClaimInterval without being told;
// and a graceful stop releases their leases, so the next engine runs them.
func TestAdmissionHoldsBackInstancesOfSaturatedCapabilities(t *testing.T) {
	h := newHarness(t)
	adm := &fakeAdmission{sat: map[string]bool{"core": true}}
	e := h.start(1, func(c *engine.Config) { c.Admission = adm })
	heldBack := func(n int) {
		t.Helper()
		waitUntil(t, "instances held back", func() bool { return e.Stats().HeldBack == n })
	}

	a1 := h.submit(e, coreFirst, nil)
	a2 := h.submit(e, coreFirst, nil)
	a3 := h.submit(e, coreFirst, nil)
	g := h.submit(e, gpuOnly, nil)
	heldBack(3)
	if d := h.disp.take(t, 1)[0]; d.InstanceID != g {
		t.Fatalf("dispatched %s of %s first; want the gpu instance %s, not held behind core's backlog", d.ExecutionID, d.InstanceID, g)
	}
	v, err := e.GetInstance(ctxOf(t), a1)
	if err != nil {
		t.Fatalf("GetInstance of an instance held back: %v", err)
	}
	if ta := task(t, v, "a"); v.State != port.StateRunning || len(ta.Attempts) != 0 || ta.Progress == nil ||
		!strings.Contains(ta.Progress.Message, "capability core has a full backlog") {
		t.Fatalf("an instance held back shows %s, its first task with attempts %+v and progress %+v", v.State, ta.Attempts, ta.Progress)
	}

	// A watcher's first snapshot says the same.
	ctx, cancel := context.WithCancel(ctxOf(t))
	var first engine.Event
	err = e.WatchInstance(ctx, a1, 0, func(ev engine.Event) error {
		first = ev
		cancel()
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchInstance: %v", err)
	}
	if first.Kind != engine.EventSnapshot || first.Instance == nil || len(task(t, *first.Instance, "a").Attempts) != 0 {
		t.Fatalf("a watcher of an instance held back first got %+v", first)
	}

	if err := e.CancelInstance(ctxOf(t), a2); err != nil {
		t.Fatal(err)
	}
	if v := h.wait(e, a2); v.State != port.StateCancelled {
		t.Fatalf("the cancelled instance ended %s", v.State)
	}
	heldBack(2)
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d dispatches while core is saturated", n)
	}

	adm.set("core", false)
	e.CapacityFreed("core")
	ds := h.disp.take(t, 2)
	got := []uuid.UUID{ds[0].InstanceID, ds[1].InstanceID}
	if !slices.Contains(got, a1) || !slices.Contains(got, a3) {
		t.Fatalf("dispatched for %v, want %s and %s", got, a1, a3)
	}
	heldBack(0)
	for _, d := range ds {
		echo(e, d)
	}
	for range 2 {
		echo(e, h.disp.take(t, 1)[0]) // their gpu tasks
	}
	for _, id := range []uuid.UUID{a1, a3} {
		if v := h.wait(e, id); v.State != port.StateComplete {
			t.Fatalf("%s ended %s", id, v.State)
		}
	}

	// Not told: the next ClaimInterval looks again.
	adm.set("core", true)
	a4 := h.submit(e, coreFirst, nil)
	heldBack(1)
	adm.set("core", false)
	h.clock.Advance(time.Hour) // the harness's ClaimInterval
	if d := h.disp.take(t, 1)[0]; d.InstanceID != a4 {
		t.Fatalf("dispatched for %s, want %s", d.InstanceID, a4)
	}

	// Stopped while one waits: the next engine claims it at once.
	adm.set("core", true)
	a5 := h.submit(e, coreFirst, nil)
	heldBack(1)
	if err := e.Stop(ctxOf(t)); err != nil {
		t.Fatal(err)
	}
	e2 := h.start(2)
	// g's and a4's attempts, cancelled by the stop, again; a5's first.
	ds = h.disp.take(t, 3)
	if got := []uuid.UUID{ds[0].InstanceID, ds[1].InstanceID, ds[2].InstanceID}; !slices.Contains(got, a5) {
		t.Fatalf("the next engine dispatched for %v, not for %s, held back at the stop", got, a5)
	}
	if s := e2.Stats(); s.HeldBack != 0 {
		t.Fatalf("an engine without admission holds back %d", s.HeldBack)
	}
}

// An instance held back whose lease a newer term took over is dropped
// like an evicted one: the newer engine runs it, this one forgets it.
func TestAdmissionDropsAnInstanceHeldBackWhoseLeaseIsLost(t *testing.T) {
	h := newHarness(t)
	adm := &fakeAdmission{sat: map[string]bool{"core": true}}
	e1 := h.start(1, func(c *engine.Config) { c.Admission = adm })
	id := h.submit(e1, coreFirst, nil)
	waitUntil(t, "the instance held back", func() bool { return e1.Stats().HeldBack == 1 })

	h.start(2) // a newer term claims it at once
	if d := h.disp.take(t, 1)[0]; d.InstanceID != id {
		t.Fatalf("the newer engine dispatched for %s, want %s", d.InstanceID, id)
	}
	h.clock.Advance(10 * time.Minute) // the harness's LeaseRefresh
	waitUntil(t, "the old engine to drop it", func() bool {
		s := e1.Stats()
		return s.HeldBack == 0 && s.Held == 0 && s.Evictions == 1
	})
	adm.set("core", false)
	e1.CapacityFreed("core")
	h.clock.Advance(time.Hour)
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("the old engine dispatched %d attempts of an instance it lost", n)
	}
}
