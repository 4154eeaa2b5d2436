package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// etaSpec runs solo then after, and a spread beside them.
const etaSpec = `
name: eta
version: 1
inputs:
  items: {type: list}
tasks:
  solo:
    capability: test.cap
    action: echo
    with: {n: 1}
  after:
    needs: [solo]
    capability: test.cap
    action: echo
    with: {n: 2}
  work:
    spread: ${{ inputs.items }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}"}
`

// The instance's ETA comes from its workers' heartbeats, on the engine
// that holds it: unknown while a task waits or gives no estimate, then the
// slowest of what runs (a spread's queued elements at the pace of its
// completed ones), counting down with the clock. A view read from the
// store has none, nor has an instance being cancelled.
func TestETAFromHeartbeats(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, etaSpec, map[string]any{"items": []any{"a", "b", "c"}})
	ds := h.disp.take(t, 4) // solo, work[0], work[1], work[2]
	solo, work := ds[0], ds[1:]
	if solo.Task != "solo" || work[0].ExecutionID != "work[0]" || work[2].ExecutionID != "work[2]" {
		t.Fatalf("dispatched %s, %s…%s", solo.ExecutionID, work[0].ExecutionID, work[2].ExecutionID)
	}
	heartbeat := func(d port.TaskDispatch, eta time.Duration) {
		e.TaskProgress(context.Background(), port.TaskProgress{AttemptKey: d.AttemptKey, WorkerID: "n1/test.cap/0",
			Seq: 1, ETA: eta, At: h.clock.Now()})
	}
	etaOf := func(what string) (time.Duration, bool) {
		t.Helper()
		v := getInstance(t, e, id)
		if v.State != port.StateRunning && v.State != port.StateGathering {
			t.Fatalf("%s: the instance is %s", what, v.State)
		}
		return v.ETA, v.ETAKnown
	}
	wantETA := func(what string, want time.Duration) {
		t.Helper()
		if got, ok := etaOf(what); !ok || got != want {
			t.Fatalf("%s: ETA %s (known: %t), want %s", what, got, ok, want)
		}
	}
	wantUnknown := func(what string) {
		t.Helper()
		if got, ok := etaOf(what); ok {
			t.Fatalf("%s: ETA %s, want unknown", what, got)
		}
	}

	wantUnknown("before any heartbeat")
	heartbeat(solo, 40*time.Second)
	heartbeat(work[1], 5*time.Second)
	wantUnknown("after waits for solo") // and work[0] and work[2] give none

	answer(e, solo, "done")
	after := h.disp.one(t, "after", 1)
	heartbeat(after, 60*time.Second)
	wantUnknown("no element of the spread completed: queued ones have no estimate")

	// work[0] took 10s: work[2], queued, counts 10s, on the one worker
	// seen (work[1]'s, 5s left): 15s; after's 60s is the slowest.
	start := h.clock.Now()
	e.TaskResult(context.Background(), port.TaskResult{AttemptKey: work[0].AttemptKey, OK: true, Output: "A",
		WorkerID: "n1/test.cap/1", StartedAt: start.Add(-10 * time.Second), FinishedAt: start})
	wantETA("after and the spread run", 60*time.Second)

	// The estimate counts down with the clock, from the heartbeats' time.
	h.clock.Advance(55 * time.Second)
	wantETA("55s later", 10*time.Second) // the spread: work[1] overdue (0), work[2] 10s
	echo(e, after)
	heartbeat(work[2], 3*time.Second)
	wantETA("after done, work[2] heard from", 3*time.Second)

	// A watch's snapshot carries it too.
	stop := errors.New("seen")
	var snap engine.Event
	if err := e.WatchInstance(ctxOf(t), id, 0, func(ev engine.Event) error {
		snap = ev
		return stop
	}); !errors.Is(err, stop) {
		t.Fatalf("WatchInstance: %v", err)
	}
	if snap.Kind != engine.EventSnapshot || !snap.Instance.ETAKnown || snap.Instance.ETA != 3*time.Second {
		t.Fatalf("the watch began with %s, its instance's ETA %s (known %t)", snap.Kind, snap.Instance.ETA, snap.Instance.ETAKnown)
	}

	// A follower reads the store: no heartbeats there.
	if fv := getInstance(t, h.storeQuery(), id); fv.ETAKnown {
		t.Fatalf("a view read from the store has ETA %s", fv.ETA)
	}

	if err := e.CancelInstance(ctxOf(t), id); err != nil {
		t.Fatalf("CancelInstance: %v", err)
	}
	if v := getInstance(t, e, id); v.ETAKnown {
		t.Fatalf("an instance being cancelled (%s) has ETA %s", v.State, v.ETA)
	}
	if v := h.wait(e, id); v.ETAKnown {
		t.Fatalf("a finished instance has ETA %s", v.ETA)
	}
}
