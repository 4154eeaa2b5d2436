package postgres

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// TestParkSeesAWakeCommittedWhileItWaits: a signal's transaction holds the
// queue row, its wake bumped but not committed, when the owner parks the
// instance having seen no wake. The park's statement takes its snapshot
// before the wake commits and waits for the row; once the wake commits,
// the park must still see it — the instance is due now, not in an hour.
// (A park that compared the wake through a subquery reads its snapshot and
// loses the wake; this test fails with one.)
func TestParkSeesAWakeCommittedWhileItWaits(t *testing.T) {
	s := openTest(t)
	id := seed(t, s, 1)[0]
	owner := uuid.New()
	got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: owner, Term: 1, Lease: time.Hour, Limit: 1})
	if err != nil || len(got) != 1 || got[0].Wake != 0 {
		t.Fatalf("ClaimInstances = %+v, %v", got, err)
	}

	// The signal's transaction, open, holding the row.
	tx, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	var signaller int
	if err := tx.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&signaller); err != nil {
		t.Fatalf("pg_backend_pid: %v", err)
	}
	if _, err := tx.Exec(t.Context(), `UPDATE queued_instances SET wake = wake + 1, scheduled_at = least(scheduled_at, now())
		WHERE instance_id = $1`, id); err != nil {
		t.Fatalf("bumping the wake: %v", err)
	}

	type outcome struct {
		errs []error
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		errs, err := s.PersistProgress(t.Context(), []port.Progress{{InstanceID: id, Owner: owner, State: []byte("parked"),
			Park: &port.Park{Until: time.Now().Add(time.Hour), WakeSeen: 0}}})
		done <- outcome{errs, err}
	}()

	// The park waits for the signal's row lock: its snapshot predates the
	// wake.
	deadline := time.Now().Add(15 * time.Second)
	for count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, signaller) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the park never waited for the signal's transaction")
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("Commit: %v", err)
	}

	select {
	case o := <-done:
		if o.err != nil || len(o.errs) != 1 || o.errs[0] != nil {
			t.Fatalf("PersistProgress = %v, %v", o.errs, o.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the park did not finish after the signal committed")
	}
	if n := count(t, s, `SELECT count(*) FROM queued_instances WHERE instance_id = $1 AND lock_uuid IS NULL AND scheduled_at <= now()`, id); n != 1 {
		t.Fatal("the park lost the wake committed while it waited: the instance is not due now")
	}
	got, err = s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: uuid.New(), Term: 1, Lease: time.Hour, Limit: 1})
	if err != nil || len(got) != 1 || got[0].Wake != 1 || string(got[0].State) != "parked" {
		t.Fatalf("the claim after the park = %+v, %v", got, err)
	}
}
