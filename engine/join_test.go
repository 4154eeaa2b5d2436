package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// joinSpec: q starts on 2 of a, b, c and reads all three; the outputs read
// q and the rest.
const joinSpec = `
name: quorum
version: 1
tasks:
  a: {capability: test.cap, action: echo, with: {v: a}}
  b: {capability: test.cap, action: echo, with: {v: b}}
  c: {capability: test.cap, action: echo, with: {v: c}}
  q:
    needs: [a, b, c]
    join: {min: 2}
    capability: test.cap
    action: echo
    with: {a: "${{ tasks.a.output }}", b: "${{ tasks.b.output }}", c: "${{ tasks.c.output }}"}
outputs:
  q: ${{ tasks.q.output }}
  rest: ${{ [tasks.a.output, tasks.b.output, tasks.c.output] }}
`

// waitResults waits until n results of the instance are durable.
func (h *harness) waitResults(id uuid.UUID, n int) {
	h.t.Helper()
	waitUntil(h.t, "the results to be durable", func() bool { return len(h.history(id)) >= n })
}

func byExec(ds []port.TaskDispatch) map[string]port.TaskDispatch {
	m := map[string]port.TaskDispatch{}
	for _, d := range ds {
		m[d.ExecutionID] = d
	}
	return m
}

// The join starts on its second completed need, reads the third as null,
// and the instance completes only once the third finished, with its result.
func TestJoinWaitsForTheRest(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, joinSpec, nil)
		d := byExec(h.disp.take(t, 3))
		echo(e, d["c"])
		h.waitResults(id, 1)
		echo(e, d["a"])
		q := h.disp.one(t, "q", 1)
		if got := jsonOf(t, q.Input); got != `{"a":{"v":"a"},"b":null,"c":{"v":"c"}}` {
			t.Fatalf("q got %s", got)
		}
		echo(e, q)
		h.waitResults(id, 3)
		v, err := e.GetInstance(ctxOf(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State.Terminal() || task(t, v, "b").Status != graph.TaskRunning {
			t.Fatalf("after q completed: instance %s, b %s; want it waiting for b", v.State, task(t, v, "b").Status)
		}
		echo(e, d["b"])
		v = h.wait(e, id)
		if got := jsonOf(t, v.Outputs); got != `{"q":{"a":{"v":"a"},"b":null,"c":{"v":"c"}},"rest":[{"v":"a"},{"v":"b"},{"v":"c"}]}` {
			t.Fatalf("outputs %s", got)
		}
		if h.disp.pending() != 0 {
			t.Fatalf("%d more dispatches: the join ran again", h.disp.pending())
		}
	})
}

// cancel_rest cancels the needs still running when the join fires; they
// show as cancelled, and a late answer changes nothing.
func TestJoinCancelRest(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, `
name: first
version: 1
tasks:
  a: {capability: test.cap, action: echo, with: {v: a}}
  b: {capability: test.cap, action: echo, with: {v: b}}
  q:
    needs: [a, b]
    join: {min: 1, cancel_rest: true}
    capability: test.cap
    action: echo
    with: {a: "${{ tasks.a.output }}", b: "${{ tasks.b.output }}"}
outputs:
  q: ${{ tasks.q.output }}
`, nil)
		d := byExec(h.disp.take(t, 2))
		echo(e, d["b"])
		q := h.disp.one(t, "q", 1)
		h.disp.waitCancelled(t, d["a"].AttemptKey)
		if got := jsonOf(t, q.Input); got != `{"a":null,"b":{"v":"b"}}` {
			t.Fatalf("q got %s", got)
		}
		echo(e, d["a"]) // too late: ignored
		echo(e, q)
		v := h.wait(e, id)
		if got := jsonOf(t, v.Outputs); got != `{"q":{"a":null,"b":{"v":"b"}}}` {
			t.Fatalf("outputs %s", got)
		}
		if st := task(t, v, "a").Status; st != graph.TaskCancelled {
			t.Fatalf("a is %s, want cancelled", st)
		}
		for _, r := range h.history(id) {
			if r.ExecutionID == "a" {
				t.Fatalf("the cancelled need's late answer was recorded: %+v", r)
			}
		}
	})
}

// TestJoinSurvivesLeaderKill drops the engine (no flush, no release) after
// the join fired on c and a and after b, the rest, completed too, then
// lets a second engine take the instance over: it must not start the join
// again, nor feed it what b returned (replaying a, b, c in node order
// would fire it on a and b), and must finish with b's recorded result.
func TestJoinSurvivesLeaderKill(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, restDone := range []bool{false, true} {
				h := newHarnessOn(t, st.open(t))
				first := h.start(1)
				id := h.submit(first, joinSpec, nil)
				d := byExec(h.disp.take(t, 3))
				echo(first, d["c"])
				h.waitResults(id, 1)
				echo(first, d["a"])
				q := h.disp.one(t, "q", 1)
				h.waitResults(id, 2)
				if restDone {
					echo(first, d["b"])
					h.waitResults(id, 3)
				}
				first.Abandon()
				h.disp.mu.Lock()
				h.disp.next = len(h.disp.dispatched) // forget what the first engine dispatched
				h.disp.mu.Unlock()

				second := h.start(2)
				want := 1 // q again: it has no result
				if !restDone {
					want = 2 // and b
				}
				again := byExec(h.disp.take(t, want))
				q2, ok := again["q"]
				if !ok || q2.Attempt != 1 || !q2.Resumed || jsonOf(t, q2.Input) != jsonOf(t, q.Input) {
					t.Fatalf("restDone %v: resumed %+v, want q#1 with input %s", restDone, again, jsonOf(t, q.Input))
				}
				if _, ok := again["b"]; ok == restDone {
					t.Fatalf("restDone %v: b dispatched again: %v", restDone, ok)
				}
				if !restDone {
					echo(second, again["b"])
				}
				echo(second, q2)
				v := h.wait(second, id)
				if got := jsonOf(t, v.Outputs); got != `{"q":{"a":{"v":"a"},"b":null,"c":{"v":"c"}},"rest":[{"v":"a"},{"v":"b"},{"v":"c"}]}` {
					t.Fatalf("restDone %v: outputs %s", restDone, got)
				}
				if h.disp.pending() != 0 {
					t.Fatalf("restDone %v: %d more dispatches", restDone, h.disp.pending())
				}
			}
		})
	}
}

// cancelRestSpec: q starts on the first of a, b and c with cancel_rest. c
// waits for d, and k for c, so when a fires the join b is cancelled while
// it runs, c while it waits (it never runs) and k is skipped because of c.
const cancelRestSpec = `
name: first-of
version: 1
tasks:
  a: {capability: test.cap, action: echo, with: {v: a}}
  b: {capability: test.cap, action: echo, with: {v: b}}
  d: {capability: test.cap, action: echo, with: {v: d}}
  c: {needs: [d], capability: test.cap, action: echo, with: {v: c}}
  k: {needs: [c], capability: test.cap, action: echo, with: {v: k}}
  q:
    needs: [a, b, c]
    join: {min: 1, cancel_rest: true}
    capability: test.cap
    action: echo
    with: {a: "${{ tasks.a.output }}"}
outputs:
  q: ${{ tasks.q.output }}
`

// Watchers see every task cancel_rest cancels, whether or not it ran, and
// every task skipped because of one, in causal order, each task with
// exactly one terminal event.
func TestJoinCancelRestEvents(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, cancelRestSpec, nil)
		d := byExec(h.disp.take(t, 3)) // a, b, d
		w := watch(t, e, id, 0)
		evs := []engine.Event{w.next()}
		echo(e, d["a"])
		q := h.disp.one(t, "q", 1)
		h.disp.waitCancelled(t, d["b"].AttemptKey)
		echo(e, d["b"]) // too late: ignored
		echo(e, q)
		echo(e, d["d"])
		evs = append(evs, w.until(terminal)...)
		checkConsecutive(t, evs)
		if last := evs[len(evs)-1]; last.State != port.StateComplete {
			t.Fatalf("the instance ended %s:\n%s", last.State, describe(evs))
		}

		var got []string
		terminals := map[string]int{}
		for _, ev := range evs {
			switch ev.Kind {
			case engine.EventTaskCompleted, engine.EventTaskFailed, engine.EventTaskSkipped, engine.EventTaskCancelled:
				terminals[ev.Task]++
			case engine.EventTaskStarted:
			default:
				continue
			}
			got = append(got, fmt.Sprintf("%s %s#%d", ev.Kind, ev.Task, ev.Attempt))
		}
		want := []string{
			"task_completed a#1",
			"task_cancelled b#1",
			"task_cancelled c#0",
			"task_skipped k#0",
			"task_started q#1",
			"task_completed q#1",
			"task_completed d#1",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("task events:\n  got  %q\n  want %q\n%s", got, want, describe(evs))
		}
		for _, name := range []string{"a", "b", "c", "d", "k", "q"} {
			if terminals[name] != 1 {
				t.Fatalf("%s has %d terminal events, want 1:\n%s", name, terminals[name], describe(evs))
			}
		}
		// The view agrees with the events.
		v := h.wait(e, id)
		for name, st := range map[string]graph.TaskStatus{"b": graph.TaskCancelled, "c": graph.TaskCancelled, "k": graph.TaskSkipped} {
			if got := task(t, v, name).Status; got != st {
				t.Fatalf("%s is %s in the view, want %s", name, got, st)
			}
		}
	})
}
