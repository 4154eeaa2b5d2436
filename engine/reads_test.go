package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// From the moment the Store has an instance's completion, no read of the
// engine shows it running: a get or a list that comes while the
// completion's write has committed but not yet returned waits for it, and
// then says finished — as the Store already does.
func TestReadsWaitForACompletionBeingWritten(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, singleSpec, map[string]any{"n": 7})
	d := h.disp.one(t, "only", 1)

	h.store.mu.Lock()
	gate := make(chan struct{})
	h.store.completeGate, h.store.completeCommitted = gate, make(chan struct{}, 1)
	h.store.mu.Unlock()
	echo(e, d)
	select {
	case <-h.store.completeCommitted:
	case <-time.After(waitLimit):
		t.Fatal("the completion was not written")
	}
	ctx := ctxOf(t)
	if rec, err := h.store.GetInstance(ctx, id); err != nil || rec.Status != port.StateComplete {
		t.Fatalf("the Store says %v (%v): the gate holds the call after its commit", rec.Status, err)
	}

	type read struct {
		what  string
		state port.InstanceState
		err   error
	}
	reads := make(chan read, 3)
	go func() {
		v, err := e.GetInstance(ctx, id)
		reads <- read{"get", v.State, err}
	}()
	go func() {
		res, err := e.ListInstances(ctx, engine.ListRequest{States: []port.InstanceState{port.StateRunning, port.StateGathering}})
		st := port.StateComplete // absent from the running: finished
		for _, in := range res.Instances {
			if in.ID == id {
				st = in.State
			}
		}
		reads <- read{"list of the running", st, err}
	}()
	go func() {
		res, err := e.ListInstances(ctx, engine.ListRequest{})
		var st port.InstanceState
		for _, in := range res.Instances {
			if in.ID == id {
				st = in.State
			}
		}
		reads <- read{"list of all", st, err}
	}()
	// While the write has not returned, a read either waits or says
	// finished: never running.
	timer := time.NewTimer(100 * time.Millisecond)
	defer timer.Stop()
	early := 0
wait:
	for {
		select {
		case r := <-reads:
			early++
			if r.err != nil || r.state != port.StateComplete {
				t.Fatalf("%s during the write: %s (%v), but the Store says COMPLETE", r.what, r.state, r.err)
			}
		case <-timer.C:
			break wait
		}
	}
	close(gate)
	for range 3 - early {
		select {
		case r := <-reads:
			if r.err != nil || r.state != port.StateComplete {
				t.Fatalf("%s after the write: %s (%v)", r.what, r.state, r.err)
			}
		case <-time.After(waitLimit):
			t.Fatal("a read still waits after the write returned")
		}
	}
}

// A listing filtered by state drops the rows whose held instance has moved
// on, and fills the page from the next rows: a page is short (or empty)
// only at the end, which is where clients stop.
func TestListFillsPagesRowsWereDroppedFrom(t *testing.T) {
	h := newHarness(t)
	e := h.newEngine(1) // not started: submissions stay queued
	var ids []uuid.UUID
	for i := range 6 {
		ids = append(ids, h.submit(e, singleSpec, map[string]any{"n": i}))
	}
	q, err := engine.NewQuery(h.config(1))
	if err != nil {
		t.Fatal(err)
	}
	// The three newest are held and finished (newest first in a listing).
	finished := map[uuid.UUID]bool{ids[5]: true, ids[4]: true, ids[3]: true}
	live := func(id uuid.UUID) (port.InstanceState, bool) {
		if finished[id] {
			return port.StateComplete, true
		}
		return "", false
	}
	res, err := q.ListInstancesLive(ctxOf(t), engine.ListRequest{States: []port.InstanceState{port.StatePending}, Limit: 2}, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 2 || res.Instances[0].ID != ids[2] || res.Instances[1].ID != ids[1] || res.NextPageToken == "" {
		t.Fatalf("first page: %+v (token %q); want the two newest still queued and a token", res.Instances, res.NextPageToken)
	}
	res, err = q.ListInstancesLive(ctxOf(t), engine.ListRequest{States: []port.InstanceState{port.StatePending}, Limit: 2, PageToken: res.NextPageToken}, live)
	if err != nil || len(res.Instances) != 1 || res.Instances[0].ID != ids[0] {
		t.Fatalf("second page: %+v, %v; want the oldest", res.Instances, err)
	}
}

// A get whose live view runs after the completion committed (the get saw
// the instance live, its view was queued on the shard, the write went
// through) answers from the Store: finished, with the outputs — not a
// finished state with none.
func TestGetWhileTheCompletionCommits(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) { c.FlushInterval = time.Minute })
	id := h.submit(e, singleSpec, map[string]any{"n": 7})
	echo(e, h.disp.one(t, "only", 1))
	waitUntil(t, "the result and the completion to be pending", func() bool { return e.PendingRows() == 2 })

	queued, release := e.HoldShard(id)
	t.Cleanup(release) // a failed wait must not leave the shard blocked
	ctx := ctxOf(t)
	type got struct {
		v   engine.InstanceView
		err error
	}
	done := make(chan got, 1)
	go func() {
		v, err := e.GetInstance(ctx, id)
		done <- got{v, err}
	}()
	waitUntil(t, "the get's live view to be queued", func() bool { return queued() == 1 })
	h.clock.AdvanceToTimer(t, time.Minute) // the flusher writes the completion
	// Written, and the shard told (behind the get's view).
	waitUntil(t, "the completion to be written", func() bool { return queued() >= 2 })
	release()
	r := <-done
	if r.err != nil || r.v.State != port.StateComplete || r.v.Outputs["n"] == nil {
		t.Fatalf("get during the commit: %s with outputs %v (%v); want COMPLETE with n", r.v.State, r.v.Outputs, r.err)
	}
}

// A get whose caller gives up while the instance's shard is busy returns
// the caller's error, and the view the shard builds afterwards goes
// nowhere: under -race, a shard that wrote the abandoned call's result
// (as it did) is a data race with that call's return.
func TestGetGivenUpWhileTheShardIsBusy(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, singleSpec, map[string]any{"n": 7})
	h.disp.one(t, "only", 1) // running: the instance stays held

	queued, release := e.HoldShard(id)
	t.Cleanup(release)
	ctx, cancel := context.WithCancel(ctxOf(t))
	done := make(chan error, 1)
	go func() {
		_, err := e.GetInstance(ctx, id)
		done <- err
	}()
	waitUntil(t, "the get's live view to be queued", func() bool { return queued() == 1 })
	cancel()
	release() // not after the get returned: the shard builds the view as it gives up
	// As a rule the get has given up by then; should the shard have been
	// quicker, it has the view.
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("get given up: %v, want context.Canceled", err)
	}
	// A later get still works.
	v, err := e.GetInstance(ctxOf(t), id)
	if err != nil || v.State != port.StateRunning {
		t.Fatalf("get after: %s, %v; want RUNNING", v.State, err)
	}
}
