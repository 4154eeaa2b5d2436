package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
)

// Tests of guarantees that only a shared, networked database can break:
// concurrent claimers on several nodes, connections that die mid-flight.

// openOn opens another store (another "node") on an existing schema.
func openOn(t *testing.T, dsn, schema string, tracer pgx.QueryTracer) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 4, Logger: zaptest.NewLogger(t), Tracer: tracer})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// seed registers a workflow and queues n due instances in batches.
func seed(t *testing.T, s *Store, n int) []uuid.UUID {
	t.Helper()
	wf, err := s.RegisterWorkflow(t.Context(), port.WorkflowVersion{Name: "wf", Version: 1, IRHash: "sha256:x", IR: []byte("x")})
	if err != nil {
		t.Fatalf("RegisterWorkflow: %v", err)
	}
	var ids []uuid.UUID
	for len(ids) < n {
		batch := make([]port.NewInstance, min(500, n-len(ids)))
		for i := range batch {
			batch[i] = port.NewInstance{ID: uuid.New(), WorkflowVersionID: wf.ID, Inputs: []byte("{}"), State: []byte("s0")}
		}
		if _, err := s.QueueInstances(t.Context(), batch); err != nil {
			t.Fatalf("QueueInstances: %v", err)
		}
		for _, b := range batch {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// count runs a count(*) query.
func count(t *testing.T, s *Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestMigrateConcurrently: nodes opening one schema at the same moment
// apply each migration once and all come up.
func TestMigrateConcurrently(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	const nodes = 6
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			stores[i], errs[i] = Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: Open: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	migrations, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, stores[0], `SELECT count(*) FROM schema_migrations`); got != len(migrations) {
		t.Fatalf("schema_migrations has %d rows, want %d", got, len(migrations))
	}
}

// TestConcurrentClaimersNeverOverlap: four nodes race for 1,000 instances.
// Each claim, release and completion is checked against a shared record of
// who holds what: no instance is ever held by two claimers at once, every
// instance is completed exactly once, and every claimer's writes succeed
// while it holds the lease.
func TestConcurrentClaimersNeverOverlap(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	first := openOn(t, dsn, schema, nil)
	ids := seed(t, first, 1000)

	var (
		mu        sync.Mutex
		holder    = make(map[uuid.UUID]uuid.UUID) // instance → lock id holding it, per the claimers
		visits    = make(map[uuid.UUID]int)       // claims per instance
		completed = make(map[uuid.UUID]int)
		problems  []string
		done      atomic.Int64
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const claimers = 4
	var wg sync.WaitGroup
	for c := range claimers {
		s := first
		if c > 0 {
			s = openOn(t, dsn, schema, nil)
		}
		me := uuid.New()
		wg.Go(func() {
			for done.Load() < int64(len(ids)) && ctx.Err() == nil {
				claimed, err := s.ClaimInstances(ctx, port.ClaimRequest{Owner: me, Term: 1, Lease: time.Minute, Limit: 25})
				if err != nil {
					report("claimer %d: claim: %v", c, err)
					return
				}
				var release []uuid.UUID
				var finish []port.Completion
				mu.Lock()
				for _, ci := range claimed {
					if h, held := holder[ci.ID]; held {
						problems = append(problems, fmt.Sprintf("instance %s claimed by %s while %s holds it", ci.ID, me, h))
					}
					holder[ci.ID] = me
					visits[ci.ID]++
				}
				mu.Unlock()

				// Record a result for every claimed instance; release those
				// seen for the first time (someone must claim them again),
				// complete the others.
				progress := make([]port.Progress, len(claimed))
				for i, ci := range claimed {
					progress[i] = port.Progress{InstanceID: ci.ID, Owner: me, State: []byte(me.String()),
						Results: []port.ActionResult{{ExecutionID: "step", Attempt: uint32(len(ci.Results) + 1), OK: true, Output: []byte("1")}}}
				}
				outcomes, err := s.PersistProgress(ctx, progress)
				if err != nil {
					report("claimer %d: persist: %v", c, err)
					return
				}
				mu.Lock()
				for i, ci := range claimed {
					if outcomes[i] != nil {
						problems = append(problems, fmt.Sprintf("instance %s: progress refused while held: %v", ci.ID, outcomes[i]))
					}
					delete(holder, ci.ID) // before the store lets go of it
					if len(ci.Results) == 0 {
						release = append(release, ci.ID)
					} else {
						finish = append(finish, port.Completion{InstanceID: ci.ID, Owner: me, Status: port.StateComplete, Output: []byte("1")})
						completed[ci.ID]++
					}
				}
				mu.Unlock()

				if err := s.ReleaseLeases(ctx, me, release); err != nil {
					report("claimer %d: release: %v", c, err)
					return
				}
				outcomes, err = s.CompleteInstances(ctx, finish)
				if err != nil {
					report("claimer %d: complete: %v", c, err)
					return
				}
				for i, err := range outcomes {
					if err != nil {
						report("instance %s: completion refused while held: %v", finish[i].InstanceID, err)
					}
				}
				done.Add(int64(len(finish)))
			}
		})
	}
	wg.Wait()

	for _, p := range problems {
		t.Error(p)
	}
	if t.Failed() {
		return
	}
	if done.Load() != int64(len(ids)) {
		t.Fatalf("completed %d of %d instances", done.Load(), len(ids))
	}
	for _, id := range ids {
		if completed[id] != 1 || visits[id] != 2 {
			t.Fatalf("instance %s: %d claims and %d completions, want 2 and 1", id, visits[id], completed[id])
		}
	}
	if n := count(t, first, `SELECT count(*) FROM runner_instances WHERE status = 'complete'`); n != len(ids) {
		t.Fatalf("%d instances complete in the database, want %d", n, len(ids))
	}
	if n := count(t, first, `SELECT count(*) FROM queued_instances`); n != 0 {
		t.Fatalf("%d instances left in the queue", n)
	}
	if n := count(t, first, `SELECT count(*) FROM runner_actions_done`); n != 2*len(ids) {
		t.Fatalf("%d results recorded, want %d (two per instance)", n, 2*len(ids))
	}
}

// killBeforeCommit is a query tracer that, once armed, terminates the
// backend that just ran the queueing statement, before its transaction
// commits: the client's connection dies between the insert and the commit.
// It recognises the statement by the "-- name:" comment our SQL starts with.
type killBeforeCommit struct {
	t     *testing.T
	dsn   string
	armed atomic.Bool
	fired atomic.Bool
}

// queueStatement marks the context of a traced queueing statement.
type queueStatement struct{}

func (k *killBeforeCommit) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, "-- name: queue_instances") {
		return context.WithValue(ctx, queueStatement{}, true)
	}
	return ctx
}

func (k *killBeforeCommit) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if ctx.Value(queueStatement{}) == nil || data.Err != nil || !k.armed.CompareAndSwap(true, false) {
		return
	}
	pid := conn.PgConn().PID()
	killer, err := pgx.Connect(context.Background(), k.dsn)
	if err != nil {
		k.t.Errorf("connecting to kill backend %d: %v", pid, err)
		return
	}
	defer killer.Close(context.Background())
	// Wait (up to 10 s) until the backend is gone.
	var ok bool
	if err := killer.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
		k.t.Errorf("terminating backend %d: %v, %v", pid, ok, err)
		return
	}
	k.fired.Store(true)
}

// TestQueueAcknowledgedOnlyAfterCommit: when the connection dies after the
// rows were inserted but before the commit, QueueInstances fails and
// neither row of any instance exists — never a queue row without its
// runner row or the reverse.
func TestQueueAcknowledgedOnlyAfterCommit(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	kill := &killBeforeCommit{t: t, dsn: dsn}
	s := openOn(t, dsn, schema, nil)
	wf, err := s.RegisterWorkflow(t.Context(), port.WorkflowVersion{Name: "wf", Version: 1, IRHash: "sha256:x", IR: []byte("x")})
	if err != nil {
		t.Fatalf("RegisterWorkflow: %v", err)
	}
	victim := openOn(t, dsn, schema, kill)

	batch := make([]port.NewInstance, 50)
	for i := range batch {
		batch[i] = port.NewInstance{ID: uuid.New(), WorkflowVersionID: wf.ID, Inputs: []byte("{}"), IdempotencyKey: fmt.Sprint("k", i)}
	}
	kill.armed.Store(true)
	got, err := victim.QueueInstances(t.Context(), batch)
	if !kill.fired.Load() {
		t.Fatalf("the connection was not killed (QueueInstances = %v, %v)", got, err)
	}
	if err == nil {
		t.Fatalf("QueueInstances acknowledged %d instances although its connection died before the commit", len(got))
	}
	t.Logf("QueueInstances failed as it should: %v", err)
	if !errors.Is(err, port.ErrStoreUnavailable) || !errors.Is(err, port.ErrOutcomeUnknown) {
		t.Fatalf("the error of a connection lost before the commit does not say the store is unavailable and the outcome unknown: %v", err)
	}

	if n := count(t, s, `SELECT count(*) FROM runner_instances`); n != 0 {
		t.Errorf("%d runner rows survived the failed submission", n)
	}
	if n := count(t, s, `SELECT count(*) FROM queued_instances`); n != 0 {
		t.Errorf("%d queue rows survived the failed submission", n)
	}

	// The client retries (same ids, same keys) and succeeds; both rows of
	// every instance exist, and a second retry only finds them.
	for attempt := range 2 {
		got, err = victim.QueueInstances(t.Context(), batch)
		if err != nil {
			t.Fatalf("retry %d: %v", attempt, err)
		}
		for i, q := range got {
			if q.ID != batch[i].ID || q.Existing != (attempt == 1) {
				t.Fatalf("retry %d: instance %d = %+v", attempt, i, q)
			}
		}
	}
	if n := count(t, s, `SELECT count(*) FROM queued_instances q FULL JOIN runner_instances r USING (instance_id)
		WHERE q.instance_id IS NULL OR r.instance_id IS NULL`); n != 0 {
		t.Fatalf("%d instances have one row without the other", n)
	}
	if n := count(t, s, `SELECT count(*) FROM queued_instances`); n != len(batch) {
		t.Fatalf("%d instances queued, want %d", n, len(batch))
	}
}

// dropConnections terminates every idle connection of s's pool from the
// server side, as when a node's network or process dies: no release, no
// cleanup.
func dropConnections(t *testing.T, s *Store) {
	t.Helper()
	conns := s.pool.AcquireAllIdle(t.Context())
	var pids []uint32
	for _, c := range conns {
		pids = append(pids, c.Conn().PgConn().PID())
		c.Release()
	}
	if len(pids) == 0 {
		t.Fatalf("no idle connection to drop")
	}
	pgtest.Exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM unnest($1::int[]) AS pid`, pids)
}

// persistEventually retries PersistProgress past the errors of a broken
// connection (the pool reconnects) and returns the instance's outcome.
func persistEventually(t *testing.T, s *Store, p port.Progress) error {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := s.PersistProgress(t.Context(), []port.Progress{p})
		if err == nil {
			return out[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("PersistProgress kept failing: %v", err)
		}
		t.Logf("PersistProgress through a dropped connection: %v (retrying)", err)
	}
}

// TestVanishedOwnerLosesItsInstances: an owner whose connections die
// mid-flight, with no cleanup, loses its instances when the lease lapses
// (same term) or at once (newer term), and its later writes are refused.
func TestVanishedOwnerLosesItsInstances(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lease      time.Duration
		nextTerm   uint64
		wantAtOnce bool
	}{
		{name: "lease expiry", lease: 300 * time.Millisecond, nextTerm: 1},
		{name: "newer term", lease: time.Hour, nextTerm: 2, wantAtOnce: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, schema := pgtest.Schema(t)
			gone := openOn(t, dsn, schema, nil)
			next := openOn(t, dsn, schema, nil)
			ids := seed(t, gone, 3)
			goneOwner, nextOwner := uuid.New(), uuid.New()

			claimed, err := gone.ClaimInstances(t.Context(), port.ClaimRequest{Owner: goneOwner, Term: 1, Lease: tc.lease, Limit: 10})
			if err != nil || len(claimed) != len(ids) {
				t.Fatalf("claim = %d instances, %v", len(claimed), err)
			}
			dropConnections(t, gone)

			// The successor takes everything over: at once, or once the
			// lease lapses (polled, with a bound).
			var took []port.ClaimedInstance
			deadline := time.Now().Add(15 * time.Second)
			for len(took) < len(ids) {
				got, err := next.ClaimInstances(t.Context(), port.ClaimRequest{Owner: nextOwner, Term: tc.nextTerm, Lease: time.Hour, Limit: 10})
				if err != nil {
					t.Fatalf("successor claim: %v", err)
				}
				took = append(took, got...)
				if tc.wantAtOnce && len(took) < len(ids) {
					t.Fatalf("a newer term took %d of %d instances at once", len(took), len(ids))
				}
				if time.Now().After(deadline) {
					t.Fatalf("the successor took %d of %d instances within 15s", len(took), len(ids))
				}
				if len(took) < len(ids) {
					time.Sleep(20 * time.Millisecond) // poll interval
				}
			}

			// The vanished owner comes back (its pool reconnects) and tries
			// to write: refused, and nothing of it lands.
			for _, id := range ids {
				err := persistEventually(t, gone, port.Progress{InstanceID: id, Owner: goneOwner, State: []byte("stale"),
					Results: []port.ActionResult{{ExecutionID: "t", Attempt: 1, OK: true, Output: []byte("stale")}}})
				if !errors.Is(err, port.ErrOwnershipLost) {
					t.Fatalf("write of the vanished owner on %s: %v, want ErrOwnershipLost", id, err)
				}
				out, err := gone.CompleteInstances(t.Context(), []port.Completion{{InstanceID: id, Owner: goneOwner, Status: port.StateFailed}})
				if err != nil || !errors.Is(out[0], port.ErrOwnershipLost) {
					t.Fatalf("completion by the vanished owner on %s: %v, %v", id, out, err)
				}
			}
			if n := count(t, next, `SELECT count(*) FROM runner_actions_done`); n != 0 {
				t.Fatalf("%d results of the vanished owner were recorded", n)
			}
			if n := count(t, next, `SELECT count(*) FROM runner_instances WHERE state = 's0' AND status = 'running'`); n != len(ids) {
				t.Fatalf("%d of %d instances kept their snapshot and status", n, len(ids))
			}
			// The successor owns them and writes normally.
			out, err := next.PersistProgress(t.Context(), []port.Progress{{InstanceID: ids[0], Owner: nextOwner, State: []byte("s1")}})
			if err != nil || out[0] != nil {
				t.Fatalf("successor's write: %v, %v", out, err)
			}
		})
	}
}
