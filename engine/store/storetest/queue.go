package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// testQueueWritesBothRows: a queued instance is readable (runner row) and
// claimable (queue row), with its inputs and initial snapshot.
func testQueueWritesBothRows(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	in := []port.NewInstance{newInstance(wf), newInstance(wf), newInstance(wf)}
	in[2].State = nil // an empty initial snapshot is allowed
	ids := queue(t, s, in...)

	for i, id := range ids {
		rec := get(t, s, id)
		if rec.Status != port.StatePending || rec.WorkflowVersionID != wf.ID || rec.WorkflowName != "wf" ||
			rec.WorkflowVersion != 1 || !bytes.Equal(rec.Inputs, in[i].Inputs) || !bytes.Equal(rec.State, in[i].State) ||
			rec.CreatedAt.IsZero() || rec.StartedAt != nil || rec.FinishedAt != nil || rec.CancelRequested {
			t.Fatalf("instance %d after queueing: %+v", i, rec)
		}
	}

	claimed := newOwner(1).mustClaim(t, s, longLease, ids...)
	for _, c := range claimed {
		i := indexOf(ids, c.ID)
		if c.WorkflowVersionID != wf.ID || !bytes.Equal(c.Inputs, in[i].Inputs) || !bytes.Equal(c.State, in[i].State) ||
			len(c.Results) != 0 || c.CancelRequested || c.CreatedAt.IsZero() {
			t.Fatalf("claimed instance %d: %+v", i, c)
		}
	}
	for _, id := range ids {
		rec := get(t, s, id)
		if rec.Status != port.StateRunning || rec.StartedAt == nil {
			t.Fatalf("instance %s after claim: status %s, started %v; want running with a start time", id, rec.Status, rec.StartedAt)
		}
	}

	if got, err := s.QueueInstances(ctx(t), nil); err != nil || len(got) != 0 {
		t.Fatalf("QueueInstances(nil) = %v, %v; want nothing", got, err)
	}
}

// testQueueUnknownWorkflow: an instance of an unregistered version is
// refused and nothing of its batch is queued.
func testQueueUnknownWorkflow(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	good := newInstance(wf)
	bad := newInstance(port.WorkflowVersion{ID: wf.ID + 1000})
	_, err := s.QueueInstances(ctx(t), []port.NewInstance{good, bad})
	wantErr(t, "queueing an instance of an unknown workflow version", err, port.ErrNotFound)
	_, err = s.GetInstance(ctx(t), good.ID)
	wantErr(t, "the other instance of the failed batch", err, port.ErrNotFound)
}

// testQueueIdempotencyKey: a key names one instance; queueing it again
// (in a later call or later in the same batch) returns that instance.
func testQueueIdempotencyKey(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	first := newInstance(wf)
	first.IdempotencyKey = "order-42"
	queue(t, s, first)

	again := newInstance(wf)
	again.IdempotencyKey = "order-42"
	other := newInstance(wf)
	other.IdempotencyKey = "order-43"
	twin := newInstance(wf)
	twin.IdempotencyKey = "order-43"
	got, err := s.QueueInstances(ctx(t), []port.NewInstance{again, other, twin})
	if err != nil {
		t.Fatalf("QueueInstances: %v", err)
	}
	want := []port.Queued{{ID: first.ID, Existing: true}, {ID: other.ID}, {ID: other.ID, Existing: true}}
	if len(got) != len(want) {
		t.Fatalf("QueueInstances = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("QueueInstances = %+v, want %+v", got, want)
		}
	}
	for _, id := range []uuid.UUID{again.ID, twin.ID} {
		_, err := s.GetInstance(ctx(t), id)
		wantErr(t, "an instance deduplicated by its key", err, port.ErrNotFound)
	}
	if rec := get(t, s, first.ID); rec.IdempotencyKey != "order-42" {
		t.Fatalf("idempotency key read back as %q", rec.IdempotencyKey)
	}
	// Only the two distinct instances are in the queue.
	newOwner(1).mustClaim(t, s, longLease, first.ID, other.ID)
}

// testQueueIdempotencyConflict: a key reused for another workflow version
// fails the call, and nothing of the batch is queued.
func testQueueIdempotencyConflict(t *testing.T, s port.Store) {
	v1 := register(t, s, "wf", 1)
	v2 := register(t, s, "wf", 2)
	first := newInstance(v1)
	first.IdempotencyKey = "k"
	queue(t, s, first)

	bystander := newInstance(v2)
	reuse := newInstance(v2)
	reuse.IdempotencyKey = "k"
	_, err := s.QueueInstances(ctx(t), []port.NewInstance{bystander, reuse})
	wantErr(t, "reusing a key for another version", err, port.ErrIdempotencyConflict)
	_, err = s.GetInstance(ctx(t), bystander.ID)
	wantErr(t, "the other instance of the refused batch", err, port.ErrNotFound)

	// Within one batch too.
	a, b := newInstance(v1), newInstance(v2)
	a.IdempotencyKey, b.IdempotencyKey = "k2", "k2"
	_, err = s.QueueInstances(ctx(t), []port.NewInstance{a, b})
	wantErr(t, "one key for two versions in one batch", err, port.ErrIdempotencyConflict)
	_, err = s.GetInstance(ctx(t), a.ID)
	wantErr(t, "the first instance of the refused batch", err, port.ErrNotFound)
}

// testClaimDueOnly: an instance scheduled in the future is not claimed.
func testClaimDueOnly(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	due := newInstance(wf)
	due.ScheduledAt = time.Now().Add(-time.Minute)
	later := newInstance(wf)
	later.ScheduledAt = time.Now().Add(time.Hour)
	queue(t, s, due, later)
	newOwner(1).mustClaim(t, s, longLease, due.ID)
	newOwner(1).mustClaim(t, s, longLease)
	if rec := get(t, s, later.ID); rec.Status != port.StatePending {
		t.Fatalf("future instance has status %s, want queued", rec.Status)
	}
}

// testClaimLimit: a claim takes at most Limit instances.
func testClaimLimit(t *testing.T, s port.Store) {
	ids := queueN(t, s, 5)
	var all []uuid.UUID
	for i, want := range []int{2, 2, 1, 0} {
		got := newOwner(1).claim(t, s, longLease, 2)
		if len(got) != want {
			t.Fatalf("claim %d took %d instances, want %d", i, len(got), want)
		}
		all = append(all, claimedIDs(got)...)
	}
	if !sameIDs(all, ids) {
		t.Fatalf("claims took %v, want each of %v once", all, ids)
	}
}

// testClaimExclusiveWhileLeaseLives: a live lease is not claimed again by
// another owner of the same term, nor by its own owner.
func testClaimExclusiveWhileLeaseLives(t *testing.T, s port.Store) {
	ids := queueN(t, s, 3)
	a := newOwner(5)
	a.mustClaim(t, s, longLease, ids...)
	newOwner(5).mustClaim(t, s, longLease)
	a.mustClaim(t, s, longLease)
}

// testClaimAfterLeaseExpiry: once a lease lapses another owner claims the
// instance, and the old owner's writes are refused.
func testClaimAfterLeaseExpiry(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a, b := newOwner(1), newOwner(1)
	a.mustClaim(t, s, shortLease, id)
	b.claimEventually(t, s, id)
	err := a.persist(t, s, port.Progress{InstanceID: id, State: []byte("stale")})
	wantErr(t, "progress of the expired owner", err, port.ErrOwnershipLost)
}

// testClaimNewerTermTakesOver: a claimer of a newer term takes a live lease
// of an older term at once; the deposed owner's writes are refused.
func testClaimNewerTermTakesOver(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	old, next := newOwner(3), newOwner(4)
	if first := old.mustClaim(t, s, longLease, id); first[0].HeldBefore {
		t.Fatalf("the first claim of an instance says it was held before")
	}
	got := next.mustClaim(t, s, longLease, id)
	if !got[0].HeldBefore {
		t.Fatalf("the claim that took the instance over does not say it was held before")
	}
	if got[0].LeaseExpiresAt.Before(time.Now().Add(longLease / 2)) {
		t.Fatalf("lease of the new owner ends at %v, want about an hour from now", got[0].LeaseExpiresAt)
	}
	err := old.persist(t, s, port.Progress{InstanceID: id, State: []byte("stale")})
	wantErr(t, "progress of the deposed owner", err, port.ErrOwnershipLost)
	next.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("fresh")})
	if rec := get(t, s, id); string(rec.State) != "fresh" {
		t.Fatalf("state = %q, want the new owner's", rec.State)
	}
}

// testClaimOlderTermCannot: a live lease is safe from claimers of the same
// or an older term.
func testClaimOlderTermCannot(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	newOwner(7).mustClaim(t, s, longLease, id)
	newOwner(6).mustClaim(t, s, longLease)
	newOwner(7).mustClaim(t, s, longLease)
}

func indexOf(ids []uuid.UUID, id uuid.UUID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// testQueueClaimed: a new instance due at once with a Claim is stored
// claimed — running, started, leased to the claim's owner under its term,
// as a claim would leave it — while a later one, one without a Claim and
// one an idempotency key answers are queued as usual. An invalid Claim is
// refused with nothing queued.
func testQueueClaimed(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	o := newOwner(5)
	claim := &port.SubmitClaim{Owner: o.id, Term: o.term, Lease: longLease}
	now, later, plain, keyed := newInstance(wf), newInstance(wf), newInstance(wf), newInstance(wf)
	now.Claim, later.Claim = claim, claim
	later.ScheduledAt = time.Now().Add(time.Hour)
	keyed.IdempotencyKey = "once"

	before := time.Now()
	got, err := s.QueueInstances(ctx(t), []port.NewInstance{now, later, plain, keyed})
	if err != nil {
		t.Fatalf("QueueInstances: %v", err)
	}
	if !got[0].Claimed || got[0].ID != now.ID || got[0].Existing ||
		got[0].CreatedAt.Before(before.Add(-time.Minute)) || got[0].CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("the due instance with a claim: %+v, want it claimed with its creation time (about %v)", got[0], before)
	}
	for i, q := range got[1:] {
		if q.Claimed || !q.CreatedAt.IsZero() || q.Existing {
			t.Fatalf("QueueInstances[%d] = %+v, want queued unclaimed", i+1, q)
		}
	}
	rec := get(t, s, now.ID)
	if rec.Status != port.StateRunning || rec.StartedAt == nil || !rec.CreatedAt.Equal(got[0].CreatedAt) {
		t.Fatalf("the instance stored claimed: status %s, started %v, created %v; want running, started, created %v",
			rec.Status, rec.StartedAt, rec.CreatedAt, got[0].CreatedAt)
	}

	// Its lease is live and the owner's: another claimer of the term
	// takes only the plain and keyed instances, the owner's progress is
	// written, another's is refused.
	newOwner(5).mustClaim(t, s, longLease, plain.ID, keyed.ID)
	o.mustPersist(t, s, port.Progress{InstanceID: now.ID, State: []byte("mine")})
	err = newOwner(5).persist(t, s, port.Progress{InstanceID: now.ID, State: []byte("theirs")})
	wantErr(t, "progress of an owner that did not claim it", err, port.ErrOwnershipLost)

	// The key answers later submissions with its instance, claimed or not.
	again := newInstance(wf)
	again.IdempotencyKey, again.Claim = "once", claim
	got, err = s.QueueInstances(ctx(t), []port.NewInstance{again})
	if err != nil || got[0] != (port.Queued{ID: keyed.ID, Existing: true}) {
		t.Fatalf("a claimed submission under a used key = %+v, %v; want the existing instance, unclaimed", got, err)
	}

	// A newer term takes it over, as after any claim.
	for _, c := range newOwner(6).mustClaim(t, s, longLease, now.ID, plain.ID, keyed.ID) {
		if c.ID == now.ID && (!c.HeldBefore || string(c.State) != "mine") {
			t.Fatalf("taken over: held before %v, state %q; want held before, the owner's state", c.HeldBefore, c.State)
		}
	}

	// The lease is as long as the claim says: a short one lapses.
	short := newInstance(wf)
	short.Claim = &port.SubmitClaim{Owner: o.id, Term: o.term, Lease: shortLease}
	queue(t, s, short)
	newOwner(5).claimEventually(t, s, short.ID)

	for _, bad := range []port.SubmitClaim{{Term: 1, Lease: longLease}, {Owner: o.id, Term: 1}} {
		in := newInstance(wf)
		in.Claim = &bad
		if _, err := s.QueueInstances(ctx(t), []port.NewInstance{in}); err == nil {
			t.Fatalf("a claim %+v was accepted", bad)
		}
		_, err := s.GetInstance(ctx(t), in.ID)
		wantErr(t, "the instance of a refused claim", err, port.ErrNotFound)
	}
}

// testQueueChildInstances: an instance queued with a parent (a child
// workflow's instance) keeps it for life: claims, gets and listings return
// it, stored claimed or not; an instance without one has none. Its
// idempotency key, derived from the parent's attempt, returns it when the
// same child is queued again (a replay after a takeover).
func testQueueChildInstances(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	parent := newInstance(wf)
	queue(t, s, parent)
	first := port.ParentRef{InstanceID: parent.ID, ExecutionID: "scan[2]", Attempt: 3}
	second := port.ParentRef{InstanceID: parent.ID, ExecutionID: "poll#0", Attempt: 1}
	queuedChild := newInstance(wf)
	queuedChild.Parent, queuedChild.IdempotencyKey = &first, "child:"+parent.ID.String()+"/scan[2]#3"
	o := newOwner(1)
	claimedChild := newInstance(wf)
	claimedChild.Parent = &second
	claimedChild.Claim = &port.SubmitClaim{Owner: o.id, Term: o.term, Lease: longLease}
	got, err := s.QueueInstances(ctx(t), []port.NewInstance{queuedChild, claimedChild})
	if err != nil || len(got) != 2 || got[0].Claimed || !got[1].Claimed {
		t.Fatalf("QueueInstances = %+v, %v", got, err)
	}
	same := func(what string, got *port.ParentRef, want *port.ParentRef) {
		t.Helper()
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("%s: parent %+v, want %+v", what, got, want)
		}
	}
	same("the parent's own record", get(t, s, parent.ID).Parent, nil)
	same("the queued child's record", get(t, s, queuedChild.ID).Parent, &first)
	same("the claimed child's record", get(t, s, claimedChild.ID).Parent, &second)
	page, err := s.ListInstances(ctx(t), port.InstanceFilter{})
	if err != nil || len(page.Instances) != 3 {
		t.Fatalf("ListInstances = %+v, %v", page, err)
	}
	for _, rec := range page.Instances {
		switch rec.ID {
		case parent.ID:
			same("the parent listed", rec.Parent, nil)
		case queuedChild.ID:
			same("the queued child listed", rec.Parent, &first)
		case claimedChild.ID:
			same("the claimed child listed", rec.Parent, &second)
		}
	}
	for _, c := range o.mustClaim(t, s, longLease, parent.ID, queuedChild.ID) {
		if c.ID == parent.ID {
			same("the parent claimed", c.Parent, nil)
		} else {
			same("the queued child claimed", c.Parent, &first)
		}
	}

	// The same child again (the engine derives its id from the parent's
	// attempt too): its key answers the instance queued first.
	again := newInstance(wf)
	again.ID, again.Parent, again.IdempotencyKey = queuedChild.ID, &first, queuedChild.IdempotencyKey
	got, err = s.QueueInstances(ctx(t), []port.NewInstance{again})
	if err != nil || len(got) != 1 || got[0].ID != queuedChild.ID || !got[0].Existing {
		t.Fatalf("the same child queued again: %+v, %v", got, err)
	}
}
