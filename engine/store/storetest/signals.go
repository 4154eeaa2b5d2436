package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// signal records a signal and requires success.
func signal(t *testing.T, s port.Store, sig port.NewSignal) (port.SignalRecord, int64, bool) {
	t.Helper()
	rec, wake, existing, err := s.RecordSignal(ctx(t), sig)
	if err != nil {
		t.Fatalf("RecordSignal(%s, %q, key %q): %v", sig.InstanceID, sig.Name, sig.IdempotencyKey, err)
	}
	return rec, wake, existing
}

// signals lists an instance's signals.
func signals(t *testing.T, s port.Store, id uuid.UUID) []port.SignalRecord {
	t.Helper()
	out, err := s.ListSignals(ctx(t), id)
	if err != nil {
		t.Fatalf("ListSignals(%s): %v", id, err)
	}
	return out
}

// testSignalsIdempotent: a signal with a key the instance already holds
// answers the first record and changes nothing; signals without a key are
// all recorded, in increasing Seq, each bumping the wake counter.
func testSignalsIdempotent(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	first, wake, existing := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`{"by":"ann"}`), IdempotencyKey: "k1"})
	if existing || wake != 1 || first.Seq <= 0 || first.InstanceID != id || first.Name != "approve" ||
		string(first.Payload) != `{"by":"ann"}` || first.IdempotencyKey != "k1" || first.Consumed || first.CreatedAt.IsZero() {
		t.Fatalf("first signal = %+v, wake %d, existing %v", first, wake, existing)
	}
	again, wake, existing := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`{"by":"bob"}`), IdempotencyKey: "k1"})
	if !existing || wake != 1 || again.Seq != first.Seq || string(again.Payload) != `{"by":"ann"}` || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("the same key again = %+v, wake %d, existing %v; want the first record, wake 1", again, wake, existing)
	}
	// Keys are per instance: another instance may use k1.
	other := queueN(t, s, 1)[0]
	if rec, _, existing := signal(t, s, port.NewSignal{InstanceID: other, Name: "approve", IdempotencyKey: "k1"}); existing || rec.Seq == first.Seq {
		t.Fatalf("k1 on another instance = %+v, existing %v", rec, existing)
	}
	a, wa, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "go"}) // nil payload: JSON null
	b, wb, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "go"})
	if wa != 2 || wb != 3 || a.Seq <= first.Seq || b.Seq <= a.Seq || string(a.Payload) != "null" {
		t.Fatalf("two signals without a key: %+v wake %d, %+v wake %d", a, wa, b, wb)
	}
	list := signals(t, s, id)
	if len(list) != 3 || list[0].Seq != first.Seq || list[1].Seq != a.Seq || list[2].Seq != b.Seq || list[0].IdempotencyKey != "k1" {
		t.Fatalf("ListSignals = %+v", list)
	}
	if _, err := s.ListSignals(ctx(t), uuid.New()); err == nil {
		t.Fatal("ListSignals of an unknown instance succeeded")
	} else {
		wantErr(t, "ListSignals of an unknown instance", err, port.ErrNotFound)
	}
	if list := signals(t, s, queueN(t, s, 1)[0]); len(list) != 0 {
		t.Fatalf("a new instance has signals %+v", list)
	}
}

// testSignalsPendingCap: MaxPending refuses a signal while the instance
// holds that many unconsumed ones; a consumed signal frees its place; a
// key already held still answers its record at the cap.
func testSignalsPendingCap(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	first, _, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "x", IdempotencyKey: "k", MaxPending: 2})
	signal(t, s, port.NewSignal{InstanceID: id, Name: "x", MaxPending: 2})
	_, _, _, err := s.RecordSignal(ctx(t), port.NewSignal{InstanceID: id, Name: "x", MaxPending: 2})
	wantErr(t, "a third signal with MaxPending 2", err, port.ErrTooManySignals)
	if rec, _, existing := signal(t, s, port.NewSignal{InstanceID: id, Name: "x", IdempotencyKey: "k", MaxPending: 2}); !existing || rec.Seq != first.Seq {
		t.Fatalf("a held key at the cap = %+v, existing %v", rec, existing)
	}
	if n := len(signals(t, s, id)); n != 2 {
		t.Fatalf("%d signals after a refused one, want 2", n)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: id, ConsumedSignals: []port.SignalUse{{Seq: first.Seq, By: "wait#1"}}})
	signal(t, s, port.NewSignal{InstanceID: id, Name: "x", MaxPending: 2})
	signal(t, s, port.NewSignal{InstanceID: id, Name: "x"}) // no cap
	if n := len(signals(t, s, id)); n != 4 {
		t.Fatalf("%d signals, want 4", n)
	}
}

// testSignalFinishedRefused: signals, pause and resume need a live
// instance: a finished one is ErrNotFound with its state, an unknown one
// ErrNotFound.
func testSignalFinishedRefused(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	if err := a.complete(t, s, port.Completion{InstanceID: id, Status: port.StateFailed, Error: "boom"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	for _, target := range []uuid.UUID{id, uuid.New()} {
		_, _, _, err := s.RecordSignal(ctx(t), port.NewSignal{InstanceID: target, Name: "x"})
		wantErr(t, "a signal for an instance that is not live", err, port.ErrNotFound)
		_, err = s.SetPaused(ctx(t), target, true)
		wantErr(t, "pausing an instance that is not live", err, port.ErrNotFound)
		_, err = s.SetPaused(ctx(t), target, false)
		wantErr(t, "resuming an instance that is not live", err, port.ErrNotFound)
	}
	if list := signals(t, s, id); len(list) != 0 {
		t.Fatalf("a refused signal was recorded: %+v", list)
	}
	if rec := get(t, s, id); rec.Paused || rec.Status != port.StateFailed {
		t.Fatalf("refused writes changed the instance: %+v", rec)
	}
}

// testSignalsConsumed: progress and completion mark signals consumed in
// their gated write; a consumed signal keeps its first consumer; a Seq of
// another instance is ignored; a stale owner's consumption is refused with
// the rest of its write; a claim returns only unconsumed signals.
func testSignalsConsumed(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	id, other := ids[0], ids[1]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id, other)
	s1, _, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`1`)})
	s2, _, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`2`)})
	s3, _, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`3`)})
	o1, _, _ := signal(t, s, port.NewSignal{InstanceID: other, Name: "approve"})

	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{result(id, "approve", 1, true)},
		ConsumedSignals: []port.SignalUse{{Seq: s1.Seq, By: "approve#1"}, {Seq: o1.Seq, By: "approve#1"}}})
	a.mustPersist(t, s, port.Progress{InstanceID: id, ConsumedSignals: []port.SignalUse{{Seq: s1.Seq, By: "later#9"}}})
	list := signals(t, s, id)
	if !list[0].Consumed || list[0].ConsumedBy != "approve#1" || list[1].Consumed || list[1].ConsumedBy != "" {
		t.Fatalf("after consuming %d: %+v", s1.Seq, list)
	}
	if o := signals(t, s, other); o[0].Consumed {
		t.Fatalf("a Seq of another instance was consumed through this one: %+v", o)
	}

	// A newer term takes the instance over; the old owner's consumption
	// is refused with its results.
	b := newOwner(2)
	got := b.mustClaim(t, s, longLease, id, other)
	for _, c := range got {
		if c.ID == id && (len(c.Signals) != 2 || c.Signals[0].Seq != s2.Seq || c.Signals[1].Seq != s3.Seq ||
			string(c.Signals[0].Payload) != "2" || c.Signals[0].Name != "approve" || c.Signals[0].InstanceID != id || c.Signals[0].Consumed) {
			t.Fatalf("claim's unconsumed signals = %+v, want %d and %d", c.Signals, s2.Seq, s3.Seq)
		}
	}
	err := a.persist(t, s, port.Progress{InstanceID: id, Results: []port.ActionResult{result(id, "approve", 2, true)},
		ConsumedSignals: []port.SignalUse{{Seq: s2.Seq, By: "approve#2"}}})
	wantErr(t, "a stale owner's consumption", err, port.ErrOwnershipLost)
	if list := signals(t, s, id); list[1].Consumed {
		t.Fatalf("a refused progress consumed a signal: %+v", list)
	}

	// Completion consumes too.
	if err := b.complete(t, s, port.Completion{InstanceID: id, Status: port.StateComplete, Output: []byte("1"),
		ConsumedSignals: []port.SignalUse{{Seq: s2.Seq, By: "approve#2"}}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	list = signals(t, s, id)
	if !list[1].Consumed || list[1].ConsumedBy != "approve#2" || list[2].Consumed {
		t.Fatalf("after the completion: %+v", list)
	}
}

// testParkWakeRace: a park releases the lease and, when a wake counted
// after the owner's claim is already stored, leaves the instance due now
// rather than at its deadline; with the wake acted on, it is due at the
// deadline (never, without one); a later wake makes it due; whoever claims
// it then sees the signals, the wake counter, the pause flag and the run.
func testParkWakeRace(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	c := a.mustClaim(t, s, longLease, id)[0]
	if c.Wake != 0 || len(c.Signals) != 0 || c.Paused || c.Run != 1 {
		t.Fatalf("a fresh claim: wake %d, signals %+v, paused %v, run %d", c.Wake, c.Signals, c.Paused, c.Run)
	}
	sig, wake, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "approve", Payload: []byte(`"yes"`)})
	if wake != 1 {
		t.Fatalf("wake after a signal = %d, want 1", wake)
	}

	// The owner parks having seen wake 0: the signal recorded before the
	// park's write makes the instance due now, and the lease is gone (an
	// owner of the same term claims it).
	until := time.Now().Add(time.Hour)
	a.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("parked"), Results: []port.ActionResult{result(id, "t", 1, true)},
		Park: &port.Park{Until: until, WakeSeen: 0}})
	b := newOwner(1)
	got := b.mustClaim(t, s, longLease, id)[0]
	if string(got.State) != "parked" || len(got.Results) != 1 || got.Wake != 1 || got.Paused || got.Run != 1 ||
		len(got.Signals) != 1 || got.Signals[0].Seq != sig.Seq || string(got.Signals[0].Payload) != `"yes"` {
		t.Fatalf("the claim after a park that missed a wake = %+v", got)
	}
	if err := a.persist(t, s, port.Progress{InstanceID: id, State: []byte("stale")}); err == nil {
		t.Fatal("the parked owner could still write")
	}

	// Parked having seen wake 1: due at the deadline, claimed by nobody,
	// not even a newer term.
	b.mustPersist(t, s, port.Progress{InstanceID: id, Park: &port.Park{Until: until, WakeSeen: 1}})
	newOwner(1).mustClaim(t, s, longLease)
	newOwner(2).mustClaim(t, s, longLease)

	// A signal makes it due now.
	signal(t, s, port.NewSignal{InstanceID: id, Name: "approve"})
	d := newOwner(2)
	got = d.mustClaim(t, s, longLease, id)[0]
	if got.Wake != 2 || len(got.Signals) != 2 {
		t.Fatalf("the claim after a wake: wake %d, %d signals", got.Wake, len(got.Signals))
	}

	// Parked without a deadline: never due, until something wakes it.
	d.mustPersist(t, s, port.Progress{InstanceID: id, Park: &port.Park{WakeSeen: 2}})
	newOwner(3).mustClaim(t, s, longLease)
	if _, err := s.SetPaused(ctx(t), id, false); err != nil { // a resume wakes it
		t.Fatalf("SetPaused: %v", err)
	}
	e := newOwner(3)
	if got = e.mustClaim(t, s, longLease, id)[0]; got.Wake != 3 {
		t.Fatalf("wake after a resume = %d, want 3", got.Wake)
	}

	// A deadline in the past is due at once; Park overrides ScheduledAt.
	past := time.Now().Add(-time.Second)
	e.mustPersist(t, s, port.Progress{InstanceID: id, ScheduledAt: &until, Park: &port.Park{Until: past, WakeSeen: 3}})
	newOwner(3).mustClaim(t, s, longLease, id)
}

// testParkCancelRequested: RequestCancel bumps the wake counter, and a
// cancellation requested makes a park due now even when the owner saw the
// wake it caused.
func testParkCancelRequested(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	if err := s.RequestCancel(ctx(t), id); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	b := newOwner(2)
	got := b.mustClaim(t, s, longLease, id)[0]
	if got.Wake != 1 || !got.CancelRequested {
		t.Fatalf("the claim after RequestCancel: wake %d, cancel %v", got.Wake, got.CancelRequested)
	}
	b.mustPersist(t, s, port.Progress{InstanceID: id, Park: &port.Park{Until: time.Now().Add(time.Hour), WakeSeen: 1}})
	newOwner(2).mustClaim(t, s, longLease, id)
}

// testParkStaleOwnerRefused: a park is gated like any progress: another
// owner's park is refused and the lease stays.
func testParkStaleOwnerRefused(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	b := newOwner(2)
	b.mustClaim(t, s, longLease, id)
	err := a.persist(t, s, port.Progress{InstanceID: id, Park: &port.Park{}})
	wantErr(t, "a stale owner's park", err, port.ErrOwnershipLost)
	newOwner(2).mustClaim(t, s, longLease) // b's lease stands
	b.mustPersist(t, s, port.Progress{InstanceID: id, State: []byte("still mine")})
}

// testPauseFlag: SetPaused sets the flag that reads and claims show and
// bumps the wake counter; pausing leaves the due time, resuming makes the
// instance due now; a finished instance never shows paused.
func testPauseFlag(t *testing.T, s port.Store) {
	id := queueN(t, s, 1)[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, id)
	a.mustPersist(t, s, port.Progress{InstanceID: id, Park: &port.Park{Until: time.Now().Add(time.Hour)}})
	if wake, err := s.SetPaused(ctx(t), id, true); err != nil || wake != 1 {
		t.Fatalf("SetPaused(true) = %d, %v; want wake 1", wake, err)
	}
	if rec := get(t, s, id); !rec.Paused || rec.Run != 1 {
		t.Fatalf("GetInstance after pausing: paused %v, run %d", rec.Paused, rec.Run)
	}
	page, err := s.ListInstances(ctx(t), port.InstanceFilter{})
	if err != nil || len(page.Instances) != 1 || !page.Instances[0].Paused || page.Instances[0].Run != 1 {
		t.Fatalf("ListInstances after pausing: %+v, %v", page.Instances, err)
	}
	newOwner(2).mustClaim(t, s, longLease) // pausing does not make it due
	if wake, err := s.SetPaused(ctx(t), id, true); err != nil || wake != 2 {
		t.Fatalf("pausing twice = %d, %v; want wake 2", wake, err)
	}
	if wake, err := s.SetPaused(ctx(t), id, false); err != nil || wake != 3 {
		t.Fatalf("SetPaused(false) = %d, %v; want wake 3", wake, err)
	}
	b := newOwner(2)
	got := b.mustClaim(t, s, longLease, id)[0] // resuming does
	if got.Paused || got.Wake != 3 {
		t.Fatalf("the claim after resuming: paused %v, wake %d", got.Paused, got.Wake)
	}
	if _, err := s.SetPaused(ctx(t), id, true); err != nil {
		t.Fatalf("SetPaused: %v", err)
	}
	if got := newOwner(3).mustClaim(t, s, longLease, id)[0]; !got.Paused {
		t.Fatal("a claim of a paused instance does not show it paused")
	}
	if rec := get(t, s, id); !rec.Paused || rec.Status != port.StateRunning {
		t.Fatalf("GetInstance of a paused running instance: %+v", rec)
	}
	// Cancelled while paused: a finished instance is not paused.
	if err := newOwner(3).complete(t, s, port.Completion{InstanceID: id, Status: port.StateCancelled, Error: "cancelled"}); err == nil {
		t.Fatal("a completion by a non-owner succeeded")
	}
	c := newOwner(4)
	c.mustClaim(t, s, longLease, id)
	if err := c.complete(t, s, port.Completion{InstanceID: id, Status: port.StateCancelled, Error: "cancelled"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if rec := get(t, s, id); rec.Paused {
		t.Fatalf("a cancelled instance shows paused: %+v", rec)
	}
}

// testReopen: a FAILED or CANCELLED instance runs again: running, the new
// snapshot, outcome, cancel request and pause cleared, the run one up, due
// now in its partition, its history and signals kept (an unconsumed signal
// comes with the next claim); a complete one is ErrNotRetryable, a live
// one ErrInstanceLive, an unknown one ErrNotFound.
func testReopen(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	failed, cancelled, complete, live := newInstance(wf), newInstance(wf), newInstance(wf), newInstance(wf)
	failed.Partition = 3
	queue(t, s, failed, cancelled, complete, live)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, failed.ID, cancelled.ID, complete.ID, live.ID)
	sig, _, _ := signal(t, s, port.NewSignal{InstanceID: failed.ID, Name: "approve", Payload: []byte(`"late"`)})
	if _, err := s.SetPaused(ctx(t), failed.ID, true); err != nil {
		t.Fatalf("SetPaused: %v", err)
	}
	if err := s.RequestCancel(ctx(t), cancelled.ID); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	a.mustPersist(t, s, port.Progress{InstanceID: failed.ID, Results: []port.ActionResult{result(failed.ID, "t", 1, false)}, Gathering: true})
	for _, c := range []port.Completion{
		{InstanceID: failed.ID, Status: port.StateFailed, Error: "t failed", State: []byte("final")},
		{InstanceID: cancelled.ID, Status: port.StateCancelled, Error: "cancelled"},
		{InstanceID: complete.ID, Status: port.StateComplete, Output: []byte(`{"ok":true}`)},
	} {
		if err := a.complete(t, s, c); err != nil {
			t.Fatalf("complete %s: %v", c.InstanceID, err)
		}
	}

	got, err := s.ReopenInstance(ctx(t), port.ReopenRequest{ID: failed.ID, State: []byte("again"), Partition: 3})
	if err != nil || got.Run != 2 || got.Status != port.StateFailed {
		t.Fatalf("ReopenInstance(failed) = %+v, %v; want run 2, was failed", got, err)
	}
	rec := get(t, s, failed.ID)
	if rec.Status != port.StateRunning || string(rec.State) != "again" || rec.Error != "" || rec.Output != nil ||
		rec.FinishedAt != nil || rec.CancelRequested || rec.Paused || rec.Gathering || rec.Run != 2 {
		t.Fatalf("the reopened instance: %+v", rec)
	}
	if h := history(t, s, failed.ID); len(h) != 1 {
		t.Fatalf("reopening changed the history: %v", keys(h))
	}
	// Due now, unleased, in partition 3.
	b := newOwner(1)
	if c, err := s.ClaimInstances(ctx(t), port.ClaimRequest{Owner: b.id, Term: 1, Lease: longLease, Limit: 10, Partitions: []int{0}}); err != nil || len(c) != 0 {
		t.Fatalf("a claim of partition 0 = %d instances, %v", len(c), err)
	}
	c, err := s.ClaimInstances(ctx(t), port.ClaimRequest{Owner: b.id, Term: 1, Lease: longLease, Limit: 10, Partitions: []int{3}})
	if err != nil || len(c) != 1 || c[0].ID != failed.ID {
		t.Fatalf("a claim of partition 3 = %+v, %v", claimedIDs(c), err)
	}
	if c[0].Run != 2 || c[0].Paused || c[0].CancelRequested || string(c[0].State) != "again" || len(c[0].Results) != 1 ||
		len(c[0].Signals) != 1 || c[0].Signals[0].Seq != sig.Seq || c[0].Wake < 1 {
		t.Fatalf("the claim of the reopened instance = %+v", c[0])
	}
	// Fails again, runs a third time.
	if err := b.complete(t, s, port.Completion{InstanceID: failed.ID, Status: port.StateFailed, Error: "again"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if got, err := s.ReopenInstance(ctx(t), port.ReopenRequest{ID: failed.ID, State: []byte("third"), Partition: 3}); err != nil || got.Run != 3 {
		t.Fatalf("the second ReopenInstance = %+v, %v; want run 3", got, err)
	}

	if got, err := s.ReopenInstance(ctx(t), port.ReopenRequest{ID: cancelled.ID, State: []byte("c")}); err != nil ||
		got.Run != 2 || got.Status != port.StateCancelled {
		t.Fatalf("ReopenInstance(cancelled) = %+v, %v", got, err)
	}
	if rec := get(t, s, cancelled.ID); rec.CancelRequested || rec.Status != port.StateRunning {
		t.Fatalf("the reopened cancelled instance: %+v", rec)
	}

	_, err = s.ReopenInstance(ctx(t), port.ReopenRequest{ID: complete.ID, State: []byte("x")})
	wantErr(t, "reopening a complete instance", err, port.ErrNotRetryable)
	_, err = s.ReopenInstance(ctx(t), port.ReopenRequest{ID: live.ID, State: []byte("x")})
	wantErr(t, "reopening a running instance", err, port.ErrInstanceLive)
	_, err = s.ReopenInstance(ctx(t), port.ReopenRequest{ID: cancelled.ID, State: []byte("x")}) // queued again now
	wantErr(t, "reopening a reopened instance", err, port.ErrInstanceLive)
	_, err = s.ReopenInstance(ctx(t), port.ReopenRequest{ID: uuid.New(), State: []byte("x")})
	wantErr(t, "reopening an unknown instance", err, port.ErrNotFound)
	if rec := get(t, s, complete.ID); rec.Status != port.StateComplete || rec.Run != 1 || string(rec.Output) != `{"ok":true}` {
		t.Fatalf("a refused reopen changed the instance: %+v", rec)
	}
}

// testSignalsSweptWithInstance: the retention sweep deletes an instance's
// signals with it.
func testSignalsSweptWithInstance(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	in := newInstance(wf)
	queue(t, s, in)
	a := newOwner(1)
	a.mustClaim(t, s, longLease, in.ID)
	signal(t, s, port.NewSignal{InstanceID: in.ID, Name: "approve", IdempotencyKey: "k"})
	if err := a.complete(t, s, port.Completion{InstanceID: in.ID, Status: port.StateComplete, Output: []byte("1")}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if n, err := s.Sweep(ctx(t), port.SweepRequest{Before: time.Now().Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	_, err := s.ListSignals(ctx(t), in.ID)
	wantErr(t, "the signals of a swept instance", err, port.ErrNotFound)
	// Queued again under the swept id: no signal survived, the key is free.
	queue(t, s, in)
	if list := signals(t, s, in.ID); len(list) != 0 {
		t.Fatalf("the swept instance's signals survived: %+v", list)
	}
	if _, _, existing := signal(t, s, port.NewSignal{InstanceID: in.ID, Name: "approve", IdempotencyKey: "k"}); existing {
		t.Fatal("the swept signal's key still answers")
	}
}

// recordBatch records a batch of signals and requires the call to succeed
// with one outcome per signal.
func recordBatch(t *testing.T, s port.Store, sigs ...port.NewSignal) []port.SignalOutcome {
	t.Helper()
	out, err := s.RecordSignals(ctx(t), sigs)
	if err != nil {
		t.Fatalf("RecordSignals of %d signals: %v", len(sigs), err)
	}
	if len(out) != len(sigs) {
		t.Fatalf("RecordSignals returned %d outcomes for %d signals", len(out), len(sigs))
	}
	return out
}

// testSignalsBatch: a batch decides each signal as RecordSignal would, in
// order: recorded ones bump their instance's wake counter one by one; a
// key held before, or taken by an earlier signal of the batch, answers
// that record; a signal for an instance that is not live, over the cap
// (counting the batch's earlier signals) or invalid is refused on its own
// and changes nothing.
func testSignalsBatch(t *testing.T, s port.Store) {
	ids := queueN(t, s, 4)
	live, capped, other, finished := ids[0], ids[1], ids[2], ids[3]
	unknown := uuid.New()
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	if err := a.complete(t, s, port.Completion{InstanceID: finished, Status: port.StateFailed, Error: "boom"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	before, _, _ := signal(t, s, port.NewSignal{InstanceID: live, Name: "go", Payload: []byte(`0`), IdempotencyKey: "k0"})
	held, _, _ := signal(t, s, port.NewSignal{InstanceID: capped, Name: "x", IdempotencyKey: "kc"})

	out := recordBatch(t, s,
		port.NewSignal{InstanceID: live, Name: "go", Payload: []byte(`1`), IdempotencyKey: "k1"},                 // 0 recorded
		port.NewSignal{InstanceID: live, Name: "go", Payload: []byte(`2`), IdempotencyKey: "k0"},                 // 1 key held before
		port.NewSignal{InstanceID: live, Name: "go", Payload: []byte(`3`), IdempotencyKey: "k1"},                 // 2 key of signal 0
		port.NewSignal{InstanceID: finished, Name: "x"},                                                          // 3 finished
		port.NewSignal{InstanceID: unknown, Name: "x"},                                                           // 4 unknown
		port.NewSignal{InstanceID: capped, Name: "x", MaxPending: 1},                                             // 5 over the cap
		port.NewSignal{InstanceID: live},                                                                         // 6 invalid: no name
		port.NewSignal{InstanceID: live, Name: "go"},                                                             // 7 recorded
		port.NewSignal{InstanceID: other, Name: "y", MaxPending: 1},                                              // 8 recorded
		port.NewSignal{InstanceID: other, Name: "y", MaxPending: 1},                                              // 9 over the cap: 8 counts
		port.NewSignal{InstanceID: other, Name: "y", IdempotencyKey: "ko", MaxPending: 1},                        // 10 over the cap
		port.NewSignal{InstanceID: capped, Name: "x", Payload: []byte(`9`), IdempotencyKey: "kc", MaxPending: 1}, // 11 held key at the cap
	)

	r0 := out[0]
	if r0.Err != nil || r0.Existing || r0.Wake != 2 || r0.Record.Seq <= before.Seq || r0.Record.InstanceID != live ||
		r0.Record.Name != "go" || string(r0.Record.Payload) != "1" || r0.Record.IdempotencyKey != "k1" || r0.Record.Consumed ||
		r0.Record.CreatedAt.IsZero() {
		t.Fatalf("outcome 0 = %+v; want recorded, wake 2", r0)
	}
	if o := out[1]; o.Err != nil || !o.Existing || o.Wake != 2 || o.Record.Seq != before.Seq || string(o.Record.Payload) != "0" ||
		!o.Record.CreatedAt.Equal(before.CreatedAt) {
		t.Fatalf("outcome 1 (a key held before) = %+v; want %+v, wake 2", o, before)
	}
	if o := out[2]; o.Err != nil || !o.Existing || o.Wake != 2 || o.Record.Seq != r0.Record.Seq || string(o.Record.Payload) != "1" ||
		!o.Record.CreatedAt.Equal(r0.Record.CreatedAt) {
		t.Fatalf("outcome 2 (a key of the batch) = %+v; want signal 0's record, wake 2", o)
	}
	for _, i := range []int{3, 4} {
		wantErr(t, fmt.Sprintf("outcome %d (an instance that is not live)", i), out[i].Err, port.ErrNotFound)
	}
	if !strings.Contains(out[3].Err.Error(), string(port.StateFailed)) {
		t.Errorf("the refusal of a failed instance does not say its state: %v", out[3].Err)
	}
	for _, i := range []int{5, 9, 10} {
		wantErr(t, fmt.Sprintf("outcome %d (over the cap)", i), out[i].Err, port.ErrTooManySignals)
	}
	if out[6].Err == nil {
		t.Fatalf("outcome 6 (no name) = %+v; want an error", out[6])
	}
	for _, i := range []int{3, 4, 5, 6, 9, 10} {
		if o := out[i]; o.Existing || o.Wake != 0 || o.Record.Seq != 0 {
			t.Errorf("refused outcome %d = %+v; want only its error", i, o)
		}
	}
	if o := out[7]; o.Err != nil || o.Existing || o.Wake != 3 || o.Record.Seq <= r0.Record.Seq || string(o.Record.Payload) != "null" {
		t.Fatalf("outcome 7 = %+v; want recorded after 0, wake 3", o)
	}
	if o := out[8]; o.Err != nil || o.Existing || o.Wake != 1 || o.Record.Seq <= out[7].Record.Seq {
		t.Fatalf("outcome 8 = %+v; want recorded after 7, wake 1", o)
	}
	if o := out[11]; o.Err != nil || !o.Existing || o.Wake != 1 || o.Record.Seq != held.Seq || string(o.Record.Payload) != "null" {
		t.Fatalf("outcome 11 (a held key at the cap) = %+v; want %+v, wake 1", o, held)
	}

	// What the store holds: the recorded signals, nothing of the refused
	// ones; the next signal of each live instance finds the wake counter
	// the batch left.
	if list := signals(t, s, live); len(list) != 3 || list[0].Seq != before.Seq || list[1].Seq != r0.Record.Seq || list[2].Seq != out[7].Record.Seq {
		t.Fatalf("signals of the live instance = %+v", list)
	}
	if list := signals(t, s, capped); len(list) != 1 || list[0].Seq != held.Seq {
		t.Fatalf("signals of the capped instance = %+v", list)
	}
	if list := signals(t, s, other); len(list) != 1 || list[0].Seq != out[8].Record.Seq {
		t.Fatalf("signals of the other instance = %+v", list)
	}
	if list := signals(t, s, finished); len(list) != 0 {
		t.Fatalf("a refused signal was recorded for a finished instance: %+v", list)
	}
	if _, err := s.ListSignals(ctx(t), unknown); err == nil {
		t.Fatal("a refused signal created an unknown instance")
	}
	for _, c := range []struct {
		id   uuid.UUID
		wake int64
	}{{live, 4}, {capped, 2}, {other, 2}} {
		if _, wake, _ := signal(t, s, port.NewSignal{InstanceID: c.id, Name: "after"}); wake != c.wake {
			t.Errorf("the signal after the batch on %s: wake %d, want %d", c.id, wake, c.wake)
		}
	}
	if _, _, existing := signal(t, s, port.NewSignal{InstanceID: other, Name: "y", IdempotencyKey: "ko"}); existing {
		t.Error("the key of a refused signal was recorded")
	}
}

// testSignalsBatchSameInstance: signals of one instance in one batch are
// recorded one after the other, between the signals of others: Seqs
// increase in batch order, and each wake is one above the previous
// signal's of the instance.
func testSignalsBatchSameInstance(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	x, y := ids[0], ids[1]
	out := recordBatch(t, s,
		port.NewSignal{InstanceID: x, Name: "a", Payload: []byte(`1`)},
		port.NewSignal{InstanceID: y, Name: "a", Payload: []byte(`2`)},
		port.NewSignal{InstanceID: x, Name: "b", Payload: []byte(`3`)},
		port.NewSignal{InstanceID: x, Name: "c", Payload: []byte(`4`)},
	)
	wantWake := []int64{1, 1, 2, 3}
	for i, o := range out {
		if o.Err != nil || o.Existing || o.Wake != wantWake[i] || (i > 0 && o.Record.Seq <= out[i-1].Record.Seq) {
			t.Fatalf("outcome %d = %+v; want recorded with wake %d after %d", i, o, wantWake[i], out[max(i-1, 0)].Record.Seq)
		}
	}
	list := signals(t, s, x)
	if len(list) != 3 {
		t.Fatalf("signals of x = %+v", list)
	}
	for k, i := range []int{0, 2, 3} {
		if list[k].Seq != out[i].Record.Seq || list[k].Name != out[i].Record.Name || string(list[k].Payload) != string(out[i].Record.Payload) ||
			!list[k].CreatedAt.Equal(out[i].Record.CreatedAt) {
			t.Fatalf("signal %d of x = %+v, want %+v", k, list[k], out[i].Record)
		}
	}
	got := newOwner(1).mustClaim(t, s, longLease, x, y)
	for _, c := range got {
		if (c.ID == x && (c.Wake != 3 || len(c.Signals) != 3)) || (c.ID == y && (c.Wake != 1 || len(c.Signals) != 1)) {
			t.Fatalf("claim of %s: wake %d, %d signals", c.ID, c.Wake, len(c.Signals))
		}
	}
}

// testSignalsBatchEmpty: an empty batch is a no-op; a batch of invalid
// signals only refuses each; a call that fails as a whole (its context
// is cancelled) records none of its signals.
func testSignalsBatchEmpty(t *testing.T, s port.Store) {
	for _, sigs := range [][]port.NewSignal{nil, {}} {
		if out, err := s.RecordSignals(ctx(t), sigs); err != nil || len(out) != 0 {
			t.Fatalf("RecordSignals(%#v) = %+v, %v; want nothing", sigs, out, err)
		}
	}
	id := queueN(t, s, 1)[0]
	out := recordBatch(t, s, port.NewSignal{InstanceID: id}, port.NewSignal{Name: "no instance"})
	for i, o := range out {
		if o.Err == nil || o.Record.Seq != 0 {
			t.Fatalf("invalid signal %d = %+v; want an error", i, o)
		}
	}
	cancelled, cancel := context.WithCancel(ctx(t))
	cancel()
	if out, err := s.RecordSignals(cancelled, []port.NewSignal{{InstanceID: id, Name: "x"}, {InstanceID: id, Name: "y"}}); err == nil {
		t.Fatalf("RecordSignals with a cancelled context = %+v; want an error", out)
	}
	if list := signals(t, s, id); len(list) != 0 {
		t.Fatalf("signals after the refused batches: %+v", list)
	}
	if _, wake, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "first"}); wake != 1 {
		t.Fatalf("the first signal after the refused batches: wake %d, want 1", wake)
	}
}

// testSignalsBatchesConcurrent: batches that share instances, each
// naming them in another order, all commit (no deadlock), and every
// signal counts once in its instance's wake counter.
func testSignalsBatchesConcurrent(t *testing.T, s port.Store) {
	const (
		writers = 4
		rounds  = 10
	)
	ids := queueN(t, s, 5)
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				order := slices.Clone(ids)
				if (w+r)%2 == 1 {
					slices.Reverse(order)
				}
				sigs := make([]port.NewSignal, len(order))
				for i, id := range order {
					sigs[i] = port.NewSignal{InstanceID: id, Name: fmt.Sprintf("w%d.r%d", w, r)}
				}
				out, err := s.RecordSignals(ctx(t), sigs)
				if err == nil {
					for _, o := range out {
						err = errors.Join(err, o.Err)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a concurrent batch: %v", err)
	}
	for _, id := range ids {
		if _, wake, _ := signal(t, s, port.NewSignal{InstanceID: id, Name: "last"}); wake != writers*rounds+1 {
			t.Errorf("instance %s: wake %d after %d signals", id, wake, writers*rounds+1)
		}
	}
}
