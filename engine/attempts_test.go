package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// attemptLine renders an attempt compactly for comparisons:
// "index#attempt ok|error|running [worker]".
func attemptLine(a engine.AttemptView) string {
	var what string
	switch {
	case a.Running:
		what = "running"
	case a.OK:
		what = "ok"
	default:
		what = "error " + a.Error
	}
	s := fmt.Sprintf("%d#%d %s", a.Index, a.Attempt, what)
	if a.WorkerID != "" {
		s += " @" + a.WorkerID
	}
	return s
}

func attemptLines(as []engine.AttemptView) string {
	lines := make([]string, 0, len(as))
	for _, a := range as {
		lines = append(lines, attemptLine(a))
	}
	return strings.Join(lines, "; ")
}

// getInstance reads the view through e (live while e holds the instance).
func getInstance(t *testing.T, e interface {
	GetInstance(context.Context, uuid.UUID) (engine.InstanceView, error)
}, id uuid.UUID) engine.InstanceView {
	t.Helper()
	v, err := e.GetInstance(ctxOf(t), id)
	if err != nil {
		t.Fatalf("GetInstance: %v", err)
	}
	return v
}

// storeQuery is a read side over the harness's store, as a follower has.
func (h *harness) storeQuery() *engine.Query {
	h.t.Helper()
	q, err := engine.NewQuery(h.config(0))
	if err != nil {
		h.t.Fatalf("NewQuery: %v", err)
	}
	return q
}

func TestAttemptsOfARetriedTask(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, retryWorkflow("retry", 3), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom 1")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	failWith(e, h.disp.one(t, "flaky", 2), "boom 2")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	third := h.disp.one(t, "flaky", 3)

	// In flight, before and after its worker's first heartbeat: the task
	// runs, and the failed attempts are history, not its error.
	v := getInstance(t, e, id)
	flaky := task(t, v, "flaky")
	if got, want := attemptLines(flaky.Attempts), "-1#1 error boom 1 @w1; -1#2 error boom 2 @w1; -1#3 running"; got != want {
		t.Fatalf("live attempts:\n got %s\nwant %s", got, want)
	}
	if flaky.Status != graph.TaskRunning || flaky.Error != "" {
		t.Fatalf("flaky is %s with error %q, want running without one", flaky.Status, flaky.Error)
	}
	if cur := flaky.Attempts[2]; cur.StartedAt.IsZero() || !cur.FinishedAt.IsZero() {
		t.Fatalf("the attempt in flight: %+v, want its dispatch time and no end", cur)
	}
	e.TaskProgress(context.Background(), port.TaskProgress{AttemptKey: third.AttemptKey, WorkerID: "n2/test.cap/0", Seq: 1})
	if got := attemptLines(task(t, getInstance(t, e, id), "flaky").Attempts); !strings.HasSuffix(got, "-1#3 running @n2/test.cap/0") {
		t.Fatalf("the attempt in flight does not name the worker of its heartbeat: %s", got)
	}

	// A follower reads the recorded attempts from the Store (whether it
	// sees attempt 3 in flight depends on the snapshot the owner wrote).
	waitUntil(t, "the results to be written", func() bool { return len(h.history(id)) == 2 })
	fv := getInstance(t, h.storeQuery(), id)
	if got, want := attemptLines(task(t, fv, "flaky").Attempts), "-1#1 error boom 1 @w1; -1#2 error boom 2 @w1"; !strings.HasPrefix(got, want) {
		t.Fatalf("store attempts:\n got %s\nwant %s…", got, want)
	}

	answer(e, third, "third time lucky")
	echo(e, h.disp.one(t, "after", 1))
	v = h.wait(e, id)
	flaky = task(t, v, "flaky")
	if got, want := attemptLines(flaky.Attempts), "-1#1 error boom 1 @w1; -1#2 error boom 2 @w1; -1#3 ok @w1"; got != want {
		t.Fatalf("attempts once complete:\n got %s\nwant %s", got, want)
	}
	if flaky.Status != graph.TaskCompleted || flaky.Error != "" {
		t.Fatalf("completed flaky shows error %q (status %s): an earlier attempt's error is not current", flaky.Error, flaky.Status)
	}
	if a := flaky.Attempts[2]; !a.StartedAt.Equal(time.Unix(1, 0)) || !a.FinishedAt.Equal(time.Unix(2, 0)) {
		t.Fatalf("attempt 3 times %s–%s, want the worker's", a.StartedAt, a.FinishedAt)
	}
	if got := attemptLines(task(t, v, "after").Attempts); got != "-1#1 ok @w1" {
		t.Fatalf("after attempts: %s", got)
	}
}

func TestAttemptsOfAFailedAndACancelledTask(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, retryWorkflow("retry", 2), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom 1")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	failWith(e, h.disp.one(t, "flaky", 2), "boom 2")
	v := h.wait(e, id)
	flaky := task(t, v, "flaky")
	if got, want := attemptLines(flaky.Attempts), "-1#1 error boom 1 @w1; -1#2 error boom 2 @w1"; got != want || flaky.Error != "boom 2" {
		t.Fatalf("failed task: attempts %s (want %s), error %q", got, want, flaky.Error)
	}
	if got := task(t, v, "after").Attempts; len(got) != 0 {
		t.Fatalf("a task never dispatched lists attempts: %s", attemptLines(got))
	}

	// An attempt cancelled in flight is listed as cancelled.
	id = h.submit(e, retryWorkflow("retry", 2), nil)
	h.disp.one(t, "flaky", 1)
	if err := e.CancelInstance(ctxOf(t), id); err != nil {
		t.Fatalf("CancelInstance: %v", err)
	}
	v = h.wait(e, id)
	if got := attemptLines(task(t, v, "flaky").Attempts); got != "-1#1 error cancelled" {
		t.Fatalf("cancelled task attempts: %s", got)
	}
}

func TestAttemptsOfASpread(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	spec := strings.Replace(spreadSpec, "    action: echo\n    with: {x:", "    action: echo\n    retry: {max_attempts: 2}\n    with: {x:", 1)
	id := h.submit(e, spec, map[string]any{"items": []any{"a", "b", "c"}})
	echo(e, h.disp.one(t, "prepare", 1))
	work := h.disp.take(t, 3)
	echo(e, work[0])
	failWith(e, work[1], "flaked")
	h.clock.AdvanceToTimer(t, time.Minute)
	retried := h.disp.one(t, "work[1]", 2)

	v := getInstance(t, e, id)
	if got, want := attemptLines(task(t, v, "work").Attempts), "0#1 ok @w1; 1#1 error flaked @w1; 1#2 running; 2#1 running"; got != want {
		t.Fatalf("spread attempts:\n got %s\nwant %s", got, want)
	}
	echo(e, retried)
	echo(e, work[2])
	echo(e, h.disp.one(t, "total", 1))
	v = h.wait(e, id)
	w := task(t, v, "work")
	if got, want := attemptLines(w.Attempts), "0#1 ok @w1; 1#1 error flaked @w1; 1#2 ok @w1; 2#1 ok @w1"; got != want {
		t.Fatalf("spread attempts once complete:\n got %s\nwant %s", got, want)
	}
}

func TestAttemptsAfterATakeover(t *testing.T) {
	h := newHarness(t)
	first := h.start(1)
	id := h.submit(first, retryWorkflow("retry", 3), nil)
	failWith(first, h.disp.one(t, "flaky", 1), "boom 1")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	failWith(first, h.disp.one(t, "flaky", 2), "boom 2")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	h.disp.one(t, "flaky", 3)
	if err := first.Stop(ctxOf(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// The next owner hydrates with the latest result of each execution
	// only; its view still lists the attempts before it.
	second := h.start(2)
	h.disp.one(t, "flaky", 3)
	v := getInstance(t, second, id)
	if got, want := attemptLines(task(t, v, "flaky").Attempts), "-1#1 error boom 1 @w1; -1#2 error boom 2 @w1; -1#3 running"; got != want {
		t.Fatalf("attempts after the takeover:\n got %s\nwant %s", got, want)
	}
}

func TestAttemptsKeptInMemoryAreBounded(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	const attempts = 13
	spec := strings.Replace(retryWorkflow("retry", 9), "{max_attempts: 9, backoff: {initial: 1s, factor: 2}}",
		fmt.Sprintf("{max_attempts: %d, backoff: {initial: 1s, factor: 1}}", attempts), 1)
	id := h.submit(e, spec, nil)
	for a := uint32(1); a < attempts; a++ {
		failWith(e, h.disp.one(t, "flaky", a), fmt.Sprintf("boom %d", a))
		h.clock.AdvanceToTimer(t, time.Second)
	}
	h.disp.one(t, "flaky", attempts)
	waitUntil(t, "the results to be written", func() bool { return len(h.history(id)) == attempts-1 })
	// More failed attempts than the engine keeps per execution: the view
	// lists them all, the older ones read from the Store.
	flaky := task(t, getInstance(t, e, id), "flaky")
	if len(flaky.Attempts) != attempts {
		t.Fatalf("%d attempts listed, want %d: %s", len(flaky.Attempts), attempts, attemptLines(flaky.Attempts))
	}
	for i, a := range flaky.Attempts {
		if a.Attempt != uint32(i+1) || (i < attempts-1 && a.Error != fmt.Sprintf("boom %d", i+1)) {
			t.Fatalf("attempt %d is %s", i+1, attemptLine(a))
		}
	}
	if !flaky.Attempts[attempts-1].Running {
		t.Fatalf("the last attempt is not in flight: %s", attemptLine(flaky.Attempts[attempts-1]))
	}
}

func TestAttemptsShownAreBounded(t *testing.T) {
	tv := engine.TaskView{}
	for i := range engine.MaxAttemptsShown + 10 {
		a := engine.AttemptView{Index: int32(i), Attempt: 1, OK: true}
		if i%100 == 7 {
			a.OK, a.Error = false, "broken"
		}
		tv.Attempts = append(tv.Attempts, a)
	}
	tv.Attempts = append(tv.Attempts, engine.AttemptView{Index: engine.MaxAttemptsShown + 10, Attempt: 1, Running: true})
	v := engine.InstanceView{Tasks: []engine.TaskView{tv}}
	engine.BoundAttempts(&v)
	got := v.Tasks[0]
	if len(got.Attempts) != engine.MaxAttemptsShown || got.AttemptsOmitted != 11 {
		t.Fatalf("%d attempts kept, %d omitted; want %d and 11", len(got.Attempts), got.AttemptsOmitted, engine.MaxAttemptsShown)
	}
	failed, running := 0, 0
	for i, a := range got.Attempts {
		if i > 0 && got.Attempts[i-1].Index >= a.Index {
			t.Fatalf("attempts out of order at %d", i)
		}
		if a.Error != "" {
			failed++
		}
		if a.Running {
			running++
		}
	}
	if failed != 11 || running != 1 {
		t.Fatalf("kept %d failed and %d running attempts, want every one (11 and 1)", failed, running)
	}
}
