package graph

import (
	"errors"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func join(minimum uint32, cancelRest bool) taskOpt {
	return func(t *robonetv1.Task) { t.Join = &robonetv1.Join{Min: minimum, CancelRest: cancelRest} }
}

// quorum is a, b, c, each a root with the given options, and q, a 2-of-3
// join over them whose input reads all three and whose output is the
// workflow's.
func quorum(cancelRest bool, needOpts ...taskOpt) *robonetv1.Workflow {
	return newWorkflow(tasks(
		newTask("a", needOpts...), newTask("b", needOpts...), newTask("c", needOpts...),
		newTask("q", needs("a", "b", "c"), join(2, cancelRest),
			with(tmap("a", ex("tasks.a.output"), "b", ex("tasks.b.output"), "c", ex("tasks.c.output")))),
	), output("q", ex("tasks.q.output")), output("c", ex("tasks.c.output")))
}

func TestJoinFiresOnMinthCompletionAndWaitsForTheRest(t *testing.T) {
	h := newHarness(t, quorum(false), Options{})
	expect(t, h.start(nil), `dispatch a#1 null`, `dispatch b#1 null`, `dispatch c#1 null`)
	expect(t, h.done("b", -1, 1, "B"))
	expect(t, h.done("a", -1, 1, "A"), `dispatch q#1 {"a":"A","b":"B","c":null}`)
	if st := h.g.Stats(); st.Joins != 1 {
		t.Fatalf("Joins = %d after the join fired", st.Joins)
	}
	// q finishing does not finish the instance: c still runs.
	expect(t, h.done("q", -1, 1, "Q"))
	h.state(Gathering)
	// c's completion is recorded and does not run q again.
	expect(t, h.done("c", -1, 1, "C"), `finished COMPLETE`)
	h.outputs(`{"c":"C","q":"Q"}`)
	if st := h.g.Stats(); st.Joins != 1 || st.Dispatched != 4 {
		t.Fatalf("stats after the rest completed: %+v", st)
	}
}

func TestJoinCancelRest(t *testing.T) {
	h := newHarness(t, quorum(true, timeoutAfter(time.Minute)), Options{})
	h.start(nil)
	expect(t, h.done("c", -1, 1, "C"))
	expect(t, h.done("a", -1, 1, "A"), `cancel b#1`, `dispatch q#1 {"a":"A","b":null,"c":"C"}`)
	if got := h.g.Task(h.ref("b", -1)).Status; got != TaskCancelled {
		t.Fatalf("b is %s, want cancelled", got)
	}
	expect(t, h.done("b", -1, 1, "late")) // stale
	expect(t, h.fire(Timeout, "b", -1, 1, time.Minute))
	expect(t, h.done("q", -1, 1, "Q"), `finished COMPLETE`)
	h.outputs(`{"c":"C","q":"Q"}`)
}

// A need that is still waiting for its own needs is cancelled with a Cancel
// effect without an attempt (there is nothing to stop) and never runs; its
// upstream keeps running and the instance waits for it.
func TestJoinCancelRestWaitingNeed(t *testing.T) {
	wf := newWorkflow(tasks(
		newTask("a"), newTask("d"), newTask("c", needs("d")), newTask("k", needs("c")),
		newTask("q", needs("a", "c"), join(1, true)),
	))
	h := newHarness(t, wf, Options{})
	expect(t, h.start(nil), `dispatch a#1 null`, `dispatch d#1 null`)
	// c is cancelled; k, which needs only c, is skipped.
	expect(t, h.done("a", -1, 1, 1), `cancel c#0`, `dispatch q#1 null`)
	for name, want := range map[string]TaskStatus{"c": TaskCancelled, "k": TaskSkipped} {
		if got := h.g.Task(h.ref(name, -1)).Status; got != want {
			t.Fatalf("%s is %s, want %s", name, got, want)
		}
	}
	expect(t, h.done("q", -1, 1, 2))
	expect(t, h.done("d", -1, 1, 3), `finished COMPLETE`)
	if got := h.g.Task(h.ref("c", -1)).Status; got != TaskCancelled {
		t.Fatalf("c ran after d completed: %s", got)
	}
}

func TestJoinCancelRestSpreadingNeed(t *testing.T) {
	wf := newWorkflow(tasks(
		newTask("a"), newTask("s", spreadOver("[1, 2]"), with(ex("item"))),
		newTask("q", needs("a", "s"), join(1, true)),
	))
	h := newHarness(t, wf, Options{})
	expect(t, h.start(nil), `dispatch a#1 null`, `dispatch s[0]#1 1`, `dispatch s[1]#1 2`)
	expect(t, h.done("s", 0, 1, "x"))
	expect(t, h.done("a", -1, 1, 1), `cancel s[1]#1`, `cancel s#0`, `dispatch q#1 null`)
	expect(t, h.done("q", -1, 1, 2), `finished COMPLETE`)
}

func TestJoinUnreachable(t *testing.T) {
	t.Run("fails under retry", func(t *testing.T) {
		h := newHarness(t, quorum(false, onFailure(policySkip)), Options{})
		h.start(nil)
		expect(t, h.failed("a", -1, 1, "boom"))
		expect(t, h.failed("b", -1, 1, "boom"), `cancel c#1`, `finished FAILED`)
		var we *WorkflowError
		if err := h.g.Err(); !errors.As(err, &we) || we.Task != "q" ||
			err.Error() != `task "q" failed before its first attempt: join: 2 of its 3 needs failed or were skipped, so fewer than join.min 2 can complete` {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("fails under skip, the rest keep running", func(t *testing.T) {
		wf := newWorkflow(tasks(
			newTask("a", onFailure(policySkip)), newTask("b", onFailure(policySkip)),
			newTask("q", needs("a", "b"), join(2, false), onFailure(policySkip)),
			newTask("z", needs("q"), with(ex("tasks.q.output"))),
		))
		h := newHarness(t, wf, Options{})
		h.start(nil)
		expect(t, h.failed("a", -1, 1, "boom"), `dispatch z#1 null`)
		if info := h.g.Task(h.ref("q", -1)); info.Status != TaskFailed || info.Error == "" {
			t.Fatalf("q: %+v", info)
		}
		expect(t, h.done("z", -1, 1, 1))
		expect(t, h.done("b", -1, 1, 2), `finished COMPLETE`)
	})
	t.Run("skipped when every resolved need was skipped", func(t *testing.T) {
		wf := newWorkflow(tasks(
			newTask("a", when("false")), newTask("b", when("false")), newTask("c"),
			newTask("q", needs("a", "b", "c"), join(2, true)),
		))
		h := newHarness(t, wf, Options{})
		expect(t, h.start(nil), `dispatch c#1 null`, `cancel c#1`, `finished COMPLETE`)
		if got := h.g.Task(h.ref("q", -1)).Status; got != TaskSkipped {
			t.Fatalf("q is %s, want skipped", got)
		}
	})
}

// A failed need under skip does not count; the join waits for min
// completions among the others.
func TestJoinFailedNeedDoesNotCount(t *testing.T) {
	h := newHarness(t, quorum(false, onFailure(policySkip)), Options{})
	h.start(nil)
	expect(t, h.failed("a", -1, 1, "boom"))
	expect(t, h.done("b", -1, 1, "B"))
	expect(t, h.done("c", -1, 1, "C"), `dispatch q#1 {"a":null,"b":"B","c":"C"}`)
}

// A snapshot taken after the join fired restores a graph that neither fires
// it again nor forgets the rest.
func TestJoinSnapshotAfterFiring(t *testing.T) {
	for _, cancelRest := range []bool{false, true} {
		h := newHarness(t, quorum(cancelRest), Options{})
		h.start(nil)
		h.done("a", -1, 1, "A")
		h.done("b", -1, 1, "B")
		snap, err := h.g.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		g, err := h.p.Restore("inst", snap)
		if err != nil {
			t.Fatalf("cancel_rest %v: Restore: %v", cancelRest, err)
		}
		want := []string{`dispatch c#1 null`, `dispatch q#1 {"a":"A","b":"B","c":null}`}
		if cancelRest {
			want = want[1:]
		}
		expect(t, formatEffects(h.p, g.Resume(h.now)), want...)
		expect(t, formatEffects(h.p, g.Complete(h.ref("q", -1), 1, Result{Output: "Q"}, h.now)), func() []string {
			if cancelRest {
				return []string{`finished COMPLETE`}
			}
			return nil
		}()...)
		if !cancelRest {
			expect(t, formatEffects(h.p, g.Complete(h.ref("c", -1), 1, Result{Output: "C"}, h.now)), `finished COMPLETE`)
		}
		if st := g.Stats(); st.Joins != 0 {
			t.Fatalf("the restored join fired again: %+v", st)
		}
	}
}

func TestJoinPlanChecks(t *testing.T) {
	for _, m := range []uint32{0, 3} {
		wf := newWorkflow(tasks(newTask("a"), newTask("b"), newTask("q", needs("a", "b"), join(m, false))))
		if _, err := NewPlan(wf, testEnv, Options{}); !errors.Is(err, ErrInvalidPlan) {
			t.Fatalf("join.min %d: err = %v", m, err)
		}
	}
}

// A join reads what had resolved when it fired, on every attempt: a retry
// after the rest completed dispatches the same input, and so does Resume.
func TestJoinInputFrozenAtFiring(t *testing.T) {
	wf := quorum(false)
	wf.Tasks[3].Retry = &robonetv1.RetryPolicy{MaxAttempts: 2}
	h := newHarness(t, wf, Options{})
	h.start(nil)
	h.done("a", -1, 1, "A")
	expect(t, h.done("b", -1, 1, "B"), `dispatch q#1 {"a":"A","b":"B","c":null}`)
	h.done("c", -1, 1, "C")
	expect(t, h.failed("q", -1, 1, "boom"), `retry q#1 @0s`)
	expect(t, h.fire(Retry, "q", -1, 1, 0), `dispatch q#2 {"a":"A","b":"B","c":null}`)
	snap, err := h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.p.Restore("inst", snap)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, formatEffects(h.p, g.Resume(h.now)), `dispatch q#2 {"a":"A","b":"B","c":null}`)
}

// A need waiting for its retry has nothing in flight: its Cancel has no
// attempt, and the retry timer no longer applies.
func TestJoinCancelRestRetryingNeed(t *testing.T) {
	wf := newWorkflow(tasks(
		newTask("a"), newTask("b", retry(2, time.Second, 1, 0, 0)),
		newTask("q", needs("a", "b"), join(1, true)),
	))
	h := newHarness(t, wf, Options{})
	h.start(nil)
	expect(t, h.failed("b", -1, 1, "x"), `retry b#1 @1s`)
	expect(t, h.done("a", -1, 1, 1), `cancel b#0`, `dispatch q#1 null`)
	if info := h.g.Task(h.ref("b", -1)); info.Status != TaskCancelled || info.Attempt != 1 {
		t.Fatalf("b = %+v, want cancelled after attempt 1", info)
	}
	expect(t, h.fire(Retry, "b", -1, 1, time.Second))
	expect(t, h.done("q", -1, 1, 2), `finished COMPLETE`)
}
