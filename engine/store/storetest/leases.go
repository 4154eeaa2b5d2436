package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// testRefreshExtends: a refreshed lease outlives its original end.
func testRefreshExtends(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	const lease = 500 * time.Millisecond
	claimed := a.mustClaim(t, s, lease, id)[0]
	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: []uuid.UUID{id}})
	if err != nil {
		t.Fatalf("RefreshLeases: %v", err)
	}
	if len(st.Lost) != 0 || len(st.CancelRequested) != 0 {
		// The refresh came after the short lease lapsed: a very slow machine.
		t.Skipf("the %s lease lapsed before the refresh (%+v); cannot judge", lease, st)
	}
	// Past the original end of the lease, nobody else may claim it.
	b := newOwner(1)
	for time.Now().Before(claimed.LeaseExpiresAt.Add(lease)) {
		b.mustClaim(t, s, longLease)
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("still mine")})
}

// testRefreshReportsLost: leases taken over, expired, completed or never
// held are reported lost; held ones are not.
func testRefreshReportsLost(t *testing.T, s port.Store) {
	ids := queueN(t, s, 3)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	taken := newOwner(2).claim(t, s, longLease, 1)[0].ID
	unknown := uuid.New()

	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: append(ids, unknown)})
	if err != nil {
		t.Fatalf("RefreshLeases: %v", err)
	}
	if !sameIDs(st.Lost, []uuid.UUID{taken, unknown}) || len(st.CancelRequested) != 0 {
		t.Fatalf("RefreshLeases = %+v, want lost %v", st, []uuid.UUID{taken, unknown})
	}

	// An expired lease is lost even if nobody claimed it.
	id := queueN(t, s, 1)[0]
	b := newOwner(1)
	b.mustClaim(t, s, shortLease, id)
	deadline := time.Now().Add(waitLimit)
	for {
		st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: b.id, Term: 1, Lease: shortLease, IDs: []uuid.UUID{id}})
		if err != nil {
			t.Fatalf("RefreshLeases: %v", err)
		}
		if len(st.Lost) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a %s lease was never lost", shortLease)
		}
		time.Sleep(5 * shortLease) // let the renewed short lease lapse
	}
}

// testRefreshReportsCancel: a cancellation request reaches the owner on
// refresh, and the lease is still extended.
func testRefreshReportsCancel(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	if err := s.RequestCancel(ctx(t), ids[1]); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: ids})
	if err != nil {
		t.Fatalf("RefreshLeases: %v", err)
	}
	if len(st.Lost) != 0 || !sameIDs(st.CancelRequested, ids[1:]) {
		t.Fatalf("RefreshLeases = %+v, want cancel requested on %s only", st, ids[1])
	}
	newOwner(1).mustClaim(t, s, longLease) // still held: the request does not free it
}

// testRelease: a released instance is claimable at once; releasing someone
// else's lease does nothing.
func testRelease(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	if err := s.ReleaseLeases(ctx(t), uuid.New(), ids); err != nil {
		t.Fatalf("ReleaseLeases by a stranger: %v", err)
	}
	newOwner(1).mustClaim(t, s, longLease)

	if err := s.ReleaseLeases(ctx(t), a.id, ids[:1]); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	b := newOwner(1)
	if got := b.mustClaim(t, s, longLease, ids[0]); !got[0].HeldBefore {
		t.Fatalf("a released instance claimed again does not say it was held before")
	}
	if rec := get(t, s, ids[0]); rec.Status != port.StateRunning {
		t.Fatalf("released and reclaimed instance has status %s, want running", rec.Status)
	}
	err := a.persist(t, s, port.Progress{InstanceID: ids[0], State: []byte("stale")})
	wantErr(t, "progress after release", err, port.ErrOwnershipLost)
	if err := s.ReleaseLeases(ctx(t), a.id, nil); err != nil {
		t.Fatalf("ReleaseLeases(nil): %v", err)
	}
}

// testReclaimExpired: lapsed leases are cleared, up to the limit; live ones
// are left alone.
func testReclaimExpired(t *testing.T, s port.Store) {
	ids := queueN(t, s, 4)
	short := newOwner(1)
	got := short.claim(t, s, shortLease, 3)
	expiring := claimedIDs(got)
	live := newOwner(1)
	live.mustClaim(t, s, longLease, ids[indexOfMissing(ids, expiring)])

	n, err := s.ReclaimExpired(ctx(t), 1)
	if err != nil || n > 1 {
		t.Fatalf("ReclaimExpired(1) = %d, %v; want at most 1", n, err)
	}
	total := n
	deadline := time.Now().Add(waitLimit)
	for total < len(expiring) {
		if time.Now().After(deadline) {
			t.Fatalf("reclaimed %d of %d lapsed leases within %s", total, len(expiring), waitLimit)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
		n, err := s.ReclaimExpired(ctx(t), 1)
		if err != nil || n > 1 {
			t.Fatalf("ReclaimExpired(1) = %d, %v; want at most 1", n, err)
		}
		total += n
	}
	if n, err := s.ReclaimExpired(ctx(t), 100); err != nil || n != 0 {
		t.Fatalf("ReclaimExpired after all lapsed leases were cleared = %d, %v; want 0", n, err)
	}
	// The cleared ones are claimable; the live one is not.
	newOwner(1).mustClaim(t, s, longLease, expiring...)
}

// indexOfMissing returns the index of the first id of all not in some.
func indexOfMissing(all, some []uuid.UUID) int {
	for i, id := range all {
		if indexOf(some, id) < 0 {
			return i
		}
	}
	return -1
}

// testRequestCancelQueued: cancelling a queued instance makes it due now;
// the next claim sees the request.
func testRequestCancelQueued(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	in := newInstance(wf)
	in.ScheduledAt = time.Now().Add(time.Hour)
	queue(t, s, in)
	if err := s.RequestCancel(ctx(t), in.ID); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	if rec := get(t, s, in.ID); !rec.CancelRequested || rec.Status != port.StatePending {
		t.Fatalf("after RequestCancel: %+v", rec)
	}
	got := newOwner(1).mustClaim(t, s, longLease, in.ID)
	if !got[0].CancelRequested {
		t.Fatalf("the claim does not show the cancel request")
	}
	// Asking twice is fine.
	if err := s.RequestCancel(ctx(t), in.ID); err != nil {
		t.Fatalf("second RequestCancel: %v", err)
	}
}

// testRequestCancelRunning: the owner sees the request on refresh; after
// its lease lapses the next owner sees it on claim.
func testRequestCancelRunning(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	later := time.Now().Add(time.Hour)
	a.mustPersist(t, s, port.Progress{InstanceID: id, ScheduledAt: &later})
	if err := s.RequestCancel(ctx(t), id); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	st, err := s.RefreshLeases(ctx(t), port.LeaseRefresh{Owner: a.id, Term: 1, Lease: longLease, IDs: []uuid.UUID{id}})
	if err != nil || len(st.Lost) != 0 || !sameIDs(st.CancelRequested, []uuid.UUID{id}) {
		t.Fatalf("RefreshLeases = %+v, %v; want the cancel request", st, err)
	}
	// A new leader takes over: the instance is due now despite its
	// schedule, and the claim carries the request.
	got := newOwner(2).mustClaim(t, s, longLease, id)
	if !got[0].CancelRequested {
		t.Fatalf("the takeover claim does not show the cancel request")
	}
}

// testRequestCancelFinished: a finished or unknown instance is ErrNotFound.
func testRequestCancelFinished(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	if err := a.complete(t, s, port.Completion{InstanceID: id, Status: port.StateComplete, Output: []byte("1")}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	wantErr(t, "cancelling a finished instance", s.RequestCancel(ctx(t), id), port.ErrNotFound)
	wantErr(t, "cancelling an unknown instance", s.RequestCancel(ctx(t), uuid.New()), port.ErrNotFound)
	if rec := get(t, s, id); rec.CancelRequested || rec.Status != port.StateComplete {
		t.Fatalf("cancelling a finished instance changed it: %+v", rec)
	}
}

// testSweep: only finished instances that finished before the cut-off go,
// at most Limit per call, with their action results.
func testSweep(t *testing.T, s port.Store) {
	ids := queueN(t, s, 4)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	finished := ids[:3]
	running := ids[3]
	for _, id := range finished {
		a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{result(id, "t", 1, true)}})
		if err := a.complete(t, s, port.Completion{InstanceID: id, Status: port.StateComplete, Output: []byte("1")}); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	a.mustPersist(t, s, port.Progress{InstanceID: running, Results: []port.ActionResult{result(running, "t", 1, true)}})

	if n, err := s.Sweep(ctx(t), port.SweepRequest{Before: time.Now().Add(-time.Hour), Limit: 10}); err != nil || n != 0 {
		t.Fatalf("Sweep(an hour ago) = %d, %v; want 0", n, err)
	}
	cutoff := time.Now().Add(time.Hour)
	var swept int
	for i, want := range []int{2, 1, 0} {
		n, err := s.Sweep(ctx(t), port.SweepRequest{Before: cutoff, Limit: 2})
		if err != nil || n != want {
			t.Fatalf("Sweep %d = %d, %v; want %d", i, n, err, want)
		}
		swept += n
	}
	if swept != len(finished) {
		t.Fatalf("swept %d instances, want %d", swept, len(finished))
	}
	for _, id := range finished {
		_, err := s.GetInstance(ctx(t), id)
		wantErr(t, "a swept instance", err, port.ErrNotFound)
		_, err = s.TaskHistory(ctx(t), id)
		wantErr(t, "the history of a swept instance", err, port.ErrNotFound)
	}
	if rec := get(t, s, running); rec.Status != port.StateRunning || len(history(t, s, running)) != 1 {
		t.Fatalf("the running instance was touched by the sweep: %+v", rec)
	}
	// The action rows went too: an instance queued again under a swept id
	// starts with an empty history.
	wf := register(t, s, "wf", 1)
	again := newInstance(wf)
	again.ID = finished[0]
	queue(t, s, again)
	if h := history(t, s, again.ID); len(h) != 0 {
		t.Fatalf("the swept instance's results survived: %v", keys(h))
	}
}

// testCloseIdempotent: Close may be called twice.
func testCloseIdempotent(t *testing.T, s port.Store) {
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
