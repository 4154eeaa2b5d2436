package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func TestChainPassesData(t *testing.T) {
	h := newHarness(t, newWorkflow(
		input("n", robonetv1.ValueType_VALUE_TYPE_INT, true, ""),
		tasks(
			newTask("a", with(tmap("n", ex("inputs.n")))),
			newTask("b", needs("a"), with(ex("tasks.a.output.x"))),
			newTask("c", needs("b"), with(interp("v=${{ tasks.b.output }}/${{ tasks.b.output + 1 }}"))),
		),
		output("result", ex("tasks.c.output")),
	), Options{})
	h.state(Pending)
	expect(t, h.start(map[string]any{"n": 7}), `dispatch a#1 {"n":7}`)
	h.state(Running)
	expect(t, h.done("a", -1, 1, map[string]any{"x": 41}), `dispatch b#1 41`)
	expect(t, h.done("b", -1, 1, 41), `dispatch c#1 "v=41/42"`)
	h.state(Gathering)
	expect(t, h.done("c", -1, 1, "ok"), `finished COMPLETE`)
	h.outputs(`{"result":"ok"}`)
	if info := h.g.Task(h.ref("b", -1)); info.Status != TaskCompleted || info.Attempt != 1 || info.Output != int64(41) {
		t.Errorf("Task(b) = %+v", info)
	}
	if s := h.g.Stats(); s.Dispatched != 3 || s.Completed != 3 || s.StaleCompletions != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestParallelBranchesAndJoin(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`"A"`))),
		newTask("b", with(lit(`"B"`))),
		newTask("j", needs("a", "b"), with(tmap("a", ex("tasks.a.output"), "b", ex("tasks.b.output")))),
	), output("j", ex("tasks.j.output"))), Options{})
	expect(t, h.start(nil), `dispatch a#1 "A"`, `dispatch b#1 "B"`)
	h.state(Running)
	expect(t, h.done("b", -1, 1, "rb"))
	h.state(Running) // j still waits for a
	if info := h.g.Task(h.ref("j", -1)); info.Status != TaskWaiting {
		t.Fatalf("j = %s before a completes", info.Status)
	}
	expect(t, h.done("a", -1, 1, "ra"), `dispatch j#1 {"a":"ra","b":"rb"}`)
	h.state(Gathering)
	expect(t, h.done("j", -1, 1, 1.5), `finished COMPLETE`)
	h.outputs(`{"j":1.5}`)
}

func TestSpreadOrdersResultsByIndex(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("discover", with(lit(`null`))),
		newTask("probe", needs("discover"), spreadOver("tasks.discover.output.hosts"),
			with(tmap("url", interp("http://${{ item }}/health"), "i", ex("index")))),
		newTask("summarize", needs("probe"), when("size(tasks.probe.output) > 0"), with(ex("tasks.probe.output"))),
	), output("report", ex("tasks.summarize.output"))), Options{})
	expect(t, h.start(nil), `dispatch discover#1 null`)
	expect(t, h.done("discover", -1, 1, map[string]any{"hosts": []any{"h0", "h1", "h2"}}),
		`dispatch probe[0]#1 {"i":0,"url":"http://h0/health"}`,
		`dispatch probe[1]#1 {"i":1,"url":"http://h1/health"}`,
		`dispatch probe[2]#1 {"i":2,"url":"http://h2/health"}`)
	h.state(Running) // summarize still waits
	info := h.g.Task(h.ref("probe", -1))
	if info.Status != TaskSpreading || info.Width != 3 || info.Pending != 3 {
		t.Fatalf("probe = %+v", info)
	}
	expect(t, h.done("probe", 2, 1, "r2"))
	expect(t, h.done("probe", 0, 1, "r0"))
	if info := h.g.Task(h.ref("probe", 0)); info.Status != TaskCompleted || info.Output != "r0" {
		t.Fatalf("probe[0] = %+v", info)
	}
	expect(t, h.done("probe", 1, 1, "r1"), `dispatch summarize#1 ["r0","r1","r2"]`)
	expect(t, h.done("summarize", -1, 1, "sum"), `finished COMPLETE`)
	h.outputs(`{"report":"sum"}`)
}

func TestEmptySpreadDispatchesNothing(t *testing.T) {
	h := newHarness(t, newWorkflow(
		input("xs", robonetv1.ValueType_VALUE_TYPE_LIST, false, `[]`),
		tasks(
			newTask("each", spreadOver("inputs.xs"), with(ex("item"))),
			newTask("after", needs("each"), with(ex("tasks.each.output"))),
		), output("each", ex("tasks.each.output"))), Options{})
	expect(t, h.start(nil), `dispatch after#1 []`)
	if info := h.g.Task(h.ref("each", -1)); info.Status != TaskCompleted || info.Attempt != 0 {
		t.Fatalf("each = %+v", info)
	}
	expect(t, h.done("after", -1, 1, nil), `finished COMPLETE`)
	h.outputs(`{"each":[]}`)
}

func TestGuardSkipsExclusiveSubtreeOnly(t *testing.T) {
	// g is guarded off; x and y depend only on it and are skipped without
	// evaluating anything (y's `when` would fail if evaluated). j joins g
	// with the live branch b, so it runs and sees null for g.
	h := newHarness(t, newWorkflow(tasks(
		newTask("a"),
		newTask("b", with(lit(`"B"`))),
		newTask("g", needs("a"), when("tasks.a.output == 'go'")),
		newTask("x", needs("g"), with(ex("tasks.g.output"))),
		newTask("y", needs("x"), when("tasks.x.output.missing")),
		newTask("j", needs("b", "g"), with(tmap("b", ex("tasks.b.output"), "g", ex("tasks.g.output")))),
	), output("j", ex("tasks.j.output")), output("y", ex("tasks.y.output"))), Options{})
	expect(t, h.start(nil), `dispatch a#1 null`, `dispatch b#1 "B"`)
	expect(t, h.done("a", -1, 1, "stop"))
	for _, name := range []string{"g", "x", "y"} {
		if st := h.g.Task(h.ref(name, -1)).Status; st != TaskSkipped {
			t.Errorf("%s = %s, want skipped", name, st)
		}
	}
	h.state(Running)
	expect(t, h.done("b", -1, 1, "rb"), `dispatch j#1 {"b":"rb","g":null}`)
	expect(t, h.done("j", -1, 1, "joined"), `finished COMPLETE`)
	h.outputs(`{"j":"joined","y":null}`)
	if s := h.g.Stats(); s.Skipped != 3 || s.Dispatched != 3 {
		t.Errorf("stats = %+v", s)
	}
}

func TestSkipPropagatesThroughJoinOfSkipped(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("g1", when("false")),
		newTask("g2", when("1 > 2")),
		newTask("j", needs("g1", "g2"), with(lit(`1`))),
		newTask("k", needs("j"), with(lit(`2`))),
	), output("k", ex("tasks.k.output"))), Options{})
	expect(t, h.start(nil), `finished COMPLETE`)
	h.outputs(`{"k":null}`)
	if st := h.g.Task(h.ref("k", -1)).Status; st != TaskSkipped {
		t.Errorf("k = %s", st)
	}
}

func TestLongChainSkipIsIterative(t *testing.T) {
	const n = 200_000
	ts := make([]*robonetv1.Task, n)
	ts[0] = newTask(chainName(0), when("false"))
	for i := 1; i < n; i++ {
		ts[i] = newTask(chainName(i), needs(chainName(i-1)))
	}
	h := newHarness(t, newWorkflow(tasks(ts...)), Options{})
	expect(t, h.start(nil), `finished COMPLETE`)
	if s := h.g.Stats(); s.Skipped != n {
		t.Errorf("skipped %d", s.Skipped)
	}
}

func chainName(i int) string { return fmt.Sprintf("t%07d", i) }

func itoa(i int) string { return strconv.Itoa(i) }

func TestWhenErrorsFailWithoutRetry(t *testing.T) {
	t.Run("retry policy fails the workflow", func(t *testing.T) {
		h := newHarness(t, newWorkflow(tasks(
			newTask("a", when("'yes'"), retry(5, time.Second, 2, time.Minute, 0)),
			newTask("b", with(lit(`1`))),
		)), Options{})
		// a is handled before b (node order) and fails the workflow first.
		expect(t, h.start(nil), `finished FAILED`)
		h.state(Failed)
		var we *WorkflowError
		if !errors.As(h.g.Err(), &we) || we.Task != "a" || we.Attempt != 0 || we.Index != -1 {
			t.Fatalf("err = %#v", h.g.Err())
		}
		if got := h.g.Err().Error(); got != `task "a" failed before its first attempt: when: must be a bool, got string` {
			t.Errorf("err = %q", got)
		}
	})
	t.Run("skip policy lets dependents run", func(t *testing.T) {
		h := newHarness(t, newWorkflow(tasks(
			newTask("a", when("tasks.nope.output"), onFailure(policySkip), needs("nope")),
			newTask("nope", with(lit(`{}`))),
			newTask("b", needs("a"), with(ex("tasks.a.output"))),
		)), Options{})
		expect(t, h.start(nil), `dispatch nope#1 {}`)
		expect(t, h.done("nope", -1, 1, map[string]any{}), `dispatch b#1 null`)
		info := h.g.Task(h.ref("a", -1))
		if info.Status != TaskFailed || info.Error != "when: must be a bool, got map" {
			t.Fatalf("a = %+v", info)
		}
	})
}

func TestSpreadFailures(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		input     any
		reason    string
	}{
		{"not a list", "inputs.xs", "abc", "spread: must be a list, got string"},
		{"too wide", "inputs.xs", []any{1, 2, 3, 4}, "spread: 4 items exceed the limit of 3 (split the work or raise MaxSpreadWidth)"},
		{"eval error", "inputs.xs.missing", map[string]any{}, "spread: expression failed: ${{ inputs.xs.missing }}: no such key: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newWorkflow(
				input("xs", robonetv1.ValueType_VALUE_TYPE_ANY, true, ""),
				tasks(newTask("s", spreadOver(tc.src), onFailure(policySkip), retry(3, time.Second, 1, 0, 0)),
					newTask("after", needs("s"), with(ex("tasks.s.output")))),
			), Options{MaxSpreadWidth: 3})
			expect(t, h.start(map[string]any{"xs": tc.input}), `dispatch after#1 null`)
			if info := h.g.Task(h.ref("s", -1)); info.Status != TaskFailed || info.Error != tc.reason {
				t.Fatalf("s = %+v, want error %q", info, tc.reason)
			}
		})
	}
}

func TestWithErrorFailsAttemptWithoutRetry(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`{"k":1}`))),
		newTask("b", needs("a"), with(ex("tasks.a.output.missing")), onFailure(policySkip), retry(3, time.Second, 1, 0, 0)),
		newTask("c", needs("b"), with(ex("tasks.b.output"))),
	)), Options{})
	h.start(nil)
	expect(t, h.done("a", -1, 1, map[string]any{"k": 1}), `dispatch c#1 null`)
	info := h.g.Task(h.ref("b", -1))
	if info.Status != TaskFailed || info.Attempt != 1 || !strings.HasPrefix(info.Error, "with: expression failed") {
		t.Fatalf("b = %+v", info)
	}
}

// jitterUnit recomputes JitterUnit from its documented definition.
func jitterUnit(instanceID, task string, index int32, attempt uint32) float64 {
	h := fnv.New64a()
	h.Write([]byte(instanceID))
	h.Write([]byte{0})
	h.Write([]byte(task))
	h.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(index))
	binary.BigEndian.PutUint32(b[4:], attempt)
	h.Write(b[:])
	return float64(h.Sum64()>>11)/(1<<53)*2 - 1
}

func TestRetryBackoffIsExact(t *testing.T) {
	const jitter = 0.5
	h := newHarness(t, newWorkflow(tasks(
		newTask("flaky", with(lit(`"in"`)), retry(5, time.Second, 2, 3*time.Second, jitter)),
	)), Options{})
	expect(t, h.start(nil), `dispatch flaky#1 "in"`)
	// Expected delays: base 1s, 2s, 4s→3s (cap), 8s→3s (cap), each jittered.
	bases := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
	elapsed := time.Duration(0)
	for n, base := range bases {
		attempt := uint32(n + 1)
		u := jitterUnit("inst", "flaky", -1, attempt)
		if u < -1 || u >= 1 {
			t.Fatalf("u = %v", u)
		}
		want := time.Duration(float64(base) * (1 + jitter*u))
		if got := h.p.RetryDelay("inst", h.ref("flaky", -1), attempt); got != want {
			t.Fatalf("RetryDelay(%d) = %v, want %v", attempt, got, want)
		}
		expect(t, h.failed("flaky", -1, attempt, "boom"), "retry flaky#"+itoa(int(attempt))+" @"+(elapsed+want).String())
		elapsed += want
		if info := h.g.Task(h.ref("flaky", -1)); info.Status != TaskRetrying || !info.Due.Equal(t0.Add(elapsed)) {
			t.Fatalf("info = %+v", info)
		}
		expect(t, h.fire(Retry, "flaky", -1, attempt, elapsed), `dispatch flaky#`+itoa(int(attempt+1))+` "in"`)
	}
	expect(t, h.failed("flaky", -1, 5, "boom"), `finished FAILED`)
	if got := h.g.Err().Error(); got != `task "flaky" attempt 5 failed, its last (no retry left): boom` {
		t.Errorf("err = %q", got)
	}
	if s := h.g.Stats(); s.Retries != 4 || s.FailedAttempts != 5 || s.Dispatched != 5 {
		t.Errorf("stats = %+v", s)
	}
}

func TestRetryDelayEdges(t *testing.T) {
	p := mustPlan(t, newWorkflow(tasks(
		newTask("nocap", retry(100, time.Second, 10, 0, 0)),
		newTask("flat", retry(3, 500*time.Millisecond, 0, 0, 0)),
	)), Options{})
	nocap, _ := p.Lookup("nocap")
	flat, _ := p.Lookup("flat")
	if got := p.RetryDelay("i", Ref(nocap), 3); got != 100*time.Second {
		t.Errorf("nocap(3) = %v", got)
	}
	if got := p.RetryDelay("i", Ref(nocap), 60); got != time.Duration(math.MaxInt64) {
		t.Errorf("nocap(60) = %v, want saturation", got)
	}
	if got := p.RetryDelay("i", Ref(flat), 2); got != 500*time.Millisecond {
		t.Errorf("flat(2) = %v (factor 0 means 1)", got)
	}
}

func TestRetriesExhaustedUnderSkip(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`)), onFailure(policySkip), retry(2, time.Second, 1, 0, 0)),
		newTask("b", needs("a"), with(tmap("a", ex("tasks.a.output")))),
	), output("a", ex("tasks.a.output"))), Options{})
	h.start(nil)
	expect(t, h.failed("a", -1, 1, "e1"), `retry a#1 @1s`)
	expect(t, h.fire(Retry, "a", -1, 1, time.Second), `dispatch a#2 1`)
	expect(t, h.failed("a", -1, 2, "e2"), `dispatch b#1 {"a":null}`)
	if info := h.g.Task(h.ref("a", -1)); info.Status != TaskFailed || info.Error != "e2" || info.Attempt != 2 {
		t.Fatalf("a = %+v", info)
	}
	expect(t, h.done("b", -1, 1, true), `finished COMPLETE`)
	h.outputs(`{"a":null}`)
}

func TestSpreadInstancesFailIndividually(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("s", spreadOver("[10, 20, 30]"), with(ex("item")), onFailure(policySkip), retry(2, time.Second, 1, 0, 0)),
		newTask("t", needs("s"), with(ex("tasks.s.output"))),
	)), Options{})
	expect(t, h.start(nil), `dispatch s[0]#1 10`, `dispatch s[1]#1 20`, `dispatch s[2]#1 30`)
	expect(t, h.failed("s", 1, 1, "x"), `retry s[1]#1 @1s`)
	expect(t, h.done("s", 0, 1, "a"))
	expect(t, h.fire(Retry, "s", 1, 1, time.Second), `dispatch s[1]#2 20`)
	expect(t, h.failed("s", 1, 2, "y"))
	expect(t, h.done("s", 2, 1, "c"), `dispatch t#1 ["a",null,"c"]`)
	if info := h.g.Task(h.ref("s", 1)); info.Status != TaskFailed || info.Attempt != 2 || info.Error != "y" {
		t.Fatalf("s[1] = %+v", info)
	}
}

func TestAbortCancelsInFlightSiblings(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`))),
		newTask("b", with(lit(`2`)), onFailure(policyAbort), retry(5, time.Second, 1, 0, 0)),
		newTask("c", spreadOver("[1, 2, 3]"), with(ex("item"))),
		newTask("d", with(lit(`4`)), retry(3, time.Second, 1, 0, 0)),
	)), Options{})
	h.start(nil)
	expect(t, h.done("c", 1, 1, "ok"))
	expect(t, h.failed("d", -1, 1, "later"), `retry d#1 @1s`)
	expect(t, h.failed("b", -1, 1, "fatal"),
		`cancel a#1`, `cancel c[0]#1`, `cancel c[2]#1`, `cancel d#0`, `finished FAILED`)
	h.state(Failed)
	if got := h.g.Err().Error(); got != `task "b" attempt 1 failed (on_failure: abort): fatal` {
		t.Errorf("err = %q", got)
	}
	for _, tc := range []struct {
		ref  TaskRef
		want TaskStatus
	}{{h.ref("a", -1), TaskCancelled}, {h.ref("b", -1), TaskFailed}, {h.ref("c", 0), TaskCancelled},
		{h.ref("c", 1), TaskCompleted}, {h.ref("c", -1), TaskCancelled}, {h.ref("d", -1), TaskCancelled}} {
		if got := h.g.Task(tc.ref).Status; got != tc.want {
			t.Errorf("%s = %s, want %s", formatRef(h.p, tc.ref), got, tc.want)
		}
	}
	// Everything after the end is stale.
	expect(t, h.done("a", -1, 1, "late"))
	expect(t, h.fire(Retry, "d", -1, 1, time.Second))
	if s := h.g.Stats(); s.StaleCompletions != 1 || s.StaleTimers != 1 || s.Cancelled != 3 {
		t.Errorf("stats = %+v", s)
	}
	expect(t, formatEffects(h.p, h.g.Cancel(h.now))) // terminal: no-op
}

func TestSpreadInstanceAbortMarksTaskFailed(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("s", spreadOver("[1, 2]"), with(ex("item")), onFailure(policyAbort)),
	)), Options{})
	h.start(nil)
	expect(t, h.failed("s", 1, 1, "bad"), `cancel s[0]#1`, `finished FAILED`)
	if got := h.g.Err().Error(); got != `task "s"[1] attempt 1 failed (on_failure: abort): bad` {
		t.Errorf("err = %q", got)
	}
	if st := h.g.Task(h.ref("s", -1)).Status; st != TaskFailed {
		t.Errorf("s = %s", st)
	}
}

func TestTimeoutCancelsAndRetries(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("slow", with(lit(`"x"`)), timeoutAfter(30*time.Second), retry(2, 5*time.Second, 1, 0, 0)),
	), output("o", ex("tasks.slow.output"))), Options{})
	expect(t, h.start(nil), `dispatch slow#1 "x"`, `timeout slow#1 @30s`)
	if info := h.g.Task(h.ref("slow", -1)); !info.Due.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("due = %v", info.Due)
	}
	expect(t, h.fire(Timeout, "slow", -1, 1, 30*time.Second), `cancel slow#1`, `retry slow#1 @35s`)
	if info := h.g.Task(h.ref("slow", -1)); info.Error != "timed out after 30s" {
		t.Fatalf("error = %q", info.Error)
	}
	expect(t, h.done("slow", -1, 1, "too late")) // the cancelled attempt is stale
	expect(t, h.fire(Retry, "slow", -1, 1, 35*time.Second), `dispatch slow#2 "x"`, `timeout slow#2 @1m5s`)
	expect(t, h.fire(Timeout, "slow", -1, 1, 36*time.Second)) // old timer: stale
	expect(t, h.done("slow", -1, 2, "fast"), `finished COMPLETE`)
	expect(t, h.fire(Timeout, "slow", -1, 2, 65*time.Second)) // after completion: stale
	h.outputs(`{"o":"fast"}`)
	if s := h.g.Stats(); s.TimedOut != 1 || s.StaleTimers != 2 || s.StaleCompletions != 1 || s.Cancelled != 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestTimeoutExhaustedFailsWorkflow(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("slow", timeoutAfter(time.Second)),
		newTask("other", with(lit(`1`))),
	)), Options{})
	expect(t, h.start(nil), `dispatch other#1 1`, `dispatch slow#1 null`, `timeout slow#1 @1s`)
	expect(t, h.fire(Timeout, "slow", -1, 1, time.Second), `cancel slow#1`, `cancel other#1`, `finished FAILED`)
	if got := h.g.Err().Error(); got != `task "slow" attempt 1 failed, its last (no retry left): timed out after 1s` {
		t.Errorf("err = %q", got)
	}
}

func TestStaleAndDuplicateCompletionsIgnored(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`))),
		newTask("s", spreadOver("[1]"), with(ex("item"))),
	)), Options{})
	h.start(nil)
	a := h.ref("a", -1)
	for _, tc := range []struct {
		ref     TaskRef
		attempt uint32
	}{
		{a, 2},                            // attempt not dispatched
		{TaskRef{Node: 99, Index: -1}, 1}, // unknown node
		{TaskRef{Node: -1, Index: -1}, 1},
		{TaskRef{Node: a.Node, Index: 0}, 1}, // index on a plain task
		{h.ref("s", -1), 1},                  // spread task as a whole
		{h.ref("s", 1), 1},                   // index out of range
	} {
		if fx := h.g.Complete(tc.ref, tc.attempt, Result{Output: 1}, h.now); fx != nil {
			t.Errorf("Complete(%+v, %d) = %v, want nil", tc.ref, tc.attempt, fx)
		}
	}
	expect(t, h.done("a", -1, 1, "first"))
	expect(t, h.done("a", -1, 1, "dup")) // duplicate
	if out := h.g.Task(a).Output; out != "first" {
		t.Errorf("output = %v, duplicate overwrote it", out)
	}
	expect(t, h.fire(Retry, "a", -1, 1, 0))
	expect(t, h.fire(TimerKind(9), "a", -1, 1, 0))
	if s := h.g.Stats(); s.StaleCompletions != 7 || s.StaleTimers != 2 || s.Completed != 1 {
		t.Errorf("stats = %+v", s)
	}
	if info := h.g.Task(TaskRef{Node: 99, Index: -1}); info.Status != TaskUnknown {
		t.Errorf("unknown task info = %+v", info)
	}
}

func TestInvalidOutputIsAFailedAttempt(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(newTask("a", onFailure(policySkip)))), Options{})
	h.start(nil)
	expect(t, h.done("a", -1, 1, math.NaN()), `finished COMPLETE`)
	if info := h.g.Task(h.ref("a", -1)); info.Status != TaskFailed || !strings.HasPrefix(info.Error, "invalid output: ") {
		t.Errorf("a = %+v", info)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`))),
		newTask("b", with(lit(`2`)), retry(2, time.Second, 1, 0, 0)),
		newTask("c", needs("a")),
	)), Options{})
	h.start(nil)
	expect(t, h.failed("b", -1, 1, "x"), `retry b#1 @1s`)
	// b waits for its retry: a Cancel with no attempt says it is cancelled.
	expect(t, formatEffects(h.p, h.g.Cancel(h.now)), `cancel a#1`, `cancel b#0`, `finished CANCELLED`)
	h.state(Cancelled)
	if h.g.Err() != nil {
		t.Errorf("Err = %v", h.g.Err())
	}
	expect(t, formatEffects(h.p, h.g.Cancel(h.now)))
	expect(t, h.done("a", -1, 1, 1))
	expect(t, h.fire(Retry, "b", -1, 1, time.Second))
	if st := h.g.Task(h.ref("c", -1)).Status; st != TaskWaiting {
		t.Errorf("c = %s", st)
	}

	// Cancelling a pending instance only finishes it.
	g := h.p.NewGraph("other")
	expect(t, formatEffects(h.p, g.Cancel(h.now)), `finished CANCELLED`)
	if _, err := g.Start(nil, h.now); err == nil {
		t.Error("Start after Cancel succeeded")
	}
}

func TestGatheringTransition(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", with(lit(`1`))),
		newTask("b", needs("a"), retry(2, time.Second, 1, 0, 0)),
		newTask("c", with(lit(`1`))),
	)), Options{})
	h.start(nil)
	h.state(Running)
	expect(t, h.done("a", -1, 1, 1), `dispatch b#1 null`)
	h.state(Gathering) // b dispatched, c running: nothing waits for predecessors
	expect(t, h.failed("b", -1, 1, "x"), `retry b#1 @1s`)
	h.state(Gathering)
	h.fire(Retry, "b", -1, 1, time.Second)
	h.done("b", -1, 2, 2)
	h.state(Gathering)
	expect(t, h.done("c", -1, 1, 3), `finished COMPLETE`)
}

func TestEmptyWorkflowCompletesAtStart(t *testing.T) {
	h := newHarness(t, newWorkflow(
		input("x", robonetv1.ValueType_VALUE_TYPE_STRING, false, `"d"`),
		output("x", ex("inputs.x"))), Options{})
	expect(t, h.start(nil), `finished COMPLETE`)
	h.outputs(`{"x":"d"}`)
	if _, err := h.g.Start(nil, h.now); err == nil {
		t.Error("second Start succeeded")
	}
}

func TestOutputEvaluationErrorFails(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(newTask("a")), output("o", ex("tasks.a.output.k"))), Options{})
	h.start(nil)
	expect(t, h.done("a", -1, 1, "scalar"), `finished FAILED`)
	var we *WorkflowError
	if !errors.As(h.g.Err(), &we) || we.Output != "o" || !strings.HasPrefix(we.Error(), `output "o": expression failed`) {
		t.Fatalf("err = %v", h.g.Err())
	}
	if h.g.Outputs() != nil {
		t.Error("outputs set on failure")
	}
}

func TestCompleteDoesNotAllocate(t *testing.T) {
	const n = 300
	ts := make([]*robonetv1.Task, n)
	ts[0] = newTask(chainName(0), with(lit(`1`)))
	for i := 1; i < n; i++ {
		ts[i] = newTask(chainName(i), needs(chainName(i-1)), with(ex("tasks."+chainName(i-1)+".output")))
	}
	h := newHarness(t, newWorkflow(tasks(ts...)), Options{})
	h.start(nil)
	next := int32(0)
	allocs := testing.AllocsPerRun(200, func() {
		fx := h.g.Complete(Ref(next), 1, Result{Output: int64(7)}, h.now)
		if len(fx) != 1 || fx[0].Kind != Dispatch || fx[0].Input != int64(7) {
			t.Fatalf("effects %v", fx)
		}
		next++
	})
	if allocs != 0 {
		t.Errorf("Complete allocates %v times per call", allocs)
	}
}

func TestExecutionID(t *testing.T) {
	p := mustPlan(t, newWorkflow(tasks(newTask("probe"), newTask("a"))), Options{})
	n, _ := p.Lookup("probe")
	if got := ExecutionID("inst", p, TaskRef{Node: n, Index: 3}, 2); got != "inst/probe[3]#2" {
		t.Errorf("got %q", got)
	}
	if got := ExecutionID("inst", p, Ref(n), 1); got != "inst/probe#1" {
		t.Errorf("got %q", got)
	}
}

func TestStateAndKindStrings(t *testing.T) {
	if Gathering.String() != "GATHERING" || State(42).String() != "State(42)" || TaskSpreading.String() != "spreading" ||
		Dispatch.String() != "dispatch" || Timeout.String() != "timeout" {
		t.Error("String methods")
	}
}

// One event may spend MaxStepCost CEL units in all: a spread whose with runs
// CEL on every element fails its instances once the event's budget is
// spent, instead of holding the runloop (and every other instance) for the
// sum of their costs. Resume re-evaluates without being charged.
func TestStepCostBudget(t *testing.T) {
	wf := newWorkflow(
		input("n", robonetv1.ValueType_VALUE_TYPE_INT, true, ""),
		tasks(newTask("s", spreadOver("lists.range(20).filter(i, i < inputs.n)"), onFailure(policySkip),
			with(ex("lists.range(1000).all(y, y + item >= 0)"))), // ~6,000 units each
		))
	h := newHarness(t, wf, Options{MaxStepCost: 50_000})
	fx := h.start(map[string]any{"n": int64(20)})
	dispatched := 0
	for _, f := range fx {
		if strings.HasPrefix(f, "dispatch ") {
			dispatched++
		}
	}
	if dispatched < 5 || dispatched > 9 {
		t.Fatalf("%d of 20 instances dispatched under a 50,000-unit budget, want about 8:\n%s", dispatched, strings.Join(fx, "\n"))
	}
	info := h.g.Task(TaskRef{Node: h.ref("s", -1).Node, Index: 19})
	if info.Status != TaskFailed || !strings.Contains(info.Error, "the expressions of one event of this instance cost more than 50000 units, the limit") {
		t.Fatalf("s[19] = %+v, want the step budget named", info)
	}

	// Under the default policy the first failed instance fails the
	// workflow; the instances after it are never dispatched, and the
	// snapshot of the failed instance still restores.
	strict := newWorkflow(input("n", robonetv1.ValueType_VALUE_TYPE_INT, true, ""),
		tasks(newTask("s", spreadOver("lists.range(20).filter(i, i < inputs.n)"), with(ex("lists.range(1000).all(y, y + item >= 0)")))))
	h = newHarness(t, strict, Options{MaxStepCost: 50_000})
	h.start(map[string]any{"n": int64(20)})
	h.state(Failed)
	if info := h.g.Task(TaskRef{Node: h.ref("s", -1).Node, Index: 19}); info.Status != TaskCancelled {
		t.Fatalf("s[19] = %+v, want cancelled (never dispatched)", info)
	}
	snap, err := h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.Restore("inst", snap); err != nil {
		t.Fatalf("restoring a workflow that failed mid-spread: %v", err)
	}

	// With the default budget all 20 run; a restored copy resumes all of
	// them though that costs more than a 50,000-unit budget.
	h = newHarness(t, wf, Options{})
	h.start(map[string]any{"n": int64(20)})
	snap, err = h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tight := mustPlan(t, wf, Options{MaxStepCost: 50_000})
	g, err := tight.Restore("inst", snap)
	if err != nil {
		t.Fatal(err)
	}
	if fx := formatEffects(tight, g.Resume(h.now)); len(fx) != 20 {
		t.Fatalf("Resume re-dispatched %d of 20:\n%s", len(fx), strings.Join(fx, "\n"))
	}
}
