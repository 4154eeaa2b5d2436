package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

const pairSpec = `
name: pair
version: 1
tasks:
  a: {capability: test.cap, action: echo, with: {v: 1}}
  b: {capability: test.cap, action: echo, with: {v: 2}}
  c:
    needs: [a, b]
    capability: test.cap
    action: echo
    with: {sum: "${{ tasks.a.output.v + tasks.b.output.v }}"}
outputs:
  sum: ${{ tasks.c.output.sum }}
`

// takeOver claims every due instance for a new owner under term, as a
// newer leader would. Like a leader's claimer it claims again while it
// gets nothing: Postgres skips a row the current owner is writing at that
// moment (FOR UPDATE SKIP LOCKED).
func (h *harness) takeOver(term uint64) []port.ClaimedInstance {
	h.t.Helper()
	owner := uuid.New()
	var claimed []port.ClaimedInstance
	waitUntil(h.t, "a claim of the newer term", func() bool {
		var err error
		claimed, err = h.store.ClaimInstances(ctxOf(h.t), port.ClaimRequest{Owner: owner, Term: term, Lease: time.Hour, Limit: 100})
		if err != nil {
			h.t.Fatalf("ClaimInstances: %v", err)
		}
		return len(claimed) > 0
	})
	return claimed
}

func TestOwnershipLostOnWrite(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, pairSpec, nil)
		ds := h.disp.take(t, 2)
		if got := h.takeOver(2); len(got) != 1 || got[0].ID != id {
			t.Fatalf("the newer term claimed %d instances", len(got))
		}
		// The next write for the instance is refused: it is evicted and
		// its other attempt cancelled.
		echo(e, ds[0])
		h.disp.waitCancelled(t, ds[1].AttemptKey)
		waitUntil(t, "the eviction", func() bool { return e.Stats().Evictions == 1 && e.Stats().Held == 0 })
		// Its results are ignored from now on, and nothing more is
		// dispatched for it. (ds[0]'s result may have been ignored
		// already: on a loaded machine a write still pending from
		// the dispatch can be the one refused, evicting the instance
		// before ds[0]'s result arrives.)
		before := e.Stats().ResultsIgnored
		echo(e, ds[1])
		waitUntil(t, "the result to be ignored", func() bool { return e.Stats().ResultsIgnored == before+1 })
		if n := h.disp.pending(); n != 0 {
			t.Fatalf("%d dispatches after the eviction", n)
		}
		if hist := h.history(id); len(hist) != 0 {
			t.Fatalf("a deposed owner recorded %d results", len(hist))
		}
	})
}

func TestOwnershipLostOnRefresh(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, pairSpec, nil)
	ds := h.disp.take(t, 2)
	h.takeOver(2)
	h.clock.Advance(10 * time.Minute) // the lease heartbeat
	h.disp.waitCancelled(t, ds[0].AttemptKey, ds[1].AttemptKey)
	waitUntil(t, "the eviction", func() bool { return e.Stats().Evictions == 1 && e.Stats().Held == 0 })
	if v, err := e.GetInstance(ctxOf(t), id); err != nil || v.State != port.StateRunning {
		t.Fatalf("view from the store: %s, %v", v.State, err)
	}
}

func TestCancelRequestAppliedOnRefresh(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, pairSpec, nil)
	ds := h.disp.take(t, 2)
	// Another node records the request in the store; the owner learns it
	// at its next heartbeat.
	if err := h.store.RequestCancel(ctxOf(t), id); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Minute)
	h.disp.waitCancelled(t, ds[0].AttemptKey, ds[1].AttemptKey)
	if v := h.wait(e, id); v.State != port.StateCancelled {
		t.Fatalf("ended %s", v.State)
	}
}

func TestStopReleasesForTheNextEngine(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		id := h.submit(first, chainSpec, map[string]any{"x": 1})
		echo(first, h.disp.one(t, "a", 1))
		b := h.disp.one(t, "b", 1)
		if err := first.Stop(ctxOf(t)); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if !slices.Contains(h.disp.cancelledKeys(), b.AttemptKey) {
			t.Fatalf("Stop did not cancel the attempt in flight")
		}
		// The lease was released: a second engine claims it at once,
		// without running a again.
		// b, in flight under the first engine, is dispatched again marked
		// as such (a worker may run it already); c is new.
		second := h.start(2)
		again := h.disp.one(t, "b", 1)
		echo(second, again)
		c := h.disp.one(t, "c", 1)
		echo(second, c)
		if !again.Resumed || c.Resumed {
			t.Fatalf("resumed: b %v, c %v; want b only", again.Resumed, c.Resumed)
		}
		v := h.wait(second, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"result":5}` {
			t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
		}
		var got []string
		for _, r := range h.history(id) {
			got = append(got, fmt.Sprintf("%s#%d", r.ExecutionID, r.Attempt))
		}
		if strings.Join(got, " ") != "a#1 b#1 c#1" {
			t.Fatalf("history %v, want each task once", got)
		}
	})
}

// TestReleaseHandsOverWithoutCancelling: Release writes what the engine
// recorded and releases the leases, as Stop does, but cancels nothing: the
// attempt in flight runs on, and the next owner claims the instance at
// once and takes that attempt over (dispatched again as resumed, a worker
// running it already), its result recorded once.
func TestReleaseHandsOverWithoutCancelling(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		id := h.submit(first, chainSpec, map[string]any{"x": 1})
		echo(first, h.disp.one(t, "a", 1))
		b := h.disp.one(t, "b", 1)
		if err := first.Release(ctxOf(t)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if slices.Contains(h.disp.cancelledKeys(), b.AttemptKey) {
			t.Fatalf("Release cancelled the attempt in flight")
		}
		if n := len(h.history(id)); n != 1 {
			t.Fatalf("%d results recorded at the release, want a's", n)
		}
		second := h.start(1) // the same term: the released lease is taken at once
		again := h.disp.one(t, "b", 1)
		if !again.Resumed || again.AttemptKey != b.AttemptKey {
			t.Fatalf("the next owner dispatched %+v, want b's attempt 1 again, resumed", again)
		}
		echo(second, again)
		echo(second, h.disp.one(t, "c", 1))
		if v := h.wait(second, id); v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"result":5}` {
			t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
		}
		if n := len(h.history(id)); n != 3 {
			t.Fatalf("%d results recorded, want one per task", n)
		}
	})
}

// TestFirstTasksOfAnInstanceTakenOverAreResumed: an instance taken over
// before anything of it was recorded (no result, no snapshot) may still
// have had its first tasks dispatched by the engine before: they are
// dispatched again marked as resumed.
func TestFirstTasksOfAnInstanceTakenOverAreResumed(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		fresh := h.submit(first, chainSpec, map[string]any{"x": 1})
		if a := h.disp.one(t, "a", 1); a.Resumed {
			t.Fatalf("the first dispatch of a new instance is marked resumed")
		}
		if err := first.Stop(ctxOf(t)); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if rs := h.history(fresh); len(rs) != 0 {
			t.Fatalf("results recorded before the takeover: %v", rs)
		}
		second := h.start(2)
		again := h.disp.one(t, "a", 1)
		if !again.Resumed {
			t.Fatalf("a, dispatched under the first engine, is dispatched again as new")
		}
		echo(second, again)
		echo(second, h.disp.one(t, "b", 1))
		echo(second, h.disp.one(t, "c", 1))
		if v := h.wait(second, fresh); v.State != port.StateComplete {
			t.Fatalf("ended %s (%s)", v.State, v.Error)
		}
	})
}

// restartSpec fans out with retries: odd spread instances fail their first
// attempt.
const restartSpec = `
name: restart
version: 1
inputs:
  items: {type: list}
defaults:
  retry: {max_attempts: 3, backoff: {initial: 1s, factor: 2, jitter: 0.2}}
tasks:
  prepare:
    capability: test.cap
    action: echo
    with: {items: "${{ inputs.items }}"}
  work:
    needs: [prepare]
    spread: ${{ tasks.prepare.output.items }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}"}
  total:
    needs: [work]
    capability: test.cap
    action: echo
    with: {parts: "${{ tasks.work.output }}"}
outputs:
  result: ${{ tasks.total.output }}
`

// worker answers deterministically: odd spread instances fail attempt 1,
// the others return their input with the attempt that made it, and plain
// tasks echo their input.
func worker(e *engine.Engine, d port.TaskDispatch) {
	switch {
	case d.Index < 0:
		echo(e, d)
	case d.Index%2 == 1 && d.Attempt == 1:
		failWith(e, d, "flaky worker")
	default:
		answer(e, d, map[string]any{"in": d.Input, "attempt": d.Attempt})
	}
}

// runToEnd answers every dispatch with worker, advancing the clock to
// retry timers, until every instance finished. check sees each dispatch
// first.
func (h *harness) runToEnd(e *engine.Engine, ids []uuid.UUID, check func(port.TaskDispatch)) {
	h.t.Helper()
	finished := func() bool {
		for _, id := range ids {
			rec, err := h.store.GetInstance(ctxOf(h.t), id)
			if err != nil || !rec.Status.Terminal() {
				return false
			}
		}
		return true
	}
	for {
		done := false
		waitUntil(h.t, "a dispatch, a timer or the end", func() bool {
			if h.disp.pending() > 0 || h.clock.HasTimerWithin(time.Minute) {
				return true
			}
			done = finished()
			return done
		})
		if done {
			return
		}
		if n := h.disp.pending(); n > 0 {
			for _, d := range h.disp.take(h.t, n) {
				check(d)
				worker(e, d)
			}
			continue
		}
		h.clock.AdvanceToTimer(h.t, time.Minute)
	}
}

func restartInputs() []map[string]any {
	return []map[string]any{
		{"items": []any{1, 2, 3, 4}},
		{"items": []any{"x", "y", "z"}},
		{"items": []any{true}},
	}
}

// outcome is what must not depend on a restart: outputs and the recorded
// results.
func (h *harness) outcome(id uuid.UUID) (string, []string) {
	rec, err := h.store.GetInstance(ctxOf(h.t), id)
	if err != nil {
		h.t.Fatal(err)
	}
	if rec.Status != port.StateComplete {
		h.t.Fatalf("instance %s ended %s: %s", id, rec.Status, rec.Error)
	}
	var lines []string
	seen := map[string]bool{}
	for _, r := range h.history(id) {
		key := fmt.Sprintf("%s#%d", r.ExecutionID, r.Attempt)
		if seen[key] {
			h.t.Fatalf("result %s of %s recorded twice", key, id)
		}
		seen[key] = true
		lines = append(lines, fmt.Sprintf("%s ok=%v %s%s", key, r.OK, r.Output, r.Error))
	}
	slices.Sort(lines)
	return string(rec.Output), lines
}

func TestRestartAfterAbruptStop(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			// The reference: one engine, no interruption.
			ref := newHarnessOn(t, st.open(t))
			e := ref.start(1)
			var refIDs []uuid.UUID
			for _, in := range restartInputs() {
				refIDs = append(refIDs, ref.submit(e, restartSpec, in))
			}
			ref.runToEnd(e, refIDs, func(port.TaskDispatch) {})

			for _, answered := range []int{2, 5, 9} {
				t.Run(fmt.Sprintf("after%d", answered), func(t *testing.T) {
					h := newHarnessOn(t, st.open(t))
					first := h.start(1)
					var ids []uuid.UUID
					for _, in := range restartInputs() {
						ids = append(ids, h.submit(first, restartSpec, in))
					}
					// Run part of the work, then drop the engine: no flush,
					// no cancel, no release.
					for n := 0; n < answered; {
						for _, d := range h.disp.take(t, 1) {
							worker(first, d)
							n++
						}
					}
					if answered < 9 {
						// Every answer durable (the snapshots need not be):
						// the second engine must replay them all.
						waitUntil(t, "the results to be durable", func() bool {
							n := 0
							for _, id := range ids {
								n += len(h.history(id))
							}
							return n == answered
						})
					} // else: drop the engine with writes possibly pending
					first.Abandon()
					recorded := map[string]bool{}
					for _, id := range ids {
						for _, r := range h.history(id) {
							recorded[fmt.Sprintf("%s/%s#%d", id, r.ExecutionID, r.Attempt)] = true
						}
					}
					h.disp.mu.Lock()
					h.disp.next = len(h.disp.dispatched) // forget what the first engine dispatched
					h.disp.mu.Unlock()

					second := h.start(2)
					h.runToEnd(second, ids, func(d port.TaskDispatch) {
						if recorded[fmt.Sprintf("%s/%s#%d", d.InstanceID, d.ExecutionID, d.Attempt)] {
							t.Errorf("%s#%d of %s was recorded before the restart, and dispatched again", d.ExecutionID, d.Attempt, d.InstanceID)
						}
					})
					for i, id := range ids {
						out, hist := h.outcome(id)
						refOut, refHist := ref.outcome(refIDs[i])
						if out != refOut {
							t.Errorf("instance %d: output %s, want %s", i, out, refOut)
						}
						if !slices.Equal(hist, refHist) {
							t.Errorf("instance %d: history\n%s\nwant\n%s", i, strings.Join(hist, "\n"), strings.Join(refHist, "\n"))
						}
					}
				})
			}
		})
	}
}
