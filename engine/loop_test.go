package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// pollSpec loops poll until its output says done, at most 50 times
// (every: is filled in); after needs poll and reads its last output.
const pollSpec = `
name: poll
version: 1
tasks:
  poll:
    capability: test.cap
    action: echo
    with: {n: "${{ iteration }}", prev: "${{ previous }}"}
    loop:
      until: ${{ output.state == "done" }}
      max: 50
      every: %s
  after:
    needs: poll
    capability: test.cap
    action: echo
    with: {last: "${{ tasks.poll.output[size(tasks.poll.output) - 1] }}", n: "${{ size(tasks.poll.output) }}"}
outputs:
  all: ${{ tasks.poll.output }}
  after: ${{ tasks.after.output }}
`

func pollWorkflow(every string) string { return fmt.Sprintf(pollSpec, every) }

func state(s string) map[string]any { return map[string]any{"state": s} }

// A loop runs its iterations one by one, each its own execution ("poll#i")
// with iteration and previous bound, until its until holds; its dependent
// runs once, after the loop, with the list of outputs.
func TestLoopRunsUntil(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, pollWorkflow("0s"), nil)
		d := h.disp.one(t, "poll#0", 1)
		if got := jsonOf(t, d.Input); got != `{"n":0,"prev":null}` {
			t.Fatalf("poll#0 got %s", got)
		}
		answer(e, d, state("queued"))
		d = h.disp.one(t, "poll#1", 1)
		if got := jsonOf(t, d.Input); got != `{"n":1,"prev":{"state":"queued"}}` {
			t.Fatalf("poll#1 got %s", got)
		}
		h.waitResults(id, 1)
		v, err := e.GetInstance(ctxOf(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if tv := task(t, v, "poll"); tv.Status != graph.TaskRunning || !tv.IsLoop || tv.Iterations != 2 || len(tv.Attempts) != 2 ||
			tv.Attempts[1].Index != 1 || !tv.Attempts[1].Running {
			t.Fatalf("poll while it loops: %+v", tv)
		}
		answer(e, d, state("running"))
		answer(e, h.disp.one(t, "poll#2", 1), state("done"))
		after := h.disp.one(t, "after", 1)
		if got := jsonOf(t, after.Input); got != `{"last":{"state":"done"},"n":3}` {
			t.Fatalf("after got %s", got)
		}
		echo(e, after)
		v = h.wait(e, id)
		if got := jsonOf(t, v.Outputs["all"]); got != `[{"state":"queued"},{"state":"running"},{"state":"done"}]` {
			t.Fatalf("outputs %s", got)
		}
		tv := task(t, v, "poll")
		if tv.Status != graph.TaskCompleted || tv.Iterations != 3 || len(tv.Attempts) != 3 {
			t.Fatalf("poll: %+v", tv)
		}
		var execs []string
		for _, r := range h.history(id) {
			execs = append(execs, r.ExecutionID)
		}
		if got := strings.Join(execs, ","); got != "poll#0,poll#1,poll#2,after" {
			t.Fatalf("recorded %s", got)
		}
	})
}

// A loop that reaches max without until true fails the task, and the
// workflow under the default policy.
func TestLoopMaxFailsTheTask(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, strings.Replace(pollWorkflow("0s"), "max: 50", "max: 2", 1), nil)
	answer(e, h.disp.one(t, "poll#0", 1), state("running"))
	answer(e, h.disp.one(t, "poll#1", 1), state("running"))
	v := h.wait(e, id)
	if v.State != port.StateFailed || !strings.Contains(v.Error, `loop: until ${{ output.state == "done" }} was still false after 2 iterations, loop.max 2`) {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
	if h.disp.pending() != 0 {
		t.Fatalf("%d dispatches after the loop failed", h.disp.pending())
	}
}

// A loop over a list runs one iteration per element, in order, with item
// bound; an iteration that fails is retried on its own.
func TestLoopOverAList(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, `
name: each
version: 1
tasks:
  list: {capability: test.cap, action: echo, with: [a, b, c]}
  each:
    needs: list
    loop: {over: "${{ tasks.list.output }}"}
    retry: {max_attempts: 2, backoff: {initial: 1s}}
    capability: test.cap
    action: echo
    with: {item: "${{ item }}", i: "${{ iteration }}"}
outputs:
  each: ${{ tasks.each.output }}
`, nil)
		echo(e, h.disp.one(t, "list", 1))
		echo(e, h.disp.one(t, "each#0", 1))
		failWith(e, h.disp.one(t, "each#1", 1), "boom")
		h.clock.AdvanceToTimer(t, 5*time.Second)
		echo(e, h.disp.one(t, "each#1", 2))
		echo(e, h.disp.one(t, "each#2", 1))
		v := h.wait(e, id)
		if got := jsonOf(t, v.Outputs); got != `{"each":[{"i":0,"item":"a"},{"i":1,"item":"b"},{"i":2,"item":"c"}]}` {
			t.Fatalf("outputs %s", got)
		}
		if tv := task(t, v, "each"); len(tv.Attempts) != 4 || tv.Attempts[1].OK || tv.Attempts[1].Error != "boom" {
			t.Fatalf("each: %+v", tv)
		}
	})
}

// loop.every pauses on the engine's clock between iterations, with no
// attempt in flight.
func TestLoopEveryUsesTheClock(t *testing.T) {
	onEachStore(t, testLoopEvery)
}

func testLoopEvery(t *testing.T, h *harness) {
	e := h.start(1)
	id := h.submit(e, pollWorkflow("10s"), nil)
	answer(e, h.disp.one(t, "poll#0", 1), state("queued"))
	if d := h.clock.WaitTimer(t, time.Minute); d != 10*time.Second {
		t.Fatalf("the next iteration is due in %s, want 10s", d)
	}
	if h.disp.pending() != 0 {
		t.Fatal("the next iteration was dispatched before its pause ended")
	}
	h.clock.Advance(10 * time.Second)
	answer(e, h.disp.one(t, "poll#1", 1), state("done"))
	echo(e, h.disp.one(t, "after", 1))
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("ended %s: %s", v.State, v.Error)
	}
}

// TestLoopResumesAfterLeaderKill drops the engine mid-loop (no flush, no
// release) and lets a second engine, of a newer term, take the instance
// over: it resumes at the iteration the loop was in — re-dispatching the
// one in flight, or waiting out the pause before the next — and never
// dispatches a recorded iteration again. With 40 iterations done the
// second engine restores a snapshot and replays the results after it.
func TestLoopResumesAfterLeaderKill(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, tc := range []struct {
				every string
				done  int
			}{{"0s", 2}, {"0s", 40}, {"10s", 3}} {
				h := newHarnessOn(t, st.open(t))
				first := h.start(1)
				id := h.submit(first, pollWorkflow(tc.every), nil)
				for i := range tc.done {
					if i > 0 && tc.every != "0s" {
						h.clock.AdvanceToTimer(t, time.Minute)
					}
					answer(first, h.disp.one(t, fmt.Sprintf("poll#%d", i), 1), state("running"))
				}
				h.waitResults(id, tc.done)
				if tc.every == "0s" {
					h.disp.one(t, fmt.Sprintf("poll#%d", tc.done), 1) // in flight when the leader dies
				}
				if tc.done >= 32 {
					h.store.mu.Lock()
					snapped := h.store.stateBytes > 0
					h.store.mu.Unlock()
					if !snapped {
						t.Fatalf("no snapshot after %d iterations", tc.done)
					}
				}
				first.Abandon()
				h.disp.mu.Lock()
				h.disp.next = len(h.disp.dispatched) // forget what the first engine dispatched
				h.disp.mu.Unlock()

				second := h.start(2)
				if tc.every != "0s" {
					// Pausing before iteration 3: nothing runs until the pause ends.
					if d := h.clock.WaitTimer(t, time.Minute); d != 10*time.Second {
						t.Fatalf("%+v: the next iteration is due in %s, want 10s", tc, d)
					}
					if h.disp.pending() != 0 {
						t.Fatalf("%+v: dispatched during the pause", tc)
					}
					h.clock.Advance(10 * time.Second)
				}
				next := h.disp.one(t, fmt.Sprintf("poll#%d", tc.done), 1)
				if tc.every == "0s" && !next.Resumed {
					t.Fatalf("%+v: the iteration in flight is not marked resumed", tc)
				}
				if got, want := jsonOf(t, next.Input), fmt.Sprintf(`{"n":%d,"prev":{"state":"running"}}`, tc.done); got != want {
					t.Fatalf("%+v: %s got %s, want %s", tc, next.ExecutionID, got, want)
				}
				answer(second, next, state("done"))
				echo(second, h.disp.one(t, "after", 1))
				v := h.wait(second, id)
				if n := len(v.Outputs["all"].([]any)); v.State != port.StateComplete || n != tc.done+1 {
					t.Fatalf("%+v: ended %s with %d iterations: %s", tc, v.State, n, v.Error)
				}
				seen := map[string]int{}
				for _, r := range h.history(id) {
					seen[r.ExecutionID]++
				}
				for i := range tc.done + 1 {
					if n := seen[fmt.Sprintf("poll#%d", i)]; n != 1 {
						t.Fatalf("%+v: poll#%d recorded %d times", tc, i, n)
					}
				}
				if h.disp.pending() != 0 {
					t.Fatalf("%+v: %d more dispatches", tc, h.disp.pending())
				}
			}
		})
	}
}

// accept judges each iteration's attempts: a rejected one is a failed
// attempt of its iteration, retried on its own; the loop goes on from the
// accepted output.
func TestLoopAcceptPerIteration(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: judged
version: 1
tasks:
  poll:
    capability: test.cap
    action: echo
    with: {n: "${{ iteration }}"}
    accept: ${{ output.state != "bad" }}
    retry: {max_attempts: 2, backoff: {initial: 1s}}
    loop: {until: '${{ output.state == "done" }}', max: 5}
outputs:
  all: ${{ tasks.poll.output }}
`, nil)
	answer(e, h.disp.one(t, "poll#0", 1), state("running"))
	answer(e, h.disp.one(t, "poll#1", 1), state("bad"))
	h.clock.AdvanceToTimer(t, 5*time.Second)
	answer(e, h.disp.one(t, "poll#1", 2), state("done"))
	v := h.wait(e, id)
	if got := jsonOf(t, v.Outputs); v.State != port.StateComplete || got != `{"all":[{"state":"running"},{"state":"done"}]}` {
		t.Fatalf("ended %s with %s: %s", v.State, got, v.Error)
	}
	hist := h.history(id)
	if len(hist) != 3 || hist[1].ExecutionID != "poll#1" || hist[1].OK || hist[1].Error != `not accepted: ${{ output.state != "bad" }}` {
		t.Fatalf("history: %+v", hist)
	}
}
