package graph

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func loopUntil(src string, maxIterations uint32) taskOpt {
	return func(t *robonetv1.Task) {
		t.Loop = &robonetv1.Loop{Until: &robonetv1.Expr{Source: src}, Max: maxIterations}
	}
}

func loopOver(src string, maxIterations uint32) taskOpt {
	return func(t *robonetv1.Task) {
		t.Loop = &robonetv1.Loop{Over: &robonetv1.Expr{Source: src}, Max: maxIterations}
	}
}

func every(d time.Duration) taskOpt {
	return func(t *robonetv1.Task) { t.Loop.Every = durationpb.New(d) }
}

// poll loops until its output says done, at most 4 times; z needs it and
// reads its output, the list of iteration outputs.
func poll(opts ...taskOpt) *robonetv1.Workflow {
	opts = append([]taskOpt{loopUntil(`output.state == "done"`, 4),
		with(tmap("n", ex("iteration"), "prev", ex("previous")))}, opts...)
	return newWorkflow(tasks(
		newTask("poll", opts...),
		newTask("z", needs("poll"), with(ex("tasks.poll.output"))),
	), output("last", ex("tasks.poll.output[size(tasks.poll.output) - 1]")))
}

func state(s string) map[string]any { return map[string]any{"state": s} }

// An iteration's completion dispatches the next one with iteration and
// previous bound, and nothing else: the loop's dependent is dispatched only
// when until holds, with the list of iteration outputs.
func TestLoopUntil(t *testing.T) {
	h := newHarness(t, poll(), Options{})
	expect(t, h.start(nil), `dispatch poll#0#1 {"n":0,"prev":null}`)
	if info := h.g.Task(h.ref("poll", -1)); info.Status != TaskLooping || info.Iterations != 1 || info.Attempt != 1 {
		t.Fatalf("poll: %+v", info)
	}
	expect(t, h.done("poll", 0, 1, state("queued")), `dispatch poll#1#1 {"n":1,"prev":{"state":"queued"}}`)
	expect(t, h.done("poll", 0, 1, state("late"))) // stale: a past iteration
	expect(t, h.done("poll", 1, 1, state("running")), `dispatch poll#2#1 {"n":2,"prev":{"state":"running"}}`)
	expect(t, h.done("poll", 2, 1, state("done")),
		`dispatch z#1 [{"state":"queued"},{"state":"running"},{"state":"done"}]`)
	info := h.g.Task(h.ref("poll", -1))
	if info.Status != TaskCompleted || info.Iterations != 3 {
		t.Fatalf("poll: %+v", info)
	}
	if it := h.g.Task(h.ref("poll", 1)); it.Status != TaskCompleted || it.Output.(map[string]any)["state"] != "running" {
		t.Fatalf("poll#1: %+v", it)
	}
	if it := h.g.Task(h.ref("poll", 3)); it.Status != TaskUnknown {
		t.Fatalf("poll#3 never ran, but is %+v", it)
	}
	expect(t, h.done("z", -1, 1, "Z"), `finished COMPLETE`)
	h.outputs(`{"last":{"state":"done"}}`)
	if id := ExecutionID("inst", h.p, h.ref("poll", 2), 1); id != "inst/poll#2#1" {
		t.Fatalf("ExecutionID = %q", id)
	}
}

// Reaching max without until true fails the task before the next
// iteration: under retry (the default) the workflow, under skip the task
// alone, whose dependents run and read null.
func TestLoopMaxReached(t *testing.T) {
	t.Run("retry", func(t *testing.T) {
		h := newHarness(t, poll(), Options{})
		h.start(nil)
		for i := range int32(3) {
			h.done("poll", i, 1, state("running"))
		}
		expect(t, h.done("poll", 3, 1, state("running")), `finished FAILED`)
		var we *WorkflowError
		if err := h.g.Err(); !errors.As(err, &we) || !we.Loop ||
			err.Error() != `task "poll" failed: loop: until ${{ output.state == "done" }} was still false after 4 iterations, loop.max 4` {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("skip", func(t *testing.T) {
		h := newHarness(t, poll(onFailure(policySkip)), Options{})
		h.start(nil)
		for i := range int32(3) {
			h.done("poll", i, 1, state("running"))
		}
		expect(t, h.done("poll", 3, 1, state("running")), `dispatch z#1 null`)
		if info := h.g.Task(h.ref("poll", -1)); info.Status != TaskFailed || info.Error == "" || info.Output != nil {
			t.Fatalf("poll: %+v", info)
		}
	})
	t.Run("the loop limit", func(t *testing.T) {
		h := newHarness(t, poll(), Options{MaxLoop: 2})
		h.start(nil)
		h.done("poll", 0, 1, state("running"))
		expect(t, h.done("poll", 1, 1, state("running")), `finished FAILED`)
		if err := h.g.Err(); err == nil || err.Error() != `task "poll" failed: loop: until ${{ output.state == "done" }} was still false after 2 iterations, the loop limit of 2 (loop-max)` {
			t.Fatalf("err = %v", err)
		}
	})
}

// until that cannot be evaluated, or yields no bool, fails the loop without
// retry.
func TestLoopUntilCannotBeEvaluated(t *testing.T) {
	h := newHarness(t, poll(retry(3, time.Second, 1, 0, 0)), Options{})
	h.start(nil)
	expect(t, h.done("poll", 0, 1, "not a map"), `finished FAILED`)
	if err := h.g.Err(); err == nil || err.Error() != `task "poll" failed: loop.until: expression failed: ${{ output.state == "done" }}: no such key: state` {
		t.Fatalf("err = %v", err)
	}
}

// loop.every pauses between iterations with a Next timer: no attempt is in
// flight meanwhile, and the timer is the only way to the next iteration.
func TestLoopEvery(t *testing.T) {
	h := newHarness(t, poll(every(10*time.Second)), Options{})
	expect(t, h.start(nil), `dispatch poll#0#1 {"n":0,"prev":null}`) // no pause before the first
	h.now = t0.Add(3 * time.Second)
	expect(t, h.done("poll", 0, 1, state("queued")), `next poll#1#0 @13s`)
	info := h.g.Task(h.ref("poll", -1))
	if info.Status != TaskLooping || info.Iterations != 1 || !info.Due.Equal(t0.Add(13*time.Second)) {
		t.Fatalf("poll while pausing: %+v", info)
	}
	expect(t, h.fire(Next, "poll", 2, 0, 13*time.Second)) // not the next iteration
	expect(t, h.fire(Next, "poll", 1, 0, 13*time.Second), `dispatch poll#1#1 {"n":1,"prev":{"state":"queued"}}`)
	expect(t, h.fire(Next, "poll", 1, 0, 14*time.Second)) // stale
	if st := h.g.Stats(); st.StaleTimers != 2 {
		t.Fatalf("stale timers: %d", st.StaleTimers)
	}
	expect(t, h.done("poll", 1, 1, state("done")), `dispatch z#1 [{"state":"queued"},{"state":"done"}]`)
}

// Each iteration has its own attempts, retries and timeout; an iteration
// that runs out of attempts fails the loop under the task's policy.
func TestLoopIterationRetriesAndTimeout(t *testing.T) {
	h := newHarness(t, poll(retry(2, time.Second, 1, 0, 0), timeoutAfter(30*time.Second)), Options{})
	expect(t, h.start(nil), `dispatch poll#0#1 {"n":0,"prev":null}`, `timeout poll#0#1 @30s`)
	expect(t, h.done("poll", 0, 1, state("queued")), `dispatch poll#1#1 {"n":1,"prev":{"state":"queued"}}`, `timeout poll#1#1 @30s`)
	expect(t, h.failed("poll", 1, 1, "boom"), `retry poll#1#1 @1s`)
	if info := h.g.Task(h.ref("poll", 1)); info.Status != TaskRetrying || info.Error != "boom" {
		t.Fatalf("poll#1: %+v", info)
	}
	expect(t, h.fire(Retry, "poll", 1, 1, time.Second), `dispatch poll#1#2 {"n":1,"prev":{"state":"queued"}}`, `timeout poll#1#2 @31s`)
	expect(t, h.fire(Timeout, "poll", 1, 2, 31*time.Second), `cancel poll#1#2`, `finished FAILED`)
	var we *WorkflowError
	if err := h.g.Err(); !errors.As(err, &we) || we.Index != 1 ||
		err.Error() != `task "poll"#1 attempt 2 failed, its last (no retry left): timed out after 30s` {
		t.Fatalf("err = %v", err)
	}
}

// An iteration rejected by accept is a failed attempt of that iteration;
// accept reads the iteration's names.
func TestLoopAccept(t *testing.T) {
	wf := poll(retry(2, time.Second, 1, 0, 0), func(t *robonetv1.Task) {
		t.Accept = &robonetv1.Expr{Source: `output.state != "" && iteration < 5`}
	})
	h := newHarness(t, wf, Options{})
	h.start(nil)
	if err := h.g.Accept(h.ref("poll", 0), 1, state("")); err == nil {
		t.Fatal("an empty state was accepted")
	}
	if err := h.g.Accept(h.ref("poll", 0), 1, state("x")); err != nil {
		t.Fatal(err)
	}
}

func TestLoopOver(t *testing.T) {
	each := func(src string, maxIterations uint32, opts ...taskOpt) *robonetv1.Workflow {
		opts = append([]taskOpt{loopOver(src, maxIterations),
			with(tmap("item", ex("item"), "i", ex("iteration"), "prev", ex("previous")))}, opts...)
		return newWorkflow(tasks(newTask("each", opts...)), output("all", ex("tasks.each.output")))
	}
	t.Run("in order", func(t *testing.T) {
		h := newHarness(t, each(`["a", "b"]`, 0), Options{})
		expect(t, h.start(nil), `dispatch each#0#1 {"i":0,"item":"a","prev":null}`)
		expect(t, h.done("each", 0, 1, "A"), `dispatch each#1#1 {"i":1,"item":"b","prev":"A"}`)
		expect(t, h.done("each", 1, 1, "B"), `finished COMPLETE`)
		h.outputs(`{"all":["A","B"]}`)
	})
	t.Run("an empty list", func(t *testing.T) {
		h := newHarness(t, each(`[]`, 0), Options{})
		expect(t, h.start(nil), `finished COMPLETE`)
		h.outputs(`{"all":[]}`)
	})
	t.Run("longer than max", func(t *testing.T) {
		h := newHarness(t, each(`[1, 2, 3]`, 2), Options{})
		expect(t, h.start(nil), `finished FAILED`)
		if err := h.g.Err(); err == nil || err.Error() != `task "each" failed: loop.over: 3 items, more than loop.max 2` {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("longer than the loop limit", func(t *testing.T) {
		h := newHarness(t, each(`[1, 2, 3]`, 0, onFailure(policySkip)), Options{MaxLoop: 2})
		expect(t, h.start(nil), `finished COMPLETE`)
		if info := h.g.Task(h.ref("each", -1)); info.Status != TaskFailed || info.Error != "loop.over: 3 items, more than the loop limit of 2 (loop-max)" {
			t.Fatalf("each: %+v", info)
		}
	})
	t.Run("not a list", func(t *testing.T) {
		h := newHarness(t, each(`"abc"`, 0), Options{})
		expect(t, h.start(nil), `finished FAILED`)
		if err := h.g.Err(); err == nil || err.Error() != `task "each" failed: loop.over: must be a list, got string` {
			t.Fatalf("err = %v", err)
		}
	})
}

// A snapshot carries the loop: the outputs so far, the current iteration's
// attempt and the pause; Resume re-dispatches the iteration in flight with
// the same input, or re-arms the pause with its original time.
func TestLoopSnapshotRestore(t *testing.T) {
	wf := poll(every(10*time.Second), retry(3, time.Second, 1, 0, 0))
	h := newHarness(t, wf, Options{})
	h.start(nil)
	h.done("poll", 0, 1, state("queued"))
	restore := func() []string {
		t.Helper()
		snap, err := h.g.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		g, err := h.p.Restore("inst", snap)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := g.Snapshot()
		if string(again) != string(snap) {
			t.Fatal("the snapshot of the restored graph differs")
		}
		h.g = g
		return formatEffects(h.p, g.Resume(h.now))
	}
	expect(t, restore(), `next poll#1#0 @10s`) // pausing
	h.fire(Next, "poll", 1, 0, 10*time.Second)
	expect(t, restore(), `dispatch poll#1#1 {"n":1,"prev":{"state":"queued"}}`) // in flight
	expect(t, h.failed("poll", 1, 1, "boom"), `retry poll#1#1 @11s`)
	expect(t, restore(), `retry poll#1#1 @11s`) // retrying
	expect(t, h.fire(Retry, "poll", 1, 1, 11*time.Second), `dispatch poll#1#2 {"n":1,"prev":{"state":"queued"}}`)
	expect(t, h.done("poll", 1, 2, state("done")), `dispatch z#1 [{"state":"queued"},{"state":"done"}]`)
	expect(t, restore(), `dispatch z#1 [{"state":"queued"},{"state":"done"}]`) // completed
	if info := h.g.Task(h.ref("poll", 0)); info.Status != TaskCompleted {
		t.Fatalf("poll#0 after restore: %+v", info)
	}
	expect(t, h.done("z", -1, 1, 1), `finished COMPLETE`)
}

// A loop over a list restores its list by evaluating it again.
func TestLoopOverSnapshotRestore(t *testing.T) {
	wf := newWorkflow(tasks(
		newTask("list"),
		newTask("each", needs("list"), loopOver("tasks.list.output", 0), with(ex("item"))),
	))
	h := newHarness(t, wf, Options{})
	h.start(nil)
	expect(t, h.done("list", -1, 1, []any{"x", "y", "z"}), `dispatch each#0#1 "x"`)
	expect(t, h.done("each", 0, 1, 1), `dispatch each#1#1 "y"`)
	snap, err := h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if h.g, err = h.p.Restore("inst", snap); err != nil {
		t.Fatal(err)
	}
	expect(t, formatEffects(h.p, h.g.Resume(h.now)), `dispatch each#1#1 "y"`)
	expect(t, h.done("each", 1, 1, 2), `dispatch each#2#1 "z"`)
	expect(t, h.done("each", 2, 1, 3), `finished COMPLETE`)
}

// Cancelling the instance cancels the iteration in flight; a join's
// cancel_rest cancels a looping need with its iteration, then as a whole.
func TestLoopCancel(t *testing.T) {
	h := newHarness(t, poll(), Options{})
	h.start(nil)
	h.done("poll", 0, 1, state("queued"))
	expect(t, formatEffects(h.p, h.g.Cancel(h.now)), `cancel poll#1#1`, `finished CANCELLED`)

	wf := newWorkflow(tasks(
		newTask("a"), newTask("poll", loopUntil("output == 1", 3)),
		newTask("q", needs("a", "poll"), join(1, true), with(ex("tasks.poll.output"))),
	))
	h = newHarness(t, wf, Options{})
	expect(t, h.start(nil), `dispatch a#1 null`, `dispatch poll#0#1 null`)
	expect(t, h.done("poll", 0, 1, 0), `dispatch poll#1#1 null`)
	expect(t, h.done("a", -1, 1, "A"), `cancel poll#1#1`, `cancel poll#0`, `dispatch q#1 null`)
	if info := h.g.Task(h.ref("poll", -1)); info.Status != TaskCancelled {
		t.Fatalf("poll: %+v", info)
	}
	expect(t, h.done("poll", 1, 1, 1)) // stale
	expect(t, h.done("q", -1, 1, "Q"), `finished COMPLETE`)
}

// NewPlan refuses loops the compiler would not produce.
func TestLoopPlanErrors(t *testing.T) {
	for name, opt := range map[string]taskOpt{
		"until without max": loopUntil("output", 0),
		"both": func(t *robonetv1.Task) {
			t.Loop = &robonetv1.Loop{Until: &robonetv1.Expr{Source: "output"}, Over: &robonetv1.Expr{Source: "[1]"}, Max: 1}
		},
		"neither": func(t *robonetv1.Task) { t.Loop = &robonetv1.Loop{Max: 1} },
		"with spread": func(t *robonetv1.Task) {
			t.Spread = &robonetv1.Expr{Source: "[1]"}
			t.Loop = &robonetv1.Loop{Over: &robonetv1.Expr{Source: "[1]"}}
		},
		"over reads item": loopOver("[item]", 0),
	} {
		if _, err := NewPlan(newWorkflow(tasks(newTask("a", opt))), testEnv, Options{}); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s: NewPlan = %v, want ErrInvalidPlan", name, err)
		}
	}
	if _, err := NewPlan(newWorkflow(tasks(newTask("a", with(ex("iteration"))))), testEnv, Options{}); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("iteration outside a loop: NewPlan = %v", err)
	}
}
