package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// Partitions: a fence makes a runloop the owner of a partition at an
// epoch; from then on every write of another runloop on the partition's
// instances is refused, its live leases included, and only the owner
// claims there.

// partitionCount is the mesh's partition count in these tests.
const partitionCount = 8

// newInstanceIn is a due instance of wf in partition p.
func newInstanceIn(wf port.WorkflowVersion, p int) port.NewInstance {
	in := newInstance(wf)
	in.ID = port.NewIDIn(p, partitionCount)
	in.Inputs = []byte(`{"id":"` + in.ID.String() + `"}`)
	in.Partition = p
	return in
}

// queueIn queues one due instance in each of parts and returns their ids,
// in the order of parts.
func queueIn(t *testing.T, s port.Store, parts ...int) []uuid.UUID {
	t.Helper()
	wf := register(t, s, "wf", 1)
	in := make([]port.NewInstance, len(parts))
	for i, p := range parts {
		in[i] = newInstanceIn(wf, p)
	}
	return queue(t, s, in...)
}

// claimIn claims every due instance of parts (nil: every partition) for o
// and checks that exactly want were claimed.
func (o owner) claimIn(t *testing.T, s port.Store, parts []int, want ...uuid.UUID) []port.ClaimedInstance {
	t.Helper()
	got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: o.id, Term: o.term, Lease: longLease, Limit: 1000, Partitions: parts})
	if err != nil {
		t.Fatalf("ClaimInstances(owner %s, term %d, partitions %v): %v", o.id, o.term, parts, err)
	}
	if !sameIDs(claimedIDs(got), want) {
		t.Fatalf("owner %s (term %d) claimed %v in partitions %v, want %v", o.id, o.term, claimedIDs(got), parts, want)
	}
	return got
}

// fence fences partitions for o at their epochs and returns the error.
func (o owner) fence(t *testing.T, s port.Store, epochs map[int]uint64) error {
	t.Helper()
	return s.FencePartitions(t.Context(), port.FenceRequest{Owner: o.id, Epochs: epochs})
}

// mustFence fences and requires success.
func (o owner) mustFence(t *testing.T, s port.Store, epochs map[int]uint64) {
	t.Helper()
	if err := o.fence(t, s, epochs); err != nil {
		t.Fatalf("FencePartitions(%s, %v): %v", o.id, epochs, err)
	}
}

// partitions reads the fenced partitions.
func partitions(t *testing.T, s port.Store) []port.PartitionOwner {
	t.Helper()
	got, err := s.Partitions(t.Context())
	if err != nil {
		t.Fatalf("Partitions: %v", err)
	}
	return got
}

// checkPartitions compares the fenced partitions (owner and epoch, in
// partition order) with want.
func checkPartitions(t *testing.T, what string, got []port.PartitionOwner, want ...port.PartitionOwner) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Partition == want[i].Partition && got[i].Owner == want[i].Owner && got[i].Epoch == want[i].Epoch
	}
	if !ok {
		t.Fatalf("%s: partitions %+v, want %+v", what, got, want)
	}
}

// testFenceMonotonic: a partition is taken only at a higher epoch, or at
// its own epoch by its own owner (a retry, which changes nothing); any
// other fence fails with ErrStaleEpoch, and a call with one stale
// partition changes none of its partitions.
func testFenceMonotonic(t *testing.T, s port.Store) {
	const p, q = 3, 5
	a, b := newOwner(1), newOwner(1)
	if got := partitions(t, s); len(got) != 0 {
		t.Fatalf("a new store has fenced partitions: %+v", got)
	}
	before := time.Now()
	a.mustFence(t, s, map[int]uint64{p: 5})
	first := partitions(t, s)
	checkPartitions(t, "after a's fence at 5", first, port.PartitionOwner{Partition: p, Owner: a.id, Epoch: 5})
	if f := first[0].FencedAt; f.Before(before.Add(-time.Minute)) || f.After(time.Now().Add(time.Minute)) {
		t.Fatalf("fenced at %v, want about %v", f, before)
	}

	a.mustFence(t, s, map[int]uint64{p: 5}) // a retry
	if again := partitions(t, s); len(again) != 1 || again[0].Owner != a.id || again[0].Epoch != 5 || !again[0].FencedAt.Equal(first[0].FencedAt) {
		t.Fatalf("a retried fence changed the partition: %+v, was %+v", again, first)
	}
	wantErr(t, "b at a's epoch", b.fence(t, s, map[int]uint64{p: 5}), port.ErrStaleEpoch)
	wantErr(t, "b below a's epoch", b.fence(t, s, map[int]uint64{p: 4}), port.ErrStaleEpoch)
	checkPartitions(t, "after b's stale fences", partitions(t, s), port.PartitionOwner{Partition: p, Owner: a.id, Epoch: 5})

	b.mustFence(t, s, map[int]uint64{p: 6})
	checkPartitions(t, "after b's fence at 6", partitions(t, s), port.PartitionOwner{Partition: p, Owner: b.id, Epoch: 6})
	wantErr(t, "a at b's epoch", a.fence(t, s, map[int]uint64{p: 6}), port.ErrStaleEpoch)
	wantErr(t, "a at its old epoch", a.fence(t, s, map[int]uint64{p: 5}), port.ErrStaleEpoch)

	// All or nothing: q could be taken, p cannot; neither is.
	wantErr(t, "a call with one stale partition", a.fence(t, s, map[int]uint64{q: 1, p: 6}), port.ErrStaleEpoch)
	checkPartitions(t, "after the refused call", partitions(t, s), port.PartitionOwner{Partition: p, Owner: b.id, Epoch: 6})

	// Several at once, listed by partition; nothing to fence is a no-op.
	a.mustFence(t, s, map[int]uint64{q: 1, 1: 2, p: 7})
	if err := b.fence(t, s, nil); err != nil {
		t.Fatalf("fencing nothing: %v", err)
	}
	checkPartitions(t, "after a's fence of three", partitions(t, s),
		port.PartitionOwner{Partition: 1, Owner: a.id, Epoch: 2},
		port.PartitionOwner{Partition: p, Owner: a.id, Epoch: 7},
		port.PartitionOwner{Partition: q, Owner: a.id, Epoch: 1})

	for _, bad := range []port.FenceRequest{
		{Epochs: map[int]uint64{p: 9}},                      // no owner
		{Owner: a.id, Epochs: map[int]uint64{-1: 9}},        // no such partition
		{Owner: a.id, Epochs: map[int]uint64{p: 1<<63 + 1}}, // beyond the column
		{Owner: a.id, Epochs: map[int]uint64{port.MaxPartitions: 9}},
	} {
		if err := s.FencePartitions(ctx(t), bad); err == nil {
			t.Fatalf("FencePartitions(%+v) was accepted", bad)
		}
	}
	if got := partitions(t, s); len(got) != 3 || got[1].Epoch != 7 {
		t.Fatalf("refused requests changed the partitions: %+v", got)
	}
}

// testClaimScopedToPartitions: a claim with Partitions takes due
// instances of those partitions only; an empty list takes none; nil takes
// every partition's.
func testClaimScopedToPartitions(t *testing.T, s port.Store) {
	ids := queueIn(t, s, 0, 1, 2, 3, 0, 1, 2, 3)
	o := newOwner(1)
	o.claimIn(t, s, []int{}) // no partition, no instance
	o.claimIn(t, s, []int{1, 2}, ids[1], ids[2], ids[5], ids[6])
	o.claimIn(t, s, []int{2, 7})
	o.claimIn(t, s, nil, ids[0], ids[3], ids[4], ids[7])

	// A partition filter does not bypass leases: a newer term takes the
	// live leases of the older, in the partitions it names.
	newOwner(2).claimIn(t, s, []int{3}, ids[3], ids[7])
}

// testFenceRefusesLiveLeases is the range_id check: a runloop whose
// partition was fenced by another loses its writes on the partition's
// instances at once, although its row leases are live and nobody claimed
// the instances; the owner takes them over at once. Instances of other
// partitions are not affected.
func testFenceRefusesLiveLeases(t *testing.T, s port.Store) {
	ids := queueIn(t, s, 3, 2)
	x, y := ids[0], ids[1] // x in the fenced partition, y in another
	a := newOwner(1)
	if got := a.claimIn(t, s, nil, x, y); got[0].LeaseExpiresAt.Before(time.Now().Add(time.Minute)) {
		t.Fatalf("lease ends at %v: too short for this test", got[0].LeaseExpiresAt)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: x, State: []byte("a's"), Results: []port.ActionResult{result(x, "t", 1, true)}})

	// b fences partition 3 under the same term, and claims nothing.
	b := newOwner(1)
	b.mustFence(t, s, map[int]uint64{3: 2})

	later := time.Now().Add(time.Hour)
	out, err := s.PersistProgress(ctx(t), []port.Progress{
		{InstanceID: x, Owner: a.id, State: []byte("stale"), ScheduledAt: &later, Results: []port.ActionResult{result(x, "t", 2, true)}},
		{InstanceID: y, Owner: a.id, State: []byte("a's y"), Results: []port.ActionResult{result(y, "t", 1, true)}},
	})
	if err != nil || len(out) != 2 {
		t.Fatalf("PersistProgress = %v, %v", out, err)
	}
	wantErr(t, "progress in a partition fenced by another", out[0], port.ErrOwnershipLost)
	if out[1] != nil {
		t.Fatalf("progress in an unfenced partition: %v", out[1])
	}
	err = a.complete(t, s, port.Completion{InstanceID: x, Status: port.StateComplete, Output: []byte("1"),
		State: []byte("final"), Results: []port.ActionResult{result(x, "t", 3, true)}})
	wantErr(t, "completion in a partition fenced by another", err, port.ErrOwnershipLost)
	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: []uuid.UUID{x, y}})
	if err != nil || !sameIDs(st.Lost, []uuid.UUID{x}) {
		t.Fatalf("RefreshLeases = %+v, %v; want %s lost and %s kept", st, err, x, y)
	}

	// Nothing of x was written after the fence.
	checkResults(t, "history of x", history(t, s, x), []port.ActionResult{result(x, "t", 1, true)})
	if rec := get(t, s, x); string(rec.State) != "a's" || rec.Status != port.StateRunning || rec.Output != nil {
		t.Fatalf("x after a's refused writes: state %q, status %s, output %q; want a's state, running", rec.State, rec.Status, rec.Output)
	}

	// The owner claims x at once, over a's live lease and without a newer
	// term; its snapshot is a's last, and the refused schedule left it due.
	// Its own live lease it does not claim again.
	got := b.claimIn(t, s, []int{3}, x)
	if !got[0].HeldBefore || string(got[0].State) != "a's" {
		t.Fatalf("b's claim of x: held before %v, state %q; want held before, a's state", got[0].HeldBefore, got[0].State)
	}
	checkResults(t, "x hydrated by b", got[0].Results, []port.ActionResult{result(x, "t", 1, true)})
	b.claimIn(t, s, []int{3})
	b.mustPersist(t, s, port.Progress{InstanceID: x, State: []byte("b's"), Results: []port.ActionResult{result(x, "t", 2, true)}})
	checkResults(t, "history of x", history(t, s, x), []port.ActionResult{result(x, "t", 1, true), result(x, "t", 2, true)})
	if rec := get(t, s, x); string(rec.State) != "b's" {
		t.Fatalf("x after b's progress: state %q", rec.State)
	}

	// y, in a partition nobody fenced, is still a's: written, completed,
	// claimed by nobody else of its term.
	newOwner(1).claimIn(t, s, nil)
	a.mustPersist(t, s, port.Progress{InstanceID: y, State: []byte("a's y again")})
	if err := a.complete(t, s, port.Completion{InstanceID: y, Status: port.StateComplete, Output: []byte("1")}); err != nil {
		t.Fatalf("completing y: %v", err)
	}
	if err := b.complete(t, s, port.Completion{InstanceID: x, Status: port.StateComplete, Output: []byte("2")}); err != nil {
		t.Fatalf("b completing x: %v", err)
	}
}

// testFencedPartitionNotClaimedByOthers: nobody but its owner claims in a
// fenced partition — not a newer term, not with the partition named —
// while the other partitions stay claimable by all.
func testFencedPartitionNotClaimedByOthers(t *testing.T, s port.Store) {
	ids := queueIn(t, s, 0, 1, 0, 1)
	b := newOwner(1)
	b.mustFence(t, s, map[int]uint64{1: 1})

	c := newOwner(99)
	c.claimIn(t, s, []int{1})
	c.claimIn(t, s, nil, ids[0], ids[2])
	// Released, partition 0's instances are claimable again; 1's never.
	if err := s.ReleaseLeases(ctx(t), c.id, []uuid.UUID{ids[0], ids[2]}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	newOwner(100).claimIn(t, s, nil, ids[0], ids[2])
	b.claimIn(t, s, nil, ids[1], ids[3])

	// Once another owner fences it at a higher epoch, b's hold is void.
	d := newOwner(1)
	d.mustFence(t, s, map[int]uint64{1: 2})
	b.claimIn(t, s, nil)
	err := b.persist(t, s, port.Progress{InstanceID: ids[1], State: []byte("b's")})
	wantErr(t, "progress of the fenced-out owner", err, port.ErrOwnershipLost)
	d.claimIn(t, s, []int{1}, ids[1], ids[3])
}

// testQueueClaimedInFencedPartition: a submission stored claimed in a
// partition another runloop fenced is queued unclaimed instead, for the
// owner to claim; in its own or an unfenced partition it is stored
// claimed as usual.
func testQueueClaimedInFencedPartition(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	a, b := newOwner(1), newOwner(1)
	b.mustFence(t, s, map[int]uint64{5: 1})

	theirs, free, own := newInstanceIn(wf, 5), newInstanceIn(wf, 6), newInstanceIn(wf, 5)
	theirs.Claim = &port.SubmitClaim{Owner: a.id, Term: a.term, Lease: longLease}
	free.Claim = theirs.Claim
	own.Claim = &port.SubmitClaim{Owner: b.id, Term: b.term, Lease: longLease}
	got, err := s.QueueInstances(ctx(t), []port.NewInstance{theirs, free, own})
	if err != nil {
		t.Fatalf("QueueInstances: %v", err)
	}
	if got[0].Claimed || got[0].ID != theirs.ID || got[0].Existing || !got[0].CreatedAt.IsZero() {
		t.Fatalf("the instance in b's partition submitted claimed by a: %+v, want it queued unclaimed", got[0])
	}
	if !got[1].Claimed || !got[2].Claimed {
		t.Fatalf("the instances in an unfenced partition and in their claimer's: %+v, %+v; want both claimed", got[1], got[2])
	}
	if rec := get(t, s, theirs.ID); rec.Status != port.StatePending || rec.StartedAt != nil {
		t.Fatalf("the instance queued unclaimed: status %s, started %v; want queued", rec.Status, rec.StartedAt)
	}
	err = a.persist(t, s, port.Progress{InstanceID: theirs.ID, State: []byte("a's")})
	wantErr(t, "progress of the submitter in b's partition", err, port.ErrOwnershipLost)

	// The owner claims it (and not its own, still held); a holds free.
	if c := b.claimIn(t, s, nil, theirs.ID); c[0].HeldBefore {
		t.Fatalf("the first claim of the instance says it was held before")
	}
	a.mustPersist(t, s, port.Progress{InstanceID: free.ID, State: []byte("a's")})
	b.mustPersist(t, s, port.Progress{InstanceID: own.ID, State: []byte("b's")})
}

// CheckUpgradedRow checks, on a store just migrated from a schema without
// partitions, that the instance old queued before the migration is in
// partition 0: a claim of other partitions leaves it, a claim of
// partition 0 takes it, and once another runloop fences partition 0 the
// claimer's writes on it are refused. Each adapter's migration test
// builds the old schema its own way, then calls this.
func CheckUpgradedRow(t *testing.T, s port.Store, old uuid.UUID) {
	t.Helper()
	claim := func(owner uuid.UUID, parts []int) []port.ClaimedInstance {
		got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: owner, Term: 1, Lease: time.Hour, Limit: 10, Partitions: parts})
		if err != nil {
			t.Fatalf("ClaimInstances(%v): %v", parts, err)
		}
		return got
	}
	a, b := uuid.New(), uuid.New()
	if got := claim(a, []int{1, 2}); len(got) != 0 {
		t.Fatalf("a claim of partitions 1 and 2 took %d instances", len(got))
	}
	if got := claim(a, []int{0}); len(got) != 1 || got[0].ID != old || got[0].Parent != nil {
		t.Fatalf("a claim of partition 0 took %d instances, want %s without a parent: %+v", len(got), old, got)
	}
	if err := s.FencePartitions(t.Context(), port.FenceRequest{Owner: b, Epochs: map[int]uint64{0: 1}}); err != nil {
		t.Fatalf("FencePartitions: %v", err)
	}
	out, err := s.PersistProgress(t.Context(), []port.Progress{{InstanceID: old, Owner: a, State: []byte("a's")}})
	if err != nil || !errors.Is(out[0], port.ErrOwnershipLost) {
		t.Fatalf("progress of a after b fenced partition 0 = %v, %v; want ErrOwnershipLost", out, err)
	}
}
