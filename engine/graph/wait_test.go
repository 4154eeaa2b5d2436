package graph

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// waitTask is a wait task: no capability or action.
func waitTask(name string, w *robonetv1.Wait, opts ...taskOpt) *robonetv1.Task {
	t := &robonetv1.Task{Name: name, Wait: w}
	for _, o := range opts {
		o(t)
	}
	return t
}

func signalWait(name string, timeout time.Duration) *robonetv1.Wait {
	w := &robonetv1.Wait{Signal: name}
	if timeout > 0 {
		w.Timeout = durationpb.New(timeout)
	}
	return w
}

func forWait(d time.Duration) *robonetv1.Wait {
	return &robonetv1.Wait{Duration: durationpb.New(d)}
}

func untilWait(src string) *robonetv1.Wait {
	return &robonetv1.Wait{Until: &robonetv1.Expr{Source: src}, UntilText: "${{ " + src + " }}"}
}

// approval is plan -> approve (a signal wait) -> apply, which reads the
// signal's payload.
func approval(opts ...taskOpt) *robonetv1.Workflow {
	return newWorkflow(tasks(
		newTask("plan", with(lit(`1`))),
		waitTask("approve", signalWait("approve", 48*time.Hour), append([]taskOpt{needs("plan")}, opts...)...),
		newTask("apply", needs("approve"), with(ex("tasks.approve.output"))),
	))
}

// A signal wait is dispatched with no input and its timeout; the runloop
// completes it with the signal's payload, which its dependents read.
func TestWaitSignal(t *testing.T) {
	h := newHarness(t, approval(), Options{})
	n := h.ref("approve", -1).Node
	if sig, kind, ok := h.p.Wait(n); !ok || sig != "approve" || kind != WaitSignal || !h.p.HasWaits() {
		t.Fatalf("Wait(approve) = %q, %s, %v; HasWaits %v", sig, kind, ok, h.p.HasWaits())
	}
	if _, _, ok := h.p.Wait(h.ref("plan", -1).Node); ok {
		t.Fatal("plan is a wait task")
	}
	expect(t, h.start(nil), `dispatch plan#1 1`)
	h.now = t0.Add(time.Second)
	expect(t, h.done("plan", -1, 1, "p"), `dispatch approve#1 null`, `timeout approve#1 @48h0m1s`)
	if info := h.g.Task(h.ref("approve", -1)); info.Status != TaskRunning || !info.Due.Equal(t0.Add(48*time.Hour+time.Second)) {
		t.Fatalf("approve = %+v", info)
	}
	h.restored()
	expect(t, h.done("approve", -1, 1, map[string]any{"by": "ann"}), `dispatch apply#1 {"by":"ann"}`)
	expect(t, h.done("apply", -1, 1, nil), `finished COMPLETE`)
}

// A signal that does not come in time fails the attempt with a clear
// reason; retry and on_failure apply as to any attempt.
func TestWaitSignalTimeout(t *testing.T) {
	h := newHarness(t, approval(retry(2, time.Second, 1, 0, 0), onFailure(policySkip)), Options{})
	h.start(nil)
	expect(t, h.done("plan", -1, 1, "p"), `dispatch approve#1 null`, `timeout approve#1 @48h0m0s`)
	expect(t, h.fire(Timeout, "approve", -1, 1, 48*time.Hour), `cancel approve#1`, `retry approve#1 @48h0m1s`)
	const reason = "timed out waiting for signal approve after 48h0m0s"
	if info := h.g.Task(h.ref("approve", -1)); info.Error != reason {
		t.Fatalf("approve = %+v", info)
	}
	expect(t, h.fire(Retry, "approve", -1, 1, 48*time.Hour+time.Second), `dispatch approve#2 null`, `timeout approve#2 @96h0m1s`)
	expect(t, h.fire(Timeout, "approve", -1, 2, 96*time.Hour+time.Second), `cancel approve#2`, `dispatch apply#1 null`)

	h = newHarness(t, approval(), Options{})
	h.start(nil)
	h.done("plan", -1, 1, "p")
	expect(t, h.fire(Timeout, "approve", -1, 1, 48*time.Hour), `cancel approve#1`, `finished FAILED`)
	if got, want := h.g.Err().Error(), `task "approve" attempt 1 failed, its last (no retry left): `+reason; got != want {
		t.Fatalf("err = %s\nwant  %s", got, want)
	}
	// A signal wait without a timeout waits forever: no timer.
	h = newHarness(t, newWorkflow(tasks(waitTask("w", signalWait("go", 0)))), Options{})
	expect(t, h.start(nil), `dispatch w#1 null`)
}

// A wait for a duration asks for a WaitOver timer; its Fire completes the
// attempt with the due time. Stale WaitOver timers change nothing.
func TestWaitFor(t *testing.T) {
	h := newHarness(t, newWorkflow(
		tasks(newTask("deploy"), waitTask("cool_down", forWait(10*time.Minute), needs("deploy"))),
		output("at", ex("tasks.cool_down.output")),
	), Options{})
	h.start(nil)
	h.now = t0.Add(5 * time.Second)
	expect(t, h.done("deploy", -1, 1, nil), `dispatch cool_down#1 null`, `wait cool_down#1 @10m5s`)
	if _, kind, _ := h.p.Wait(h.ref("cool_down", -1).Node); kind != WaitFor {
		t.Fatalf("kind = %s", kind)
	}
	if info := h.g.Task(h.ref("cool_down", -1)); !info.Due.Equal(t0.Add(10*time.Minute + 5*time.Second)) {
		t.Fatalf("cool_down = %+v", info)
	}
	expect(t, h.fire(WaitOver, "cool_down", -1, 2, 10*time.Minute)) // not in flight
	expect(t, h.fire(Timeout, "cool_down", -1, 1, 10*time.Minute))  // never asked for
	if h.g.Stats().StaleTimers != 2 {
		t.Fatalf("stats = %+v", h.g.Stats())
	}
	expect(t, h.fire(WaitOver, "cool_down", -1, 1, 11*time.Minute), `finished COMPLETE`)
	h.outputs(`{"at":"2026-01-02T03:14:10Z"}`)
	expect(t, h.fire(WaitOver, "cool_down", -1, 1, 11*time.Minute)) // after the end

	// A signal wait ignores WaitOver.
	h = newHarness(t, newWorkflow(tasks(waitTask("w", signalWait("go", 0)))), Options{})
	h.start(nil)
	expect(t, h.fire(WaitOver, "w", -1, 1, time.Hour))
	h.state(Gathering)
}

// A wait until a time evaluates until when the task is ready: a time past
// is due at once, anything but an RFC 3339 time fails the task before its
// first attempt, without retry.
func TestWaitUntil(t *testing.T) {
	wf := func(w *robonetv1.Wait) *robonetv1.Workflow {
		return newWorkflow(
			input("at", robonetv1.ValueType_VALUE_TYPE_ANY, true, ""),
			tasks(waitTask("hold", w, retry(3, time.Second, 1, 0, 0))),
			output("at", ex("tasks.hold.output")),
		)
	}
	h := newHarness(t, wf(untilWait("inputs.at")), Options{})
	if _, kind, _ := h.p.Wait(0); kind != WaitUntil {
		t.Fatalf("kind = %s", kind)
	}
	expect(t, h.start(map[string]any{"at": "2026-01-02T06:04:05.25+02:00"}), `dispatch hold#1 null`, `wait hold#1 @1h0m0.25s`)
	h.restored()
	expect(t, h.fire(WaitOver, "hold", -1, 1, 2*time.Hour), `finished COMPLETE`)
	h.outputs(`{"at":"2026-01-02T04:04:05.25Z"}`)

	h = newHarness(t, wf(untilWait("inputs.at")), Options{})
	h.now = t0.Add(time.Minute)
	expect(t, h.start(map[string]any{"at": "2020-01-01T00:00:00Z"}), `dispatch hold#1 null`, `wait hold#1 @1m0s`)

	h = newHarness(t, wf(&robonetv1.Wait{UntilText: "2026-01-02T03:04:06Z"}), Options{})
	expect(t, h.start(map[string]any{"at": nil}), `dispatch hold#1 null`, `wait hold#1 @1s`)

	for in, reason := range map[any]string{
		"tomorrow":   `wait.until: "tomorrow" is not an RFC 3339 time (e.g. 2026-03-01T09:00:00Z)`,
		"2026-01-02": `wait.until: "2026-01-02" is not an RFC 3339 time`,
		int64(3):     "wait.until: ${{ inputs.at }} must yield an RFC 3339 time, got int",
	} {
		h = newHarness(t, wf(untilWait("inputs.at")), Options{})
		expect(t, h.start(map[string]any{"at": in}), `finished FAILED`)
		if got := h.g.Err().Error(); !strings.HasPrefix(got, `task "hold" failed before its first attempt: `+reason) {
			t.Errorf("%v: err = %s", in, got)
		}
	}
}

// The due time of a wait is in the snapshot: Resume asks for the timer at
// its original time, and a restored graph continues as the first would.
func TestWaitResumeKeepsDueTimes(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		waitTask("cool", forWait(10*time.Minute)),
		waitTask("sign", signalWait("sign", time.Hour)),
		waitTask("open", signalWait("open", 0)),
	)), Options{})
	h.now = t0.Add(3 * time.Second)
	expect(t, h.start(nil), `dispatch cool#1 null`, `wait cool#1 @10m3s`, `dispatch open#1 null`,
		`dispatch sign#1 null`, `timeout sign#1 @1h0m3s`)
	g := h.restored()
	expect(t, formatEffects(h.p, g.Resume(t0.Add(time.Hour))),
		`dispatch cool#1 null`, `wait cool#1 @10m3s`, `dispatch open#1 null`, `dispatch sign#1 null`, `timeout sign#1 @1h0m3s`)
	if info := g.Task(h.ref("cool", -1)); !info.Due.Equal(t0.Add(10*time.Minute + 3*time.Second)) {
		t.Fatalf("cool = %+v", info)
	}
	if info := g.Task(h.ref("open", -1)); !info.Due.IsZero() || info.Status != TaskRunning {
		t.Fatalf("open = %+v", info)
	}
	expect(t, formatEffects(h.p, g.Redispatch(h.ref("cool", -1), 1, t0.Add(time.Hour))), `dispatch cool#1 null`)
}

// The same calls give the same effects and the same snapshot bytes.
func TestWaitDeterministic(t *testing.T) {
	run := func() ([]string, []byte) {
		h := newHarness(t, newWorkflow(
			input("at", robonetv1.ValueType_VALUE_TYPE_STRING, true, ""),
			tasks(
				newTask("a", with(lit(`1`))),
				waitTask("b", untilWait("inputs.at"), needs("a")),
				waitTask("c", signalWait("go", time.Minute), needs("a"), retry(2, time.Second, 2, 0, 0.5)),
				newTask("d", needs("b", "c"), with(ex("[tasks.b.output, tasks.c.output]"))),
			)), Options{})
		h.g.SetAttemptBase(h.ref("c", -1).Node, 4)
		var log []string
		log = append(log, h.start(map[string]any{"at": "2026-01-02T03:05:05Z"})...)
		log = append(log, h.done("a", -1, 1, "x")...)
		log = append(log, h.fire(Timeout, "c", -1, 5, time.Minute)...)
		h.restored()
		log = append(log, formatEffects(h.p, h.g.Resume(h.now))...)
		log = append(log, h.fire(WaitOver, "b", -1, 1, time.Minute)...)
		snap, _ := h.g.Snapshot()
		return log, snap
	}
	log1, snap1 := run()
	log2, snap2 := run()
	if !slices.Equal(log1, log2) || string(snap1) != string(snap2) {
		t.Fatalf("two runs differ:\n%q\n%q", log1, log2)
	}
	if !slices.Contains(log1, `dispatch c#5 null`) || !slices.Contains(log1, `cancel c#5`) {
		t.Fatalf("log = %q", log1)
	}
}

// A plan refuses a wait task that runs something, or whose wait is not
// exactly one of signal, duration and until, and a bad trigger.
func TestWaitPlanErrors(t *testing.T) {
	for name, tk := range map[string]*robonetv1.Task{
		"capability":      newTask("w", func(t *robonetv1.Task) { t.Wait = forWait(time.Second) }),
		"with":            waitTask("w", forWait(time.Second), with(lit(`1`))),
		"spread":          waitTask("w", forWait(time.Second), spreadOver("[1]")),
		"loop":            waitTask("w", forWait(time.Second), func(t *robonetv1.Task) { t.Loop = &robonetv1.Loop{Over: &robonetv1.Expr{Source: "[1]"}} }),
		"on":              waitTask("w", forWait(time.Second), everyNode()),
		"child":           waitTask("w", forWait(time.Second), childOf("c", 0)),
		"accept":          waitTask("w", signalWait("s", 0), func(t *robonetv1.Task) { t.Accept = &robonetv1.Expr{Source: "true"} }),
		"task timeout":    waitTask("w", signalWait("s", 0), timeoutAfter(time.Second)),
		"empty":           waitTask("w", &robonetv1.Wait{}),
		"two kinds":       waitTask("w", &robonetv1.Wait{Signal: "s", Duration: durationpb.New(time.Second)}),
		"timeout for":     waitTask("w", &robonetv1.Wait{Duration: durationpb.New(time.Second), Timeout: durationpb.New(time.Second)}),
		"bad signal":      waitTask("w", signalWait("No!", 0)),
		"zero duration":   waitTask("w", &robonetv1.Wait{Duration: durationpb.New(0)}),
		"bad literal":     waitTask("w", &robonetv1.Wait{UntilText: "soon"}),
		"until reads out": waitTask("w", untilWait("output")),
		"until bad input": waitTask("w", untilWait("inputs.nope")),
		"until far task":  waitTask("w", untilWait("tasks.x.output")),
	} {
		wf := newWorkflow(tasks(tk, newTask("x")))
		if _, err := NewPlan(wf, testEnv, Options{}); err == nil {
			t.Errorf("%s: NewPlan accepted it", name)
		}
	}
	ev := input("event", robonetv1.ValueType_VALUE_TYPE_ANY, true, "")
	trig := func(events ...string) wfOpt {
		return func(w *robonetv1.Workflow) { w.Trigger = &robonetv1.Trigger{Events: events} }
	}
	p := mustPlan(t, newWorkflow(ev, trig("a.b", "c"), tasks(newTask("x"))), Options{})
	if got := p.Trigger(); !slices.Equal(got, []string{"a.b", "c"}) {
		t.Fatalf("Trigger() = %q", got)
	}
	if mustPlan(t, newWorkflow(tasks(newTask("x"))), Options{}).Trigger() != nil {
		t.Fatal("a plan without trigger has one")
	}
	for name, wf := range map[string]*robonetv1.Workflow{
		"no event input": newWorkflow(trig("a"), tasks(newTask("x"))),
		"no events":      newWorkflow(ev, trig(), tasks(newTask("x"))),
		"unsorted":       newWorkflow(ev, trig("b", "a"), tasks(newTask("x"))),
		"duplicate":      newWorkflow(ev, trig("a", "a"), tasks(newTask("x"))),
		"bad name":       newWorkflow(ev, trig("A"), tasks(newTask("x"))),
	} {
		if _, err := NewPlan(wf, testEnv, Options{}); err == nil {
			t.Errorf("%s: NewPlan accepted it", name)
		}
	}
}

// Downstream is the tasks and every task that needs them, directly or not.
func TestDownstream(t *testing.T) {
	for _, join := range []bool{false, true} {
		j := newTask("j", needs("b", "d"))
		if join {
			j.Join = &robonetv1.Join{Min: 1}
		}
		p := mustPlan(t, newWorkflow(tasks(
			newTask("a"), newTask("b", needs("a")), newTask("c", needs("b")), newTask("d", needs("a")), newTask("e"), j,
		)), Options{})
		names := func(nodes []int32) string {
			var s []string
			for _, n := range nodes {
				s = append(s, p.nodeName(n))
			}
			return strings.Join(s, ",")
		}
		n := func(name string) int32 { i, _ := p.Lookup(name); return i }
		for _, tc := range []struct {
			from []int32
			want string
		}{
			{[]int32{n("b")}, "b,c,j"},
			{[]int32{n("a")}, "a,b,c,d,j"},
			{[]int32{n("e"), n("d"), n("d"), -1, 99}, "d,e,j"},
			{nil, ""},
		} {
			if got := names(p.Downstream(tc.from)); got != tc.want {
				t.Errorf("join %v: Downstream(%v) = %s, want %s", join, tc.from, got, tc.want)
			}
		}
	}
}

// An attempt base numbers every execution's attempts from base+1 and
// counts the retry budget from it; the backoff starts again. It is in the
// snapshot; a graph without one snapshots as before.
func TestAttemptBase(t *testing.T) {
	wf := newWorkflow(tasks(
		newTask("a", with(lit(`1`)), retry(2, time.Second, 3, 0, 0)),
		newTask("s", needs("a"), spreadOver("[1, 2]"), with(ex("item"))),
		newTask("l", needs("a"), func(t *robonetv1.Task) { t.Loop = &robonetv1.Loop{Over: &robonetv1.Expr{Source: "[7]"}} }),
	))
	h := newHarness(t, wf, Options{})
	for name, base := range map[string]uint32{"a": 3, "s": 1, "l": 2} {
		h.g.SetAttemptBase(h.ref(name, -1).Node, base)
	}
	if h.g.AttemptBase(h.ref("a", -1).Node) != 3 {
		t.Fatal("AttemptBase(a) != 3")
	}
	expect(t, h.start(nil), `dispatch a#4 1`)
	h.g.SetAttemptBase(h.ref("a", -1).Node, 9) // after Start: ignored
	expect(t, h.failed("a", -1, 4, "x"), `retry a#4 @1s`)
	h.restored()
	if h.g.AttemptBase(h.ref("a", -1).Node) != 3 || h.g.AttemptBase(h.ref("s", -1).Node) != 1 {
		t.Fatal("the restored graph lost its attempt bases")
	}
	expect(t, h.fire(Retry, "a", -1, 4, time.Second), `dispatch a#5 1`)
	expect(t, h.done("a", -1, 5, nil), `dispatch l#0#3 null`, `dispatch s[0]#2 1`, `dispatch s[1]#2 2`)
	if id := ExecutionID("inst", h.p, h.ref("s", 1), 2); id != "inst/s[1]#2" {
		t.Fatalf("ExecutionID = %s", id)
	}

	h = newHarness(t, wf, Options{})
	h.g.SetAttemptBase(h.ref("a", -1).Node, 3)
	h.start(nil)
	h.failed("a", -1, 4, "x")
	h.fire(Retry, "a", -1, 4, time.Second)
	expect(t, h.failed("a", -1, 5, "y"), `finished FAILED`)
	if got := h.g.Err().Error(); got != `task "a" attempt 5 failed, its last (no retry left): y` {
		t.Fatalf("err = %s", got)
	}

	// Base 0 is no base: the bytes are those of a graph without one.
	plain, based := newHarness(t, wf, Options{}), newHarness(t, wf, Options{})
	based.g.SetAttemptBase(0, 0)
	plain.start(nil)
	based.start(nil)
	s1, _ := plain.g.Snapshot()
	s2, _ := based.g.Snapshot()
	if string(s1) != string(s2) {
		t.Fatal("SetAttemptBase(n, 0) changed the snapshot")
	}
}

// A snapshot written before attempt bases (and waits) existed decodes as it
// did: these bytes are a graph of oldSnapshotWorkflow after a's first
// attempt failed (retry at 1s), b waiting.
func TestOldSnapshotDecodes(t *testing.T) {
	// Written by the graph of commit a68c29d: version 1, "inst", "test"
	// v1, 2 tasks, RUNNING, inputs {}; a retrying (attempt 1, due),
	// b waiting; one error, a's "x".
	const old = "01" + "04696e7374" + "0474657374" + "01" + "02" + "01" + "027b7d" +
		"02" + "01" + "80f08783cbbce58631" + "00" + "00" + "00" + "00" + "01" + "00" + "01" + "0178"
	snap, err := hex.DecodeString(old)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, oldSnapshotWorkflow(), Options{})
	h.start(nil)
	h.failed("a", -1, 1, "x")
	now, _ := h.g.Snapshot()
	if got := hex.EncodeToString(now); got != old {
		t.Fatalf("snapshot = %s\n     want %s", got, old)
	}
	g, err := h.p.Restore("inst", snap)
	if err != nil {
		t.Fatal(err)
	}
	if g.AttemptBase(0) != 0 || g.Task(h.ref("a", -1)).Status != TaskRetrying {
		t.Fatalf("restored: base %d, a %+v", g.AttemptBase(0), g.Task(h.ref("a", -1)))
	}
	// Unknown and out-of-order sections are refused.
	for _, tail := range []string{"02", "0101", "010100", "01010000", "010300050105", "010200050005", "0101000501"} {
		bad, _ := hex.DecodeString(old + tail)
		if _, err := h.p.Restore("inst", bad); err == nil {
			t.Errorf("tail %s accepted", tail)
		}
	}
	based, _ := hex.DecodeString(old + "01" + "01" + "00" + "05")
	g, err = h.p.Restore("inst", based)
	if err != nil || g.AttemptBase(0) != 5 {
		t.Fatalf("restore with a base: %v", err)
	}
}

func oldSnapshotWorkflow() *robonetv1.Workflow {
	return newWorkflow(tasks(
		newTask("a", retry(2, time.Second, 1, 0, 0)),
		newTask("b", needs("a")),
	))
}
