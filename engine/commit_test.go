package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
)

const singleSpec = `
name: single
version: 1
inputs:
  n: {type: int}
tasks:
  only: {capability: test.cap, action: echo, with: {n: "${{ inputs.n }}"}}
outputs:
  n: ${{ tasks.only.output.n }}
`

func TestGroupCommit(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) {
		c.FlushInterval = time.Minute // the fake clock decides when it passes
		c.FlushMaxRows = 1000
	})
	const n = 200
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = h.submit(e, chainSpec, map[string]any{"x": i})
	}
	ds := h.disp.take(t, n)
	// Starting an instance writes nothing: what was stored at submission
	// and the results replay it.
	if rows := e.PendingRows(); rows != 0 {
		t.Fatalf("%d rows pending after %d instances started, want none", rows, n)
	}

	// Each step's results wait for the flush interval, then go in one
	// PersistProgress call: a's, then b's (c, the last task, runs; the
	// change to GATHERING writes no snapshot either).
	persist0, complete0, _ := h.store.counts()
	for step := range 2 {
		for _, d := range ds {
			echo(e, d)
		}
		waitUntil(t, "the step's results to be pending", func() bool { return e.PendingRows() == n })
		ds = h.disp.take(t, n) // the next tasks go out before the results are written
		h.clock.AdvanceToTimer(t, time.Minute)
		// in one call: taken from the queue (no row pending), the call made
		waitUntil(t, "the step's results to be written", func() bool {
			persist, _, _ := h.store.counts()
			return e.PendingRows() == 0 && persist >= persist0+step+1
		})
		if persist, _, _ := h.store.counts(); persist != persist0+step+1 {
			t.Fatalf("step %d: %d PersistProgress calls, want %d", step+1, persist-persist0, step+1)
		}
	}

	// Every instance completes at once: results and completions go in one
	// CompleteInstances call (each completion carries its result).
	for _, d := range ds {
		echo(e, d)
	}
	waitUntil(t, "the results and completions to be pending", func() bool { return e.PendingRows() == 2*n })
	h.clock.AdvanceToTimer(t, time.Minute)
	for _, id := range ids {
		if v := h.wait(e, id); v.State != port.StateComplete {
			t.Fatalf("instance ended %s", v.State)
		}
	}
	persist, complete, _ := h.store.counts()
	if persist != persist0+2 || complete != complete0+1 {
		t.Fatalf("%d PersistProgress and %d CompleteInstances calls for %d completions, want 0 and 1",
			persist-persist0-2, complete-complete0, n)
	}
	for _, id := range ids {
		if hist := h.history(id); len(hist) != 3 || !hist[0].OK || !hist[1].OK || !hist[2].OK {
			t.Fatalf("history of %s: %+v", id, hist)
		}
	}
}

func TestGroupCommitMaxRows(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) {
		c.FlushInterval = time.Hour // never reached: the row bound triggers
		c.FlushMaxRows = 50
	})
	const n = 70
	for i := range n {
		h.submit(e, chainSpec, map[string]any{"x": i})
	}
	ds := h.disp.take(t, n)
	// 50 results go without waiting for the interval; 20 more wait for it.
	for _, d := range ds[:50] {
		echo(e, d)
	}
	waitUntil(t, "the full batch to be written", func() bool {
		persist, _, _ := h.store.counts()
		return persist == 1 && e.PendingRows() == 0
	})
	for _, d := range ds[50:] {
		echo(e, d)
	}
	waitUntil(t, "the others to be pending", func() bool { return e.PendingRows() == n-50 })
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if persist := h.store.persistCalls; persist != 1 || h.store.progressRows != 50 {
		t.Fatalf("%d rows written in %d calls, want 50 in 1", h.store.progressRows, persist)
	}
}

func TestWideSpreadSnapshotsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10,000-wide spread")
	}
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) { c.EventLogSize = 64 })
	const n = 10_000
	items := make([]any, n)
	for i := range items {
		items[i] = i
	}
	id := h.submit(e, `
name: wide
version: 1
inputs:
  items: {type: list}
tasks:
  prepare: {capability: test.cap, action: echo, with: {items: "${{ inputs.items }}"}}
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
    with: {n: "${{ size(tasks.work.output) }}", last: "${{ tasks.work.output[9999].x }}"}
outputs:
  total: ${{ tasks.total.output }}
`, map[string]any{"items": items})
	echo(e, h.disp.one(t, "prepare", 1))
	for _, d := range h.disp.take(t, n) {
		echo(e, d)
	}
	echo(e, h.disp.one(t, "total", 1))
	v := h.wait(e, id)
	if got := jsonOf(t, v.Outputs); got != `{"total":{"last":9999,"n":10000}}` {
		t.Fatalf("outputs %s", got)
	}
	_, _, total := h.store.counts()
	h.store.mu.Lock()
	largest := h.store.largestState
	h.store.mu.Unlock()
	t.Logf("snapshots: %d bytes in all, the largest %d bytes (%.1f×), %.0f bytes per spread instance",
		total, largest, float64(total)/float64(largest), float64(total)/n)
	// A snapshot per completion would write about n/2 × largest bytes.
	if total > 20*largest {
		t.Fatalf("snapshots wrote %d bytes, %.1f× the largest (%d): not amortised", total, float64(total)/float64(largest), largest)
	}
}

func TestDispatchRetriedUntilAccepted(t *testing.T) {
	h := newHarness(t)
	h.disp.failNext = 2
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	h.clock.AdvanceToTimer(t, time.Second) // first backoff
	h.clock.AdvanceToTimer(t, time.Second) // second backoff
	echo(e, h.disp.one(t, "a", 1))
	echo(e, h.disp.one(t, "b", 1))
	echo(e, h.disp.one(t, "c", 1))
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("ended %s", v.State)
	}
	h.disp.mu.Lock()
	defer h.disp.mu.Unlock()
	if h.disp.calls != 5 {
		t.Fatalf("%d Dispatch calls, want 5 (2 refused, then a, b, c)", h.disp.calls)
	}
}

// A submission by name does not read the store for the latest version
// each time, yet sees a version registered a moment before at once.
func TestSubmitByNameCachesTheLatestVersion(t *testing.T) {
	h := newHarness(t)
	e := h.newEngine(1)
	ctx := ctxOf(t)
	submit := func(want uint32) {
		t.Helper()
		res, err := e.Submit(ctx, engine.SubmitRequest{Name: "chain", Inputs: map[string]any{"x": 1}})
		if err != nil || res.Workflow.Version != want {
			t.Fatalf("Submit by name: %+v, %v; want version %d", res, err, want)
		}
	}
	if _, err := e.Submit(ctx, engine.SubmitRequest{Name: "chain"}); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("Submit of an unregistered name: %v, want ErrNotFound", err)
	}
	if _, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(chainSpec)); err != nil {
		t.Fatal(err)
	}
	lists := h.store.lists()
	for range 5 {
		submit(1)
	}
	if got := h.store.lists() - lists; got != 1 {
		t.Fatalf("five submissions by name listed the versions %d times, want once", got)
	}
	v2 := strings.Replace(chainSpec, "version: 1", "version: 2", 1)
	if _, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(v2)); err != nil {
		t.Fatal(err)
	}
	submit(2) // no waiting for the cache to expire
	lists = h.store.lists()
	h.clock.Advance(time.Second)
	submit(2)
	if got := h.store.lists() - lists; got != 1 {
		t.Fatalf("after a second the cached version was used without reading the store (%d reads)", got)
	}
}

func TestRegisterWorkflow(t *testing.T) {
	h := newHarness(t)
	e := h.newEngine(1) // registration needs no runloop
	ctx := ctxOf(t)
	info, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(chainSpec))
	if err != nil || info.Existing || info.Name != "chain" || info.Version != 1 || info.Tasks != 3 || !strings.HasPrefix(info.IRHash, "sha256:") {
		t.Fatalf("first registration: %+v, %v", info, err)
	}
	again, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(chainSpec+"\n# a comment changes nothing\n"))
	if err != nil || !again.Existing || again.IRHash != info.IRHash {
		t.Fatalf("same definition again: %+v, %v", again, err)
	}
	changed := strings.Replace(chainSpec, "inputs.x + 1", "inputs.x + 2", 1)
	_, err = e.RegisterWorkflow(ctx, "chain.yaml", []byte(changed))
	if !errors.Is(err, port.ErrVersionConflict) || !strings.Contains(err.Error(), info.IRHash) || !strings.Contains(err.Error(), "bump") {
		t.Fatalf("changed definition: %v, want ErrVersionConflict naming both hashes and the fix", err)
	}
	_, err = e.RegisterWorkflow(ctx, "broken.yaml", []byte("name: broken\nversion: 1\ntasks:\n  a: {capability: x, action: echo, needs: [nope]}\n"))
	if list := spec.AsErrorList(err); len(list) == 0 || list[0].File != "broken.yaml" || list[0].Line == 0 {
		t.Fatalf("broken spec: %v, want a positioned spec.ErrorList", err)
	}

	v2 := strings.Replace(changed, "version: 1", "version: 2", 1)
	if _, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(v2)); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	list, err := e.ListWorkflows(ctx, "chain", 0)
	if err != nil || len(list) != 2 || list[0].Version != 2 || list[1].Version != 1 {
		t.Fatalf("ListWorkflows: %+v, %v", list, err)
	}
	// Version 0 submits the latest.
	res, err := e.Submit(ctx, engine.SubmitRequest{Name: "chain", Inputs: map[string]any{"x": 1}})
	if err != nil || res.Workflow.Version != 2 {
		t.Fatalf("Submit of the latest: %+v, %v", res, err)
	}
	res, err = e.Submit(ctx, engine.SubmitRequest{Name: "chain", Version: 1, Inputs: map[string]any{"x": 1}})
	if err != nil || res.Workflow.Version != 1 {
		t.Fatalf("Submit of v1: %+v, %v", res, err)
	}
	// An inline spec that conflicts with a registered version is refused.
	if _, err := e.Submit(ctx, engine.SubmitRequest{Spec: []byte(strings.Replace(changed, "+ 2", "+ 3", 1)), Inputs: map[string]any{"x": 1}}); !errors.Is(err, port.ErrVersionConflict) {
		t.Fatalf("conflicting inline spec: %v", err)
	}
	// Not running: the instances wait in the queue, and the view says so.
	v, err := e.GetInstance(ctx, res.InstanceID)
	if err != nil || v.State != port.StatePending || len(v.Tasks) != 3 || v.Tasks[0].Status != graph.TaskWaiting {
		t.Fatalf("queued instance: %+v, %v", v, err)
	}
	page, err := e.ListInstances(ctx, engine.ListRequest{States: []port.InstanceState{port.StatePending}, Limit: 1})
	if err != nil || len(page.Instances) != 1 || page.NextPageToken == "" {
		t.Fatalf("ListInstances: %+v, %v", page, err)
	}
	if _, err := e.GetInstance(ctx, uuid.New()); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
}

// A result whose sender encoded the output already is stored with that
// encoding; the engine does not encode it again.
func TestResultWithItsEncoding(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, singleSpec, map[string]any{"n": 7})
	d := h.disp.take(t, 1)[0]
	out := map[string]any{"n": int64(7)}
	// Bytes that differ from what the engine would write, to tell them
	// apart in the history (a real sender's are the canonical encoding).
	e.TaskResult(ctxOf(t), port.TaskResult{AttemptKey: d.AttemptKey, OK: true, Output: out, OutputJSON: []byte(`{"n":7} `),
		WorkerID: "w1", StartedAt: time.Unix(1, 0), FinishedAt: time.Unix(2, 0)})
	if v := h.wait(e, id); v.State != port.StateComplete || v.Outputs["n"] != int64(7) {
		t.Fatalf("instance %+v", v)
	}
	if hist := h.history(id); len(hist) != 1 || string(hist[0].Output) != `{"n":7} ` {
		t.Fatalf("history %+v, want the sender's encoding stored", hist)
	}
}

// An attempt's error text comes from whatever ran it. Text a store cannot
// keep (Postgres takes no NUL byte and nothing but UTF-8) is made storable
// on the way in: stored raw, it failed every commit of its batch, and the
// group commit retried it for ever, holding every instance's progress.
func TestErrorTextIsStorable(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		e := h.start(1)
		id := h.submit(e, singleSpec, map[string]any{"n": 1})
		failWith(e, h.disp.take(t, 1)[0], "exit status 1: bad \x00 byte, \xff\xfe not UTF-8")
		v := h.wait(e, id)
		want := "exit status 1: bad \uFFFD byte, \uFFFD not UTF-8"
		if got := task(t, v, "only").Error; got != want {
			t.Fatalf("the task's error is %q, want %q", got, want)
		}
		if hist := h.history(id); len(hist) != 1 || hist[0].Error != want {
			t.Fatalf("history %+v, want the error stored as %q", hist, want)
		}
	})
}
