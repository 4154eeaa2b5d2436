package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// approvalSpec is plan → wait for approve → apply.
const approvalSpec = `
name: approval
version: 1
tasks:
  plan:
    capability: test.cap
    action: plan
  approve:
    needs: plan
    wait: {signal: approve, timeout: 1h}
  apply:
    needs: approve
    capability: test.cap
    action: apply
    with: {by: "${{ tasks.approve.output.by }}"}
outputs:
  approval: ${{ tasks.approve.output }}
`

func (h *harness) signal(e *engine.Engine, id uuid.UUID, name, payload, key string) (engine.SignalResult, error) {
	return e.SignalInstance(ctxOf(h.t), engine.SignalRequest{InstanceID: id, Name: name, Payload: []byte(payload), IdempotencyKey: key})
}

// A signal sent once the wait is reached is taken at once; one sent before
// is kept until the wait takes it. Either way the wait's output is the
// payload, recorded as the attempt's result with the signal marked
// consumed, and the same key twice delivers once.
func TestSignalBeforeAndAfterTheWait(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)

		// After: the wait is running when the signal comes.
		after := h.submit(e, approvalSpec, nil)
		echo(e, h.disp.one(t, "plan", 1))
		waitUntil(t, "approve to wait", func() bool {
			return task(t, getView(t, e, after), "approve").Wait != nil
		})
		if w := task(t, getView(t, e, after), "approve").Wait; w.Signal != "approve" || w.Until.IsZero() {
			t.Fatalf("approve waits %+v, want signal approve with its timeout", w)
		}
		res, err := h.signal(e, after, "approve", `{"by":"ada"}`, "k1")
		if err != nil || !res.Delivered || res.Duplicate {
			t.Fatalf("signal after the wait: %+v, %v; want delivered", res, err)
		}
		dup, err := h.signal(e, after, "approve", `{"by":"bob"}`, "k1")
		if err != nil || !dup.Duplicate || dup.Delivered || dup.Seq != res.Seq {
			t.Fatalf("the same key again: %+v, %v; want the first signal, not delivered again", dup, err)
		}
		apply := h.disp.one(t, "apply", 1)
		if got := jsonOf(t, apply.Input); got != `{"by":"ada"}` {
			t.Fatalf("apply got %s", got)
		}
		echo(e, apply)
		v := h.wait(e, after)
		if v.State != port.StateComplete || jsonOf(t, v.Outputs["approval"]) != `{"by":"ada"}` {
			t.Fatalf("ended %s (%s): %v", v.State, v.Error, v.Outputs)
		}
		if len(v.Signals) != 1 || !v.Signals[0].Consumed || v.Signals[0].By != "approve#1" {
			t.Fatalf("signals %+v, want the one signal consumed by approve#1", v.Signals)
		}
		if _, err := h.signal(e, after, "approve", `{}`, ""); !errors.Is(err, engine.ErrInstanceFinished) {
			t.Fatalf("a signal to a finished instance: %v, want ErrInstanceFinished", err)
		}

		// Before: the signal comes while plan runs.
		before := h.submit(e, approvalSpec, nil)
		plan := h.disp.one(t, "plan", 1)
		if _, err := h.signal(e, before, "aprove", `{}`, ""); !errors.Is(err, engine.ErrUnknownSignal) {
			t.Fatalf("a signal no wait takes: %v, want ErrUnknownSignal", err)
		}
		res, err = h.signal(e, before, "approve", `{"by":"eve"}`, "")
		if err != nil || res.Delivered {
			t.Fatalf("signal before the wait: %+v, %v; want kept, not delivered", res, err)
		}
		echo(e, plan)
		apply = h.disp.one(t, "apply", 1)
		if got := jsonOf(t, apply.Input); got != `{"by":"eve"}` {
			t.Fatalf("apply got %s", got)
		}
		echo(e, apply)
		if v := h.wait(e, before); v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		var approves []port.ActionResult
		for _, r := range h.history(before) {
			if r.ExecutionID == "approve" {
				approves = append(approves, r)
			}
		}
		if len(approves) != 1 || !approves[0].OK || string(approves[0].Output) != `{"by":"eve"}` {
			t.Fatalf("approve recorded %+v, want one result with the payload", approves)
		}
	})
}

// A signal kept before its wait survives a takeover: the next engine
// claims the instance with the signal not consumed and hands it to the
// wait when it is reached.
func TestSignalKeptAcrossTakeover(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		id := h.submit(first, approvalSpec, nil)
		h.disp.one(t, "plan", 1)
		if _, err := h.signal(first, id, "approve", `{"by":"ada"}`, ""); err != nil {
			t.Fatal(err)
		}
		first.Abandon()
		second := h.start(2)
		plan := h.disp.one(t, "plan", 1) // dispatched again by the new owner
		echo(second, plan)
		echo(second, h.disp.one(t, "apply", 1))
		if v := h.wait(second, id); v.State != port.StateComplete || jsonOf(t, v.Outputs["approval"]) != `{"by":"ada"}` {
			t.Fatalf("ended %s (%s): %v", v.State, v.Error, v.Outputs)
		}
	})
}

// An instance that only waits leaves memory after ParkAfter; a signal
// wakes it: it is claimed again and the wait takes the signal.
func TestParkedInstanceWokenBySignal(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ParkAfter = time.Minute })
		// No timeout: parked until a wake. (A due time would be the fake
		// clock's, long past for the store.)
		id := h.submit(e, strings.Replace(approvalSpec, ", timeout: 1h", "", 1), nil)
		echo(e, h.disp.one(t, "plan", 1))
		h.waitResults(id, 1)
		waitUntil(t, "approve to wait", func() bool { return task(t, getView(t, e, id), "approve").Wait != nil })
		h.clock.Advance(time.Minute) // the park check
		waitUntil(t, "the instance to be parked", func() bool { return e.Stats().Parked == 1 && e.Stats().Held == 0 })
		v := getView(t, e, id)
		if v.State != port.StateRunning || task(t, v, "approve").Wait == nil {
			t.Fatalf("the parked instance shows %s, approve %+v", v.State, task(t, v, "approve"))
		}
		res, err := h.signal(e, id, "approve", `{"by":"ada"}`, "")
		if err != nil || res.Delivered {
			t.Fatalf("signal to a parked instance: %+v, %v", res, err)
		}
		apply := h.disp.one(t, "apply", 1)
		if got := jsonOf(t, apply.Input); got != `{"by":"ada"}` {
			t.Fatalf("apply got %s", got)
		}
		echo(e, apply)
		if v := h.wait(e, id); v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		if n := h.disp.countOf("plan"); n != 1 {
			t.Fatalf("plan dispatched %d times, want once (the park and the claim replay it from the record)", n)
		}
	})
}

// A signal wait that times out fails its attempt; the policy decides.
func TestSignalWaitTimesOut(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ParkAfter = -1 })
		id := h.submit(e, approvalSpec, nil)
		echo(e, h.disp.one(t, "plan", 1))
		h.waitResults(id, 1)
		waitUntil(t, "approve to wait", func() bool { return task(t, getView(t, e, id), "approve").Wait != nil })
		h.clock.Advance(time.Hour)
		v := h.wait(e, id)
		if v.State != port.StateFailed || !containsAll(v.Error, "approve", "timed out") {
			t.Fatalf("ended %s: %s; want FAILED by approve's timeout", v.State, v.Error)
		}
	})
}

const coolDownSpec = `
name: cool-down
version: 1
tasks:
  deploy:
    capability: test.cap
    action: deploy
  cool_down:
    needs: deploy
    wait: {for: 2s}
  verify:
    needs: cool_down
    capability: test.cap
    action: verify
`

// A wait for a time survives a leader kill and fires once, at the time
// the first engine set: the next engine restores it from the snapshot.
func TestWaitForAcrossLeaderKill(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		first := h.start(1)
		id := h.submit(first, coolDownSpec, nil)
		echo(first, h.disp.one(t, "deploy", 1))
		h.waitResults(id, 1)
		waitUntil(t, "cool_down to wait", func() bool { return task(t, getView(t, first, id), "cool_down").Wait != nil })
		due := task(t, getView(t, first, id), "cool_down").Wait.Until
		if want := h.clock.Now().Add(2 * time.Second); due.After(want) || due.Before(want.Add(-time.Second)) {
			t.Fatalf("cool_down due at %s, want about %s", due, want)
		}
		h.clock.Advance(time.Second)
		first.Abandon() // the leader dies mid-wait
		second := h.start(2)
		waitUntil(t, "the new engine to hold it", func() bool { return second.Stats().Held == 1 })
		if got := task(t, getView(t, second, id), "cool_down").Wait; got == nil || !got.Until.Equal(due) {
			t.Fatalf("after the takeover cool_down waits %+v, want until %s", got, due)
		}
		h.clock.AdvanceToTimer(t, 5*time.Second)
		verify := h.disp.one(t, "verify", 1)
		if !h.clock.Now().Equal(due) {
			t.Fatalf("the wait ended at %s, want %s", h.clock.Now(), due)
		}
		echo(second, verify)
		if v := h.wait(second, id); v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		n := 0
		for _, r := range h.history(id) {
			if r.ExecutionID == "cool_down" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("cool_down recorded %d times, want once", n)
		}
	})
}

const retryChainSpec = `
name: chain
version: 1
tasks:
  a:
    capability: test.cap
    action: a
  b:
    needs: a
    capability: test.cap
    action: b
    on_failure: abort
  c:
    needs: b
    capability: test.cap
    action: c
  side:
    capability: test.cap
    action: side
outputs:
  c: ${{ tasks.c.output }}
`

// retry runs again the failed task and what follows it, with attempts
// numbered on; completed tasks keep their outputs and are not dispatched.
// --from adds a completed task and its downstream. A live instance is
// refused.
func TestRetryFromTheFailedStep(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, retryChainSpec, nil)
		answer(e, h.disp.one(t, "a", 1), "A")
		echo(e, h.disp.one(t, "side", 1))
		if _, err := e.RetryInstance(ctxOf(t), id, ""); !errors.Is(err, port.ErrInstanceLive) {
			t.Fatalf("retry of a running instance: %v, want ErrInstanceLive", err)
		}
		failWith(e, h.disp.one(t, "b", 1), "boom")
		if v := h.wait(e, id); v.State != port.StateFailed {
			t.Fatalf("ended %s", v.State)
		}

		res, err := e.RetryInstance(ctxOf(t), id, "")
		if err != nil || res.Run != 2 || !slices.Equal(res.Tasks, []string{"b", "c"}) {
			t.Fatalf("retry: %+v, %v; want run 2 of b and c", res, err)
		}
		b := h.disp.one(t, "b", 2)
		if got := jsonOf(t, b.Input); got != "null" && got != "{}" {
			t.Fatalf("b got %s", got)
		}
		echo(e, b)
		answer(e, h.disp.one(t, "c", 1), "C")
		v := h.wait(e, id)
		if v.State != port.StateComplete || v.Run != 2 || jsonOf(t, v.Outputs["c"]) != `"C"` {
			t.Fatalf("ended %s run %d (%s): %v", v.State, v.Run, v.Error, v.Outputs)
		}
		if got := h.attemptsOf(id); !slices.Equal(got, []string{"a#1", "b#1", "b#2", "c#1", "side#1"}) {
			t.Fatalf("recorded attempts %v", got)
		}

		// From a completed task: a completed instance is not retried;
		// fail it again through c to retry from a.
		if _, err := e.RetryInstance(ctxOf(t), id, "a"); !errors.Is(err, port.ErrNotRetryable) {
			t.Fatalf("retry of a completed instance: %v, want ErrNotRetryable", err)
		}
		id2 := h.submit(e, retryChainSpec, map[string]any{})
		answer(e, h.disp.one(t, "a", 1), "A")
		echo(e, h.disp.one(t, "side", 1))
		echo(e, h.disp.one(t, "b", 1))
		h.disp.one(t, "c", 1) // cancelled in flight
		if err := e.CancelInstance(ctxOf(t), id2); err != nil {
			t.Fatal(err)
		}
		h.wait(e, id2)
		if _, err := e.RetryInstance(ctxOf(t), id2, "nope"); !errors.Is(err, port.ErrInvalidArgument) {
			t.Fatalf("retry from an unknown task: %v", err)
		}
		res, err = e.RetryInstance(ctxOf(t), id2, "a")
		if err != nil || !slices.Equal(res.Tasks, []string{"a", "b", "c"}) {
			t.Fatalf("retry --from a: %+v, %v", res, err)
		}
		answer(e, h.disp.one(t, "a", 2), "A2")
		echo(e, h.disp.one(t, "b", 2))
		answer(e, h.disp.one(t, "c", 2), "C2") // c's attempt 1 was cancelled: it numbers on
		if v := h.wait(e, id2); v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
		if n := h.disp.countOf("side"); n != 2 {
			t.Fatalf("side dispatched %d times in all, want once per instance", n)
		}
	})
}

// Pause holds back new attempts while those in flight finish and are
// recorded; resume dispatches them. The instance shows PAUSED meanwhile,
// and a cancel still works.
func TestPauseHoldsBackDispatch(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, retryChainSpec, nil)
		a := h.disp.one(t, "a", 1)
		side := h.disp.one(t, "side", 1)
		if err := e.PauseInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		if v := getView(t, e, id); v.State != port.StatePaused || !v.Paused {
			t.Fatalf("paused instance shows %s", v.State)
		}
		list, err := e.ListInstances(ctxOf(t), engine.ListRequest{States: []port.InstanceState{port.StatePaused}})
		if err != nil || len(list.Instances) != 1 || list.Instances[0].State != port.StatePaused {
			t.Fatalf("list PAUSED: %+v, %v", list, err)
		}
		answer(e, a, "A") // in flight: finishes and is recorded
		echo(e, side)
		h.waitResults(id, 2)
		if n := h.disp.pending(); n != 0 {
			t.Fatalf("%d dispatches while paused", n)
		}
		if err := e.ResumeInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		echo(e, h.disp.one(t, "b", 1))
		if err := e.PauseInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		if err := e.CancelInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		if v := h.wait(e, id); v.State != port.StateCancelled {
			t.Fatalf("cancelled while paused: ended %s", v.State)
		}
		if err := e.PauseInstance(ctxOf(t), id); !errors.Is(err, engine.ErrInstanceFinished) {
			t.Fatalf("pause of a finished instance: %v", err)
		}
	})
}

const onEventSpec = `
name: on-order
version: 1
trigger: {events: [order.created]}
inputs:
  event: {type: any}
tasks:
  receipt:
    capability: test.cap
    action: receipt
    with: {order: "${{ inputs.event.id }}"}
`

// An event starts one instance of each workflow it triggers; the same
// key twice starts one.
func TestEventStartsWorkflowOncePerKey(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		h.registerSpec(e, "on-order.yaml", onEventSpec)
		pub := func(key string) engine.EventResult {
			t.Helper()
			res, err := e.PublishEvent(ctxOf(t), engine.EventRequest{Name: "order.created", Payload: []byte(`{"id":"A-17"}`), IdempotencyKey: key})
			if err != nil || len(res.Started) != 1 || res.Started[0].Workflow != "on-order" {
				t.Fatalf("publish: %+v, %v", res, err)
			}
			return res
		}
		first, again := pub("order-A-17"), pub("order-A-17")
		if again.Started[0].InstanceID != first.Started[0].InstanceID || !again.Started[0].Existing {
			t.Fatalf("the same key started %+v then %+v, want one instance", first, again)
		}
		d := h.disp.one(t, "receipt", 1)
		if got := jsonOf(t, d.Input); got != `{"order":"A-17"}` {
			t.Fatalf("receipt got %s", got)
		}
		if other := pub(""); other.Started[0].InstanceID == first.Started[0].InstanceID {
			t.Fatal("an event without a key started no new instance")
		}
		none, err := e.PublishEvent(ctxOf(t), engine.EventRequest{Name: "order.shipped"})
		if err != nil || len(none.Started) != 0 {
			t.Fatalf("an event nothing listens to: %+v, %v", none, err)
		}
	})
}

// countOf counts the dispatches of an execution, every attempt.
func (d *fakeDispatcher) countOf(exec string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, x := range d.dispatched {
		if x.ExecutionID == exec {
			n++
		}
	}
	return n
}

// attemptsOf lists an instance's recorded attempts as "exec#attempt",
// sorted.
func (h *harness) attemptsOf(id uuid.UUID) []string {
	var out []string
	for _, r := range h.history(id) {
		out = append(out, fmt.Sprintf("%s#%d", r.ExecutionID, r.Attempt))
	}
	slices.Sort(out)
	return out
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Concurrent signals are recorded in one batch and delivered in any
// order: every one reaches a wait, each wait takes one, none is lost in
// memory (no park rescues it here).
func TestConcurrentSignalsEachTaken(t *testing.T) {
	const n = 8
	var spec strings.Builder
	spec.WriteString("name: many-waits\nversion: 1\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&spec, "  w%d:\n    wait: {signal: go}\n", i)
	}
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ParkAfter = -1 })
		id := h.submit(e, spec.String(), nil)
		waitUntil(t, "every wait to start", func() bool {
			for _, tv := range getView(t, e, id).Tasks {
				if tv.Wait == nil {
					return false
				}
			}
			return true
		})
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := h.signal(e, id, "go", fmt.Sprintf(`{"i":%d}`, i), "")
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		v := h.wait(e, id)
		if v.State != port.StateComplete || len(v.Signals) != n {
			t.Fatalf("ended %s with %d signals", v.State, len(v.Signals))
		}
		by := map[string]bool{}
		for _, s := range v.Signals {
			if !s.Consumed || by[s.By] {
				t.Fatalf("signal %+v: each must be taken by a wait of its own", s)
			}
			by[s.By] = true
		}
	})
}

// A timer that comes due while the instance is paused — here the end of a
// wait: {for} — is held: the wait ends on resume, not before, and what
// follows it is dispatched then.
func TestPauseHoldsTimers(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1, func(c *engine.Config) { c.ParkAfter = -1 })
		id := h.submit(e, coolDownSpec, nil)
		echo(e, h.disp.one(t, "deploy", 1))
		waitUntil(t, "cool_down to wait", func() bool { return task(t, getView(t, e, id), "cool_down").Wait != nil })
		if err := e.PauseInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Minute) // the wait's 2 s are long over
		// The shard handles its timer before this read (one goroutine,
		// the timer first once it fired): the wait is held, not ended.
		waitUntil(t, "the due timer to be handled", func() bool { return !h.clock.HasTimerWithin(0) })
		if cd := task(t, getView(t, e, id), "cool_down"); cd.Status != graph.TaskRunning || cd.Wait == nil {
			t.Fatalf("while paused cool_down is %s (%+v): its timer was not held", cd.Status, cd.Wait)
		}
		if n := h.disp.pending(); n != 0 {
			t.Fatalf("%d dispatches while paused", n)
		}
		if err := e.ResumeInstance(ctxOf(t), id); err != nil {
			t.Fatal(err)
		}
		echo(e, h.disp.one(t, "verify", 1))
		if v := h.wait(e, id); v.State != port.StateComplete {
			t.Fatalf("ended %s: %s", v.State, v.Error)
		}
	})
}
