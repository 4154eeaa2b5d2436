package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// testHydrateLatestResultPerExecution: a claim returns the snapshot and,
// per execution, the result of its highest attempt, ordered by execution id
// in byte order.
func testHydrateLatestResultPerExecution(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{
		result(id, "probe[3]", 1, false),
		result(id, "b", 1, true),
		result(id, "probe[10]", 1, true),
	}})
	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("snap-1"), Results: []port.ActionResult{
		result(id, "probe[3]", 3, true), // attempts need not arrive in order
		result(id, "probe[3]", 2, false),
		result(id, "a", 1, true),
	}})
	if err := s.ReleaseLeases(ctx(t), a.id, []uuid.UUID{id}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}

	got := newOwner(1).mustClaim(t, s, longLease, id)[0]
	if string(got.State) != "snap-1" {
		t.Fatalf("hydrated state %q, want snap-1", got.State)
	}
	checkResults(t, "hydrated results", got.Results, []port.ActionResult{
		result(id, "a", 1, true),
		result(id, "b", 1, true),
		result(id, "probe[10]", 1, true),
		result(id, "probe[3]", 3, true),
	})
}

// testProgressResultsInOrder: results are recorded in the order given,
// across entries and batches.
func testProgressResultsInOrder(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	x, y := ids[0], ids[1]
	out, err := s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: x, Owner: a.id, Results: []port.ActionResult{result(x, "t2", 1, false), result(x, "t1", 1, true)}},
		{InstanceID: y, Owner: a.id, Results: []port.ActionResult{result(y, "t1", 1, true)}},
	})
	if err != nil || len(out) != 2 || out[0] != nil || out[1] != nil {
		t.Fatalf("PersistProgress = %v, %v; want two nil outcomes", out, err)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: x, Results: []port.ActionResult{result(x, "t2", 2, true), result(x, "t0", 1, true)}})

	checkResults(t, "history of x", history(t, s, x), []port.ActionResult{
		result(x, "t2", 1, false), result(x, "t1", 1, true), result(x, "t2", 2, true), result(x, "t0", 1, true),
	})
	checkResults(t, "history of y", history(t, s, y), []port.ActionResult{result(y, "t1", 1, true)})
}

// testProgressDuplicateResultIgnored: a result is recorded once per
// (execution, attempt); a replay, even with another payload, is ignored.
func testProgressDuplicateResultIgnored(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	first := result(id, "t", 1, true)
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{first}})

	replay := first
	replay.Output = []byte(`"a different output"`)
	replay.WorkerID = "worker-2"
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{replay, replay, result(id, "t", 2, true)}})

	checkResults(t, "history", history(t, s, id), []port.ActionResult{first, result(id, "t", 2, true)})
}

// testProgressStateAndSchedule: a given snapshot replaces the stored one, a
// nil one leaves it; a given schedule moves the due time.
func testProgressStateAndSchedule(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)

	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("s1")})
	if rec := get(t, s, id); string(rec.State) != "s1" {
		t.Fatalf("state = %q, want s1", rec.State)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{result(id, "t", 1, true)}})
	if rec := get(t, s, id); string(rec.State) != "s1" {
		t.Fatalf("progress without a snapshot changed the state to %q", rec.State)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte{}})
	if rec := get(t, s, id); len(rec.State) != 0 {
		t.Fatalf("an empty snapshot left state %q", rec.State)
	}

	// Not due for an hour: released, nobody claims it.
	later := time.Now().Add(time.Hour)
	a.mustPersist(t, s, port.Progress{InstanceID: id, ScheduledAt: &later})
	if err := s.ReleaseLeases(ctx(t), a.id, []uuid.UUID{id}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	newOwner(1).mustClaim(t, s, longLease)
	newOwner(2).mustClaim(t, s, longLease) // not even a newer term: it is not due

	// An owner moves the schedule; a time in the past is due at once.
	b := newOwner(3)
	if err := s.RequestCancel(ctx(t), id); err != nil { // makes it due now
		t.Fatalf("RequestCancel: %v", err)
	}
	b.mustClaim(t, s, longLease, id)
	due := time.Now().Add(-time.Second)
	b.mustPersist(t, s, port.Progress{InstanceID: id, ScheduledAt: &later})
	b.mustPersist(t, s, port.Progress{InstanceID: id, ScheduledAt: &due})
	if err := s.ReleaseLeases(ctx(t), b.id, []uuid.UUID{id}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	newOwner(3).mustClaim(t, s, longLease, id)
}

// testProgressSameInstanceTwiceInBatch: a batch may name an instance more
// than once; it is applied as if the entries came in order.
func testProgressSameInstanceTwiceInBatch(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	out, err := s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: id, Owner: a.id, State: []byte("first"), Results: []port.ActionResult{result(id, "t1", 1, true)}},
		{InstanceID: id, Owner: a.id, State: []byte("second"), Results: []port.ActionResult{result(id, "t2", 1, true)}},
		{InstanceID: id, Owner: a.id},
	})
	if err != nil || len(out) != 3 || out[0] != nil || out[1] != nil || out[2] != nil {
		t.Fatalf("PersistProgress = %v, %v; want three nil outcomes", out, err)
	}
	if rec := get(t, s, id); string(rec.State) != "second" {
		t.Fatalf("state = %q, want the last snapshot", rec.State)
	}
	checkResults(t, "history", history(t, s, id), []port.ActionResult{result(id, "t1", 1, true), result(id, "t2", 1, true)})
}

// testProgressTwoOwners: one batch may carry instances of two owners, each
// checked against its own lease.
func testProgressTwoOwners(t *testing.T, s port.Store) {
	a, b := newOwner(1), newOwner(1)
	first := queueN(t, s, 1)[0]
	a.mustClaim(t, s, longLease, first)
	second := queueN(t, s, 1)[0]
	b.mustClaim(t, s, longLease, second)
	out, err := s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: first, Owner: a.id, Results: []port.ActionResult{result(first, "t", 1, true)}},
		{InstanceID: second, Owner: b.id, Results: []port.ActionResult{result(second, "t", 1, true)}},
	})
	if err != nil || len(out) != 2 || out[0] != nil || out[1] != nil {
		t.Fatalf("PersistProgress of two owners' instances = %v, %v; want both written", out, err)
	}
	out, err = s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: first, Owner: b.id, Results: []port.ActionResult{result(first, "t", 2, true)}},
		{InstanceID: second, Owner: a.id, Results: []port.ActionResult{result(second, "t", 2, true)}},
	})
	if err != nil || len(out) != 2 {
		t.Fatalf("PersistProgress with the owners swapped = %v, %v", out, err)
	}
	wantErr(t, "progress of a's instance by b", out[0], port.ErrOwnershipLost)
	wantErr(t, "progress of b's instance by a", out[1], port.ErrOwnershipLost)
	if len(history(t, s, first)) != 1 || len(history(t, s, second)) != 1 {
		t.Fatalf("histories %v and %v, want one result each", keys(history(t, s, first)), keys(history(t, s, second)))
	}
}

// testProgressStaleOwnerRefused: after a takeover the old owner's progress
// is refused, none of it (results, snapshot, schedule) is written, and the
// rest of its batch is unaffected.
func testProgressStaleOwnerRefused(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	lost, kept := ids[0], ids[1]
	old := newOwner(1)
	old.mustClaim(t, s, longLease, ids...)
	// A newer term takes one of them.
	next := newOwner(2)
	if got := next.claim(t, s, longLease, 1); len(got) != 1 {
		t.Fatalf("the newer term claimed %d instances, want 1", len(got))
	} else if got[0].ID != lost {
		lost, kept = kept, lost
	}
	before := get(t, s, lost)

	later := time.Now().Add(time.Hour)
	out, err := s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: lost, Owner: old.id, State: []byte("stale"), ScheduledAt: &later, Results: []port.ActionResult{result(lost, "t", 1, true)}},
		{InstanceID: kept, Owner: old.id, State: []byte("kept"), Results: []port.ActionResult{result(kept, "t", 1, true)}},
	})
	if err != nil || len(out) != 2 {
		t.Fatalf("PersistProgress = %v, %v", out, err)
	}
	wantErr(t, "progress of the lost instance", out[0], port.ErrOwnershipLost)
	if out[1] != nil {
		t.Fatalf("progress of the still-owned instance: %v", out[1])
	}

	if h := history(t, s, lost); len(h) != 0 {
		t.Fatalf("the refused results were recorded: %v", keys(h))
	}
	if rec := get(t, s, lost); !bytes.Equal(rec.State, before.State) {
		t.Fatalf("the refused snapshot was written: %q", rec.State)
	}
	if rec := get(t, s, kept); string(rec.State) != "kept" || len(history(t, s, kept)) != 1 {
		t.Fatalf("the owned instance was not written: state %q", rec.State)
	}
	// The refused schedule was not written either: after the new owner
	// releases it, the instance is still due. (A claimer of term 2 also
	// takes over the term-1 lease on the other instance.)
	if err := s.ReleaseLeases(ctx(t), next.id, []uuid.UUID{lost}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	newOwner(2).mustClaim(t, s, longLease, lost, kept)
}

// testProgressExpiredLeaseRefused: an expired lease refuses writes even
// when nobody took the instance over.
func testProgressExpiredLeaseRefused(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, shortLease, id)
	deadline := time.Now().Add(waitLimit)
	for {
		err := a.persist(t, s, port.Progress{InstanceID: id, State: []byte("late"), Results: []port.ActionResult{result(id, "t", 1, true)}})
		if err != nil {
			wantErr(t, "progress after the lease lapsed", err, port.ErrOwnershipLost)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress still accepted %s after a %s lease", waitLimit, shortLease)
		}
		// Accepted while the lease lived; undo nothing, keep polling.
		time.Sleep(10 * time.Millisecond)
	}
	// Whatever was written while the lease lived is one result, never two.
	if h := history(t, s, id); len(h) > 1 {
		t.Fatalf("a replayed result was recorded twice: %v", keys(h))
	}
}

// testComplete: completion records the outcome, keeps it readable, and
// takes the instance out of the queue.
func testComplete(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	ok, failed := ids[0], ids[1]

	if err := a.complete(t, s, port.Completion{InstanceID: ok, Status: port.StateComplete,
		Output: []byte(`{"report":1}`), State: []byte("final"), Results: []port.ActionResult{result(ok, "last", 1, true)}}); err != nil {
		t.Fatalf("completing: %v", err)
	}
	if err := a.complete(t, s, port.Completion{InstanceID: failed, Status: port.StateFailed, Error: "task t failed"}); err != nil {
		t.Fatalf("failing: %v", err)
	}

	rec := get(t, s, ok)
	if rec.Status != port.StateComplete || string(rec.Output) != `{"report":1}` || string(rec.State) != "final" ||
		rec.FinishedAt == nil || rec.StartedAt == nil || rec.Error != "" {
		t.Fatalf("completed instance: %+v", rec)
	}
	checkResults(t, "final results", history(t, s, ok), []port.ActionResult{result(ok, "last", 1, true)})
	rec = get(t, s, failed)
	if rec.Status != port.StateFailed || rec.Error != "task t failed" || rec.Output != nil || rec.FinishedAt == nil ||
		!bytes.HasPrefix(rec.State, []byte("state0:")) {
		t.Fatalf("failed instance: %+v", rec)
	}

	// Out of the queue: nobody claims them, not even a newer term; the
	// lease is gone; a second completion with another outcome is refused
	// (testCompleteReplayed: with the same one, it is a replay).
	newOwner(9).mustClaim(t, s, longLease)
	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: ids})
	if err != nil || !sameIDs(st.Lost, ids) {
		t.Fatalf("RefreshLeases after completion = %+v, %v; want both lost", st, err)
	}
	err = a.complete(t, s, port.Completion{InstanceID: ok, Status: port.StateFailed, Error: "again"})
	wantErr(t, "completing twice", err, port.ErrOwnershipLost)
	if rec := get(t, s, ok); rec.Status != port.StateComplete {
		t.Fatalf("second completion changed the status to %s", rec.Status)
	}

	// A non-terminal status is a caller error.
	if _, err := s.CompleteInstances(ctx(t), []port.Completion{{InstanceID: ok, Owner: a.id, Status: port.StateRunning}}); err == nil {
		t.Fatalf("completing with status running was accepted")
	}
}

// testCompleteStaleOwnerRefused: a deposed owner cannot complete; nothing
// of its completion is written.
func testCompleteStaleOwnerRefused(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	old, next := newOwner(1), newOwner(2)
	old.mustClaim(t, s, longLease, id)
	next.mustClaim(t, s, longLease, id)
	err := old.complete(t, s, port.Completion{InstanceID: id, Status: port.StateComplete, Output: []byte("1"),
		State: []byte("stale"), Results: []port.ActionResult{result(id, "t", 1, true)}})
	wantErr(t, "completion by the deposed owner", err, port.ErrOwnershipLost)
	rec := get(t, s, id)
	if rec.Status != port.StateRunning || rec.Output != nil || rec.FinishedAt != nil || string(rec.State) == "stale" {
		t.Fatalf("the refused completion was written: %+v", rec)
	}
	if h := history(t, s, id); len(h) != 0 {
		t.Fatalf("the refused results were recorded: %v", keys(h))
	}
	// The new owner still holds it and can complete it.
	if err := next.complete(t, s, port.Completion{InstanceID: id, Status: port.StateCancelled, Error: "cancelled"}); err != nil {
		t.Fatalf("completion by the new owner: %v", err)
	}
	if rec := get(t, s, id); rec.Status != port.StateCancelled {
		t.Fatalf("status %s, want cancelled", rec.Status)
	}
}

// testCompleteReplayed: a completion sent again after it committed (its
// acknowledgement lost in a failover) counts as written and changes
// nothing; one with another status is still refused.
func testCompleteReplayed(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	done, live := ids[0], ids[1]
	first := port.Completion{InstanceID: done, Status: port.StateComplete, Output: []byte(`{"v":1}`), State: []byte("final"),
		Results: []port.ActionResult{result(done, "t", 1, true)}}
	if err := a.complete(t, s, first); err != nil {
		t.Fatalf("completing: %v", err)
	}
	before := get(t, s, done)

	// The same call again, beside an instance still held: both written.
	out, err := s.CompleteInstances(ctx(t), []port.Completion{
		{InstanceID: done, Owner: a.id, Status: first.Status, Output: first.Output, State: first.State, Results: first.Results},
		{InstanceID: live, Owner: a.id, Status: port.StateCancelled, Error: "cancelled"},
	})
	if err != nil {
		t.Fatalf("CompleteInstances replaying a completion: %v", err)
	}
	if len(out) != 2 || out[0] != nil || out[1] != nil {
		t.Fatalf("outcomes %v, want nil, nil (the replay counts as written)", out)
	}
	after := get(t, s, done)
	if after.Status != before.Status || string(after.Output) != string(before.Output) || !after.FinishedAt.Equal(*before.FinishedAt) {
		t.Fatalf("the replay changed the instance: %+v, was %+v", after, before)
	}
	if h := history(t, s, done); len(h) != 1 {
		t.Fatalf("the replay recorded results again: %v", keys(h))
	}
	if rec := get(t, s, live); rec.Status != port.StateCancelled {
		t.Fatalf("the instance completed beside the replay is %s, want cancelled", rec.Status)
	}

	// Another outcome is not a replay.
	err = a.complete(t, s, port.Completion{InstanceID: done, Status: port.StateFailed, Error: "late"})
	wantErr(t, "completing again with another status", err, port.ErrOwnershipLost)
}

// testProgressGathering: an owner records that an instance reached
// GATHERING; gets, lists and the next owner's claim say so from then on,
// a stale owner cannot record it, and a snapshot in the same progress is
// written with it.
func testProgressGathering(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	id, other := ids[0], ids[1]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	if rec := get(t, s, id); rec.Gathering {
		t.Fatal("a running instance nobody marked says gathering")
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, Gathering: true, State: []byte("g1")})
	rec := get(t, s, id)
	if !rec.Gathering || string(rec.State) != "g1" {
		t.Fatalf("after a gathering progress with a snapshot: gathering %v, state %q", rec.Gathering, rec.State)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("g2")}) // a later progress keeps the mark
	if rec := get(t, s, id); !rec.Gathering || string(rec.State) != "g2" {
		t.Fatalf("a later snapshot: gathering %v, state %q", rec.Gathering, rec.State)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: other, Gathering: true}) // the mark alone
	page, err := s.ListInstances(ctx(t), port.InstanceFilter{Limit: 10})
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	for _, r := range page.Instances {
		if !r.Gathering {
			t.Fatalf("the list shows %s without its gathering mark", r.ID)
		}
	}
	// The next owner hydrates the mark; a deposed owner cannot write it.
	b := newOwner(2)
	for _, c := range b.mustClaim(t, s, longLease, ids...) {
		if !c.Gathering {
			t.Fatalf("the new owner's claim of %s lacks the gathering mark", c.ID)
		}
	}
	// Finished, it is not gathering any more.
	if out, err := s.CompleteInstances(ctx(t), []port.Completion{{InstanceID: id, Owner: b.id, Status: port.StateComplete, Output: []byte(`{}`)}}); err != nil || out[0] != nil {
		t.Fatalf("CompleteInstances: %v %v", out, err)
	}
	if rec := get(t, s, id); rec.Gathering || rec.Status != port.StateComplete {
		t.Fatalf("a completed instance: status %s, gathering %v", rec.Status, rec.Gathering)
	}
	third := queueN(t, s, 1)[0]
	c := newOwner(3)
	c.mustClaim(t, s, longLease, other, third)
	newOwner(4).mustClaim(t, s, longLease, other, third)
	if err := c.persist(t, s, port.Progress{InstanceID: third, Gathering: true}); !errors.Is(err, port.ErrOwnershipLost) {
		t.Fatalf("a deposed owner's gathering mark = %v, want ErrOwnershipLost", err)
	}
	if get(t, s, third).Gathering {
		t.Fatal("a deposed owner's gathering mark was written")
	}
}
