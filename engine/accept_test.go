package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// acceptSpec has a scored task judged by accept under a policy, and a task
// that reads its output.
func acceptSpec(policy string, attempts int) string {
	retry := ""
	if policy != "abort" {
		retry = fmt.Sprintf("\n    retry: {max_attempts: %d, backoff: {initial: 1s, factor: 1}}", attempts)
	}
	return fmt.Sprintf(`
name: accept-%s
version: 1
inputs:
  min: {type: number, default: 0.8}
tasks:
  score:
    capability: test.cap
    action: echo
    with: {}
    accept: ${{ output.score >= inputs.min }}
    on_failure: %s%s
  after:
    needs: [score]
    capability: test.cap
    action: echo
    with: {got: "${{ tasks.score.output }}"}
outputs:
  got: ${{ tasks.after.output.got }}
`, policy, policy, retry)
}

const notAccepted = "not accepted: ${{ output.score >= inputs.min }}"

// history lines "exec#attempt ok=… output|error" of an instance, in order.
func (h *harness) historyLines(id uuid.UUID) []string {
	h.t.Helper()
	var lines []string
	for _, r := range h.history(id) {
		lines = append(lines, fmt.Sprintf("%s#%d ok=%v %s%s", r.ExecutionID, r.Attempt, r.OK, r.Output, r.Error))
	}
	return lines
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// acceptedAt answers attempt of score with an accepted score and runs the
// instance to the end: complete, with score's earlier attempts rejected.
func (h *harness) acceptedAt(e *engine.Engine, id uuid.UUID, attempt uint32, score float64) {
	t := h.t
	t.Helper()
	answer(e, h.disp.one(t, "score", attempt), map[string]any{"score": score})
	echo(e, h.disp.one(t, "after", 1))
	v := h.wait(e, id)
	if want := fmt.Sprintf(`{"got":{"score":%v}}`, score); v.State != port.StateComplete || jsonOf(t, v.Outputs) != want {
		t.Fatalf("ended %s with %v (%s), want %s", v.State, v.Outputs, v.Error, want)
	}
	if tv := task(t, v, "score"); tv.Attempt != attempt || len(tv.Attempts) != int(attempt) || tv.Attempts[0].Error != notAccepted {
		t.Fatalf("score view: %+v", tv)
	}
}

// A rejected attempt is a failed one, recorded as such, and retried; the
// accepted one is the task's output.
func TestAcceptRetriesUntilAccepted(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, acceptSpec("retry", 3), nil)
		answer(e, h.disp.one(t, "score", 1), map[string]any{"score": 0.5})
		if d := h.clock.WaitTimer(t, 5*time.Second); d != time.Second {
			t.Fatalf("retry after %s, want 1s", d)
		}
		h.clock.Advance(time.Second)
		answer(e, h.disp.one(t, "score", 2), map[string]any{"other": 1})
		h.clock.AdvanceToTimer(t, 5*time.Second)
		h.acceptedAt(e, id, 3, 0.9)
		wantLines(t, h.historyLines(id),
			"score#1 ok=false "+notAccepted,
			"score#2 ok=false "+notAccepted+": no such key: score",
			`score#3 ok=true {"score":0.9}`,
			`after#1 ok=true {"got":{"score":0.9}}`)
	})
}

// Under abort, a rejected attempt fails the workflow at once.
func TestNotAcceptedAborts(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, acceptSpec("abort", 1), nil)
		answer(e, h.disp.one(t, "score", 1), map[string]any{"score": 0.1})
		v := h.wait(e, id)
		if v.State != port.StateFailed || !strings.Contains(v.Error, `task "score" attempt 1`) || !strings.Contains(v.Error, notAccepted) {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		if n := h.disp.pending(); n != 0 {
			t.Fatalf("%d unexpected dispatches", n)
		}
		wantLines(t, h.historyLines(id), "score#1 ok=false "+notAccepted)
	})
}

// Under skip, a task whose attempts are all rejected is failed and its
// dependents see null.
func TestNotAcceptedSkips(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, acceptSpec("skip", 2), nil)
		answer(e, h.disp.one(t, "score", 1), map[string]any{"score": 0.1})
		h.clock.AdvanceToTimer(t, 5*time.Second)
		answer(e, h.disp.one(t, "score", 2), map[string]any{"score": 0.2})
		after := h.disp.one(t, "after", 1)
		if got := jsonOf(t, after.Input); got != `{"got":null}` {
			t.Fatalf("after got %s", got)
		}
		echo(e, after)
		v := h.wait(e, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"got":null}` {
			t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
		}
		if tv := task(t, v, "score"); tv.Status != graph.TaskFailed || tv.Error != notAccepted {
			t.Fatalf("score view: %+v", tv)
		}
	})
}

// The verdict is recorded: an engine that takes the instance over after a
// crash replays the rejected attempt as the failure it was (it does not run
// it again, nor judge it again) and goes on with the retry.
func TestNotAcceptedReplaysAfterRestart(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		id := h.submit(first, acceptSpec("retry", 2), nil)
		answer(first, h.disp.one(t, "score", 1), map[string]any{"score": 0.5})
		waitUntil(t, "the rejected attempt to be durable", func() bool { return len(h.history(id)) == 1 })
		first.Abandon()
		h.disp.mu.Lock()
		h.disp.next = len(h.disp.dispatched) // forget what the first engine dispatched
		h.disp.mu.Unlock()

		second := h.start(2)
		h.clock.AdvanceToTimer(t, 5*time.Second)
		h.acceptedAt(second, id, 2, 0.95)
		wantLines(t, h.historyLines(id),
			"score#1 ok=false "+notAccepted,
			`score#2 ok=true {"score":0.95}`,
			`after#1 ok=true {"got":{"score":0.95}}`)
	})
}

// With verify, the Waggler layer reports the majority's output as the
// attempt's result, and that is what accept judges; spread instances are
// judged one by one, with item and index in scope.
func TestAcceptJudgesVerifiedAndSpreadResults(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, `
name: accept-verify
version: 1
tasks:
  sq:
    spread: ${{ [1, 2, 3] }}
    capability: test.cap
    action: square
    with: {x: "${{ item }}"}
    verify: 2
    on_failure: skip
    accept: ${{ output == item * item && index >= 0 }}
outputs:
  squares: ${{ tasks.sq.output }}
`, nil)
		ds := h.disp.take(t, 3)
		for _, d := range ds {
			if d.Verify != 2 {
				t.Fatalf("%s dispatched with verify %d", d.ExecutionID, d.Verify)
			}
			x := d.Input.(map[string]any)["x"].(int64)
			if d.Index == 1 {
				x++ // the agreed output is wrong
			}
			answer(e, d, x*x)
		}
		v := h.wait(e, id)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"squares":[1,null,9]}` {
			t.Fatalf("ended %s with %v (%s)", v.State, v.Outputs, v.Error)
		}
		wantLines(t, h.historyLines(id),
			"sq[0]#1 ok=true 1",
			"sq[1]#1 ok=false not accepted: ${{ output == item * item && index >= 0 }}",
			"sq[2]#1 ok=true 9")
	})
}
