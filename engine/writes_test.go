package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/metrics"
)

// flakyStore is a Store whose writes fail as a database failover makes
// them fail: unavailable for a while (down), or committed with the
// acknowledgement lost (ackLost), or refused as a whole because of one bad
// instance (poison). It fails the test when a batch names an instance
// twice: no store takes that, so such a batch could never be written.
type flakyStore struct {
	port.Store
	t *testing.T

	down            atomic.Bool  // every call but CompleteInstances fails
	completionsDown atomic.Bool  // CompleteInstances fails
	workflowsDown   atomic.Bool  // GetWorkflowByID fails
	ackLost         atomic.Int32 // CompleteInstances calls to commit and then fail
	poison          atomic.Pointer[uuid.UUID]

	mu          sync.Mutex
	failed      int           // calls failed while down
	completions [][]uuid.UUID // the instances of every CompleteInstances call
	changed     chan struct{}
}

func newFlakyStore(t *testing.T, s port.Store) *flakyStore {
	return &flakyStore{Store: s, t: t, changed: make(chan struct{})}
}

var errConnRefused = fmt.Errorf("dial tcp 10.0.0.1:5432: connect: connection refused: %w", port.ErrStoreUnavailable)

func (s *flakyStore) note(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait waits until cond (under s.mu) holds.
func (s *flakyStore) wait(what string, cond func() bool) {
	s.t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-limit.C:
			s.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *flakyStore) unavailable(down *atomic.Bool) error {
	if down.Load() {
		s.note(func() { s.failed++ })
		return errConnRefused
	}
	return nil
}

func (s *flakyStore) checkOnce(call string, ids []uuid.UUID) error {
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		if seen[id] {
			s.t.Errorf("%s named instance %s twice in one batch", call, id)
		}
		seen[id] = true
		if p := s.poison.Load(); p != nil && *p == id {
			return fmt.Errorf("%s: instance %s: ERROR: invalid byte sequence for encoding \"UTF8\" (SQLSTATE 22021)", call, id)
		}
	}
	return nil
}

func (s *flakyStore) GetWorkflowByID(ctx context.Context, id int64) (port.WorkflowVersion, error) {
	if err := s.unavailable(&s.workflowsDown); err != nil {
		return port.WorkflowVersion{}, err
	}
	return s.Store.GetWorkflowByID(ctx, id)
}

func (s *flakyStore) ClaimInstances(ctx context.Context, req port.ClaimRequest) ([]port.ClaimedInstance, error) {
	if err := s.unavailable(&s.down); err != nil {
		return nil, err
	}
	return s.Store.ClaimInstances(ctx, req)
}

func (s *flakyStore) RefreshLeases(ctx context.Context, req port.LeaseRefresh) (port.LeaseStatus, error) {
	if err := s.unavailable(&s.down); err != nil {
		return port.LeaseStatus{}, err
	}
	return s.Store.RefreshLeases(ctx, req)
}

func (s *flakyStore) PersistProgress(ctx context.Context, batch []port.Progress) ([]error, error) {
	if err := s.unavailable(&s.down); err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(batch))
	for i, p := range batch {
		ids[i] = p.InstanceID
	}
	if err := s.checkOnce("PersistProgress", ids); err != nil {
		return nil, err
	}
	return s.Store.PersistProgress(ctx, batch)
}

func (s *flakyStore) CompleteInstances(ctx context.Context, batch []port.Completion) ([]error, error) {
	ids := make([]uuid.UUID, len(batch))
	for i, c := range batch {
		ids[i] = c.InstanceID
	}
	s.note(func() { s.completions = append(s.completions, ids) })
	if err := s.unavailable(&s.completionsDown); err != nil {
		return nil, err
	}
	if err := s.checkOnce("CompleteInstances", ids); err != nil {
		return nil, err
	}
	out, err := s.Store.CompleteInstances(ctx, batch)
	if err == nil && s.ackLost.Add(-1) >= 0 {
		// Committed; the connection broke before the answer came.
		return nil, fmt.Errorf("complete %d instances: unexpected EOF: %w: %w", len(batch), port.ErrStoreUnavailable, port.ErrOutcomeUnknown)
	}
	return out, err
}

// failedCalls returns how many calls failed as unavailable.
func (s *flakyStore) failedCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// completeCalls returns the instances of every CompleteInstances call.
func (s *flakyStore) completeCalls() [][]uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.completions)
}

// A completion that committed but whose acknowledgement was lost (the
// database failed over between the commit and the answer) is retried, and
// the retry counts it as written: the instance is reported finished once,
// and not evicted as if its ownership had been lost.
func TestCompletionWhoseAcknowledgementWasLost(t *testing.T) {
	flaky := newFlakyStore(t, openSQLite(t))
	h := newHarnessOn(t, flaky)
	m := metrics.NewEngine(nil)
	e := h.start(1, func(c *engine.Config) { c.Metrics = m })
	id := h.submit(e, singleSpec, map[string]any{"n": 7})
	d := h.disp.one(t, "only", 1)

	flaky.ackLost.Store(1)
	echo(e, d)
	flaky.wait("the completion to be written and its answer lost", func() bool { return len(flaky.completions) == 1 })
	h.clock.AdvanceToTimer(t, time.Second) // the flusher's backoff
	if v := h.wait(e, id); v.State != port.StateComplete || jsonOf(t, v.Outputs) != `{"n":7}` {
		t.Fatalf("instance ended %s with %v, want COMPLETE with {n: 7}", v.State, v.Outputs)
	}
	if calls := flaky.completeCalls(); len(calls) != 2 {
		t.Fatalf("%d CompleteInstances calls, want 2 (the first's answer lost, then the replay)", len(calls))
	}
	if st := e.Stats(); st.Evictions != 0 {
		t.Fatalf("%d evictions: the replayed completion was taken for a lost lease", st.Evictions)
	}
	if n := testutil.ToFloat64(m.StoreRetries); n != 1 {
		t.Fatalf("robonet_store_write_retries_total = %v, want 1", n)
	}
	if got := len(h.history(id)); got != 1 {
		t.Fatalf("%d results recorded, want 1", got)
	}
}

// The livelock of a failover: while the store is unavailable an
// instance's completion waits in the flusher's queue; its lease lapses,
// the engine evicts it, and when the store is back it claims and
// completes it again. The two lives' completions must never go into one
// batch — a store refuses a batch naming an instance twice, and retrying
// it would refuse it for ever, holding back every write behind it — and
// the earlier life's must not land at all.
func TestTwoLivesOfAnInstanceNeverShareABatch(t *testing.T) {
	flaky := newFlakyStore(t, openSQLite(t))
	h := newHarnessOn(t, flaky)
	const lease = 300 * time.Millisecond // the store's lease runs on the wall clock
	e := h.start(1, func(c *engine.Config) {
		c.Lease, c.LeaseRefresh = lease, lease/4
		c.ClaimInterval = time.Second
	})
	x := h.submit(e, singleSpec, map[string]any{"n": 1})
	y := h.submit(e, singleSpec, map[string]any{"n": 2})
	ds := h.disp.take(t, 2)
	byID := map[uuid.UUID]port.TaskDispatch{ds[0].InstanceID: ds[0], ds[1].InstanceID: ds[1]}

	// The database goes away. y's completion fails and the flusher backs
	// off; x's completion waits in the queue behind it.
	flaky.down.Store(true)
	flaky.completionsDown.Store(true)
	downAt := time.Now()
	echo(e, byID[y])
	flaky.wait("y's completion to fail", func() bool { return len(flaky.completions) > 0 })
	echo(e, byID[x])
	waitUntil(t, "x's completion to be queued", func() bool { return e.PendingRows() > 0 })

	// Lease refreshes keep failing until the engine gives both instances
	// up; the leases lapse in the store too.
	for e.Stats().Held > 0 {
		h.clock.AdvanceToTimer(t, lease)
	}
	waitUntil(t, "the leases to lapse in the store", func() bool { return time.Since(downAt) > 2*lease })

	// The database is back, but the flusher is still backing off from y's
	// first completion: the engine claims both again and runs them (the
	// same attempts, resumed), and their new completions queue behind
	// x's first one.
	flaky.down.Store(false)
	before := len(flaky.completeCalls())
	for h.disp.pending() < 2 { // the next claim, and the dispatches it makes
		h.clock.AdvanceToTimer(t, time.Second)
	}
	for _, d := range h.disp.take(t, 2) {
		if !d.Resumed {
			t.Fatalf("dispatch %s of the instance claimed again is not marked resumed", d.ExecutionID)
		}
		answer(e, d, map[string]any{"n": "second life"})
	}
	waitUntil(t, "the second lives' completions to be queued or tried", func() bool {
		// Each completion is two rows (its result and itself) until the
		// flusher takes it.
		tried := map[uuid.UUID]bool{}
		for _, ids := range flaky.completeCalls()[before:] {
			for _, id := range ids {
				tried[id] = true
			}
		}
		return e.PendingRows()+2*int64(len(tried)) >= 4
	})
	flaky.completionsDown.Store(false)
	written := func() bool {
		for _, id := range []uuid.UUID{x, y} {
			if rec, err := h.store.GetInstance(ctxOf(t), id); err != nil || !rec.Status.Terminal() {
				return false
			}
		}
		return true
	}
	for !written() { // the flusher's backoff, whenever it armed it
		h.clock.AdvanceToTimer(t, time.Second)
	}
	for _, id := range []uuid.UUID{x, y} {
		v := h.wait(e, id)
		if v.State != port.StateComplete {
			t.Fatalf("instance %s ended %s", id, v.State)
		}
		// The second life's outputs: the first life's completion did not
		// land.
		if got := jsonOf(t, v.Outputs); got != `{"n":"second life"}` {
			t.Fatalf("instance %s completed with %s, the outputs of its earlier life", id, got)
		}
		if n := len(h.history(id)); n != 1 {
			t.Fatalf("instance %s: %d results recorded, want 1", id, n)
		}
	}
}

// A batch the store refuses because of one instance's write (not because
// it is unavailable) is split until that write is found; it is set aside
// (counted, its instance evicted) and every other write goes through.
func TestAWriteTheStoreRefusesIsSetAside(t *testing.T) {
	flaky := newFlakyStore(t, openSQLite(t))
	h := newHarnessOn(t, flaky)
	m := metrics.NewEngine(nil)
	e := h.start(1, func(c *engine.Config) {
		c.Metrics = m
		c.FlushInterval = time.Minute // one flush for every completion
		c.FlushMaxRows = 1000
	})
	const n = 9
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = h.submit(e, singleSpec, map[string]any{"n": i})
	}
	bad := ids[5]
	flaky.poison.Store(&bad)
	for _, d := range h.disp.take(t, n) {
		echo(e, d)
	}
	waitUntil(t, "every completion to be queued", func() bool { return e.PendingRows() == 2*n })
	h.clock.AdvanceToTimer(t, time.Minute)
	for range setAsideTries - 1 {
		h.clock.AdvanceToTimer(t, time.Second) // the refused write's backoffs
	}
	waitUntil(t, "the refused write to be set aside", func() bool { return testutil.ToFloat64(m.WritesSetAside) == 1 })
	for _, id := range ids {
		if id == bad {
			continue
		}
		if v := h.wait(e, id); v.State != port.StateComplete {
			t.Fatalf("instance %s ended %s", id, v.State)
		}
	}
	waitUntil(t, "the refused instance to be evicted", func() bool { return e.Stats().Evictions == 1 })
	rec, err := h.store.GetInstance(ctxOf(t), bad)
	if err != nil || rec.Status != port.StateRunning {
		t.Fatalf("the refused instance is %s (%v) in the store, want running (it is claimed again when its lease lapses)", rec.Status, err)
	}
	// log2(9) rounds of halves, plus the tries of the refused write alone.
	if calls := len(flaky.completeCalls()); calls > 2*4+setAsideTries {
		t.Fatalf("%d CompleteInstances calls to find one bad write among %d", calls, n)
	}
}

// setAsideTries mirrors the engine's: a write refused on its own is tried
// this many times.
const setAsideTries = 3

// An instance claimed while the store cannot read its workflow (the
// database failing over between the claim and the read) is not failed for
// it: it is given back and runs at a later claim.
func TestAClaimedInstanceIsNotFailedForAStoreOutage(t *testing.T) {
	flaky := newFlakyStore(t, openSQLite(t))
	h := newHarnessOn(t, flaky)
	// Submitted through an engine that does not run: queued, unclaimed.
	id := h.submit(h.newEngine(1), singleSpec, map[string]any{"n": 3})

	flaky.workflowsDown.Store(true)
	e := h.start(2, func(c *engine.Config) { c.ClaimInterval = time.Minute })
	givenBack := func() bool { return flaky.failedCalls() >= 2 && e.Stats().Held == 0 } // retried, then given back
	for !givenBack() {
		waitUntil(t, "a retry to be due, or the instance given back", func() bool {
			return h.clock.HasTimerWithin(time.Second) || givenBack()
		})
		if !givenBack() {
			h.clock.AdvanceToTimer(t, time.Second)
		}
	}
	if rec, err := h.store.GetInstance(ctxOf(t), id); err != nil || rec.Status.Terminal() {
		t.Fatalf("the instance is %s (%v) after the outage, want it still to run", rec.Status, err)
	}

	flaky.workflowsDown.Store(false)
	h.clock.AdvanceToTimer(t, time.Minute) // the next claim
	echo(e, h.disp.one(t, "only", 1))
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("instance ended %s, want COMPLETE", v.State)
	}
}
