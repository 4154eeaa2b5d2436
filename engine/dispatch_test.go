package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// twoCapSpec spreads over inputs.xs on capability test.cap, and runs one
// task on other.cap.
const twoCapSpec = `
name: spread
version: 1
inputs:
  xs: {type: list}
tasks:
  s:
    spread: ${{ inputs.xs }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}"}
  o:
    capability: other.cap
    action: echo
    with: {o: 1}
`

// Acceptance is per attempt: the refused attempts of a batch are retried,
// the accepted ones are not sent again, and those refused for a stale term
// are dropped.
func TestDispatchAcceptedPerAttempt(t *testing.T) {
	h := newHarness(t)
	var refusals atomic.Int32
	h.disp.refuse = func(d port.TaskDispatch) error {
		switch {
		case d.ExecutionID == "s[1]" && refusals.Add(1) <= 2:
			return errors.New("worker node unreachable")
		case d.ExecutionID == "s[2]":
			return fmt.Errorf("%w: term 9 leads", port.ErrStaleTerm)
		}
		return nil
	}
	e := h.start(1)
	h.submit(e, twoCapSpec, map[string]any{"xs": []any{int64(0), int64(1), int64(2)}})
	got := h.disp.take(t, 2) // o and s[0] at once
	if got[0].ExecutionID != "o" || got[1].ExecutionID != "s[0]" || got[1].Term != 1 {
		t.Fatalf("first accepted: %+v", got)
	}
	h.clock.AdvanceToTimer(t, time.Second) // the first backoff
	h.clock.AdvanceToTimer(t, time.Second) // the second
	if d := h.disp.one(t, "s[1]", 1); d.Term != 1 {
		t.Fatalf("term %d", d.Term)
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d more dispatches: accepted or stale attempts were sent again", n)
	}
	h.disp.mu.Lock()
	defer h.disp.mu.Unlock()
	for _, d := range h.disp.dispatched {
		if d.ExecutionID == "s[2]" {
			t.Fatalf("an attempt refused for a stale term was retried")
		}
	}
}

// laneSpec has a task on test.cap and a chain of two on other.cap.
const laneSpec = `
name: lanes
version: 1
tasks:
  s: {capability: test.cap, action: echo, with: {s: 1}}
  o: {capability: other.cap, action: echo, with: {o: 1}}
  p: {needs: [o], capability: other.cap, action: echo, with: {p: 1}}
`

// Each capability has its own lane: while test.cap's dispatch is retried,
// other.cap's later dispatches still go out.
func TestDispatchLanePerCapability(t *testing.T) {
	h := newHarness(t)
	refused := 0
	h.disp.refuse = func(d port.TaskDispatch) error {
		if d.Capability == "test.cap" {
			refused++ // under h.disp.mu
			return errors.New("no Waggler reachable for test.cap")
		}
		return nil
	}
	e := h.start(1)
	id := h.submit(e, laneSpec, nil)
	echo(e, h.disp.one(t, "o", 1))
	h.disp.wait(t, "a refused test.cap dispatch", func() bool { return refused > 0 })
	echo(e, h.disp.one(t, "p", 1)) // produced after s was refused, sent while it waits
	h.disp.mu.Lock()
	h.disp.refuse = nil
	h.disp.mu.Unlock()
	h.clock.AdvanceToTimer(t, time.Second)
	echo(e, h.disp.one(t, "s", 1))
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("ended %s", v.State)
	}
}

// An attempt the Waggler layer reports lost is dispatched again, the same
// attempt, up to MaxLost times; then it counts as a failed attempt.
func TestLostAttempts(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	d := h.disp.one(t, "a", 1)
	e.TaskResult(ctxOf(t), port.TaskResult{AttemptKey: d.AttemptKey, Lost: true, Error: "waggler gone"})
	again := h.disp.one(t, "a", 1)
	if again.AttemptKey != d.AttemptKey || fmt.Sprint(again.Input) != fmt.Sprint(d.Input) {
		t.Fatalf("dispatched again as %+v, want the same attempt and input as %+v", again, d)
	}
	echo(e, again)
	echo(e, h.disp.one(t, "b", 1))
	c := h.disp.one(t, "c", 1)
	for range engine.MaxLost {
		e.TaskResult(ctxOf(t), port.TaskResult{AttemptKey: c.AttemptKey, Lost: true, Error: "no worker"})
		h.disp.one(t, "c", 1)
	}
	e.TaskResult(ctxOf(t), port.TaskResult{AttemptKey: c.AttemptKey, Lost: true, Error: "no worker"})
	v := h.wait(e, id)
	if v.State != port.StateFailed || !strings.Contains(v.Error, "lost 11 times by the Waggler layer (last: no worker)") {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
}
