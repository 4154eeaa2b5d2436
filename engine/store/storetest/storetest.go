// Package storetest is the conformance suite of port.Store: one set of
// behaviours that every adapter (Postgres, SQLite) must show. An adapter's
// tests call Run with a constructor that returns a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) port.Store { return openFresh(t) })
//	}
//
// Every behaviour is one subtest function, so a failure names the broken
// promise. Subtests run in parallel, each on its own store. Nothing here
// sleeps for a fixed time: waiting for a lease to lapse polls with a bounded
// deadline.
//
// Timing assumptions: the store's clock (the database server's, for
// Postgres) and the test's clock agree to within a few minutes; schedules in
// the future are an hour ahead.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// NewStore returns a fresh, empty store for one test; the constructor
// registers its own cleanup (closing, dropping the schema, removing files).
type NewStore func(t *testing.T) port.Store

// Run runs the whole suite against the adapter that newStore builds.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s port.Store)
	}{
		{"Ping", testPing},
		{"Schedules", testSchedules},
		{"ScheduleRunOnce", testScheduleRunOnce},
		{"PoolStats", testPoolStats},
		{"ListInstancesByIDPrefixAndAge", testListInstancesByIDPrefixAndAge},
		{"RegisterWorkflow", testRegisterWorkflow},
		{"RegisterWorkflowConflict", testRegisterWorkflowConflict},
		{"GetWorkflowNotFound", testGetWorkflowNotFound},
		{"ListWorkflows", testListWorkflows},
		{"QueueWritesBothRows", testQueueWritesBothRows},
		{"QueueUnknownWorkflow", testQueueUnknownWorkflow},
		{"QueueIdempotencyKey", testQueueIdempotencyKey},
		{"QueueIdempotencyConflict", testQueueIdempotencyConflict},
		{"QueueClaimed", testQueueClaimed},
		{"QueueChildInstances", testQueueChildInstances},
		{"ClaimDueOnly", testClaimDueOnly},
		{"ClaimLimit", testClaimLimit},
		{"ClaimExclusiveWhileLeaseLives", testClaimExclusiveWhileLeaseLives},
		{"ClaimAfterLeaseExpiry", testClaimAfterLeaseExpiry},
		{"ClaimNewerTermTakesOver", testClaimNewerTermTakesOver},
		{"ClaimOlderTermCannot", testClaimOlderTermCannot},
		{"HydrateLatestResultPerExecution", testHydrateLatestResultPerExecution},
		{"ProgressResultsInOrder", testProgressResultsInOrder},
		{"ProgressDuplicateResultIgnored", testProgressDuplicateResultIgnored},
		{"ProgressStateAndSchedule", testProgressStateAndSchedule},
		{"ProgressGathering", testProgressGathering},
		{"ProgressSameInstanceTwiceInBatch", testProgressSameInstanceTwiceInBatch},
		{"ProgressStaleOwnerRefused", testProgressStaleOwnerRefused},
		{"ProgressTwoOwners", testProgressTwoOwners},
		{"ProgressExpiredLeaseRefused", testProgressExpiredLeaseRefused},
		{"Complete", testComplete},
		{"CompleteStaleOwnerRefused", testCompleteStaleOwnerRefused},
		{"CompleteReplayed", testCompleteReplayed},
		{"RefreshExtends", testRefreshExtends},
		{"RefreshReportsLost", testRefreshReportsLost},
		{"RefreshReportsCancel", testRefreshReportsCancel},
		{"Release", testRelease},
		{"ReclaimExpired", testReclaimExpired},
		{"RequestCancelQueued", testRequestCancelQueued},
		{"RequestCancelRunning", testRequestCancelRunning},
		{"RequestCancelFinished", testRequestCancelFinished},
		{"Sweep", testSweep},
		{"GetInstance", testGetInstance},
		{"ListInstancesFilters", testListInstancesFilters},
		{"ListInstancesPaging", testListInstancesPaging},
		{"TaskHistory", testTaskHistory},
		{"FenceMonotonic", testFenceMonotonic},
		{"ClaimScopedToPartitions", testClaimScopedToPartitions},
		{"FenceRefusesLiveLeases", testFenceRefusesLiveLeases},
		{"FencedPartitionNotClaimedByOthers", testFencedPartitionNotClaimedByOthers},
		{"QueueClaimedInFencedPartition", testQueueClaimedInFencedPartition},
		{"SignalsIdempotent", testSignalsIdempotent},
		{"SignalsPendingCap", testSignalsPendingCap},
		{"SignalFinishedRefused", testSignalFinishedRefused},
		{"SignalsConsumed", testSignalsConsumed},
		{"SignalsSweptWithInstance", testSignalsSweptWithInstance},
		{"SignalsBatch", testSignalsBatch},
		{"SignalsBatchSameInstance", testSignalsBatchSameInstance},
		{"SignalsBatchEmpty", testSignalsBatchEmpty},
		{"SignalsBatchesConcurrent", testSignalsBatchesConcurrent},
		{"ParkWakeRace", testParkWakeRace},
		{"ParkCancelRequested", testParkCancelRequested},
		{"ParkStaleOwnerRefused", testParkStaleOwnerRefused},
		{"PauseFlag", testPauseFlag},
		{"Reopen", testReopen},
		{"CloseIdempotent", testCloseIdempotent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// Lease lengths: long enough never to lapse during a test, short enough to
// lapse quickly when a test waits for it.
const (
	longLease  = time.Hour
	shortLease = 100 * time.Millisecond
	// waitLimit bounds every poll.
	waitLimit = 15 * time.Second
)

// ---------------------------------------------------------------- helpers

// hashOf returns an IR hash in the "sha256:…" form of spec.Hash.
func hashOf(ir []byte) string {
	sum := sha256.Sum256(ir)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// register stores a workflow version whose IR is derived from its name and
// version.
func register(t *testing.T, s port.Store, name string, version uint32) port.WorkflowVersion {
	t.Helper()
	ir := []byte(fmt.Sprintf("ir of %s v%d", name, version))
	wf, err := s.RegisterWorkflow(t.Context(), port.WorkflowVersion{Name: name, Version: version, IRHash: hashOf(ir), IR: ir})
	if err != nil {
		t.Fatalf("RegisterWorkflow(%s v%d): %v", name, version, err)
	}
	return wf
}

// newInstance is a due instance of wf with recognisable inputs and state.
func newInstance(wf port.WorkflowVersion) port.NewInstance {
	id := uuid.New()
	return port.NewInstance{
		ID:                id,
		WorkflowVersionID: wf.ID,
		Inputs:            []byte(fmt.Sprintf(`{"id":%q}`, id)),
		State:             []byte("state0:" + id.String()),
	}
}

// queue queues the instances and checks that each was queued anew.
func queue(t *testing.T, s port.Store, in ...port.NewInstance) []uuid.UUID {
	t.Helper()
	got, err := s.QueueInstances(t.Context(), in)
	if err != nil {
		t.Fatalf("QueueInstances: %v", err)
	}
	if len(got) != len(in) {
		t.Fatalf("QueueInstances returned %d results for %d instances", len(got), len(in))
	}
	ids := make([]uuid.UUID, len(got))
	for i, q := range got {
		if q.Existing || q.ID != in[i].ID {
			t.Fatalf("QueueInstances[%d] = %+v, want a new instance %s", i, q, in[i].ID)
		}
		ids[i] = q.ID
	}
	return ids
}

// queueN queues n due instances of a fresh workflow and returns their ids.
func queueN(t *testing.T, s port.Store, n int) []uuid.UUID {
	t.Helper()
	wf := register(t, s, "wf", 1)
	in := make([]port.NewInstance, n)
	for i := range in {
		in[i] = newInstance(wf)
	}
	return queue(t, s, in...)
}

// owner is a claimer: a lock id and a term.
type owner struct {
	id   uuid.UUID
	term uint64
}

func newOwner(term uint64) owner { return owner{id: uuid.New(), term: term} }

// claim claims up to limit instances for o.
func (o owner) claim(t *testing.T, s port.Store, lease time.Duration, limit int) []port.ClaimedInstance {
	t.Helper()
	got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: o.id, Term: o.term, Lease: lease, Limit: limit})
	if err != nil {
		t.Fatalf("ClaimInstances(owner %s, term %d): %v", o.id, o.term, err)
	}
	return got
}

// claimAll claims every due instance (up to 1000).
func (o owner) claimAll(t *testing.T, s port.Store, lease time.Duration) []port.ClaimedInstance {
	t.Helper()
	return o.claim(t, s, lease, 1000)
}

// mustClaim claims and checks that exactly want were claimed.
func (o owner) mustClaim(t *testing.T, s port.Store, lease time.Duration, want ...uuid.UUID) []port.ClaimedInstance {
	t.Helper()
	got := o.claimAll(t, s, lease)
	if !sameIDs(claimedIDs(got), want) {
		t.Fatalf("owner %s (term %d) claimed %v, want %v", o.id, o.term, claimedIDs(got), want)
	}
	return got
}

// claimEventually polls until o claims id or the wait limit passes: for
// leases that must lapse first.
func (o owner) claimEventually(t *testing.T, s port.Store, id uuid.UUID) port.ClaimedInstance {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		for _, c := range o.claimAll(t, s, longLease) {
			if c.ID == id {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner %s could not claim %s within %s", o.id, id, waitLimit)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// persist writes one instance's progress and returns its outcome.
func (o owner) persist(t *testing.T, s port.Store, p port.Progress) error {
	t.Helper()
	p.Owner = o.id
	out, err := s.PersistProgress(t.Context(), []port.Progress{p})
	if err != nil {
		t.Fatalf("PersistProgress: %v", err)
	}
	if len(out) != 1 {
		t.Fatalf("PersistProgress returned %d outcomes for 1 entry", len(out))
	}
	return out[0]
}

// mustPersist persists and requires success.
func (o owner) mustPersist(t *testing.T, s port.Store, p port.Progress) {
	t.Helper()
	if err := o.persist(t, s, p); err != nil {
		t.Fatalf("PersistProgress(%s): %v", p.InstanceID, err)
	}
}

// complete completes one instance and returns its outcome.
func (o owner) complete(t *testing.T, s port.Store, c port.Completion) error {
	t.Helper()
	c.Owner = o.id
	out, err := s.CompleteInstances(t.Context(), []port.Completion{c})
	if err != nil {
		t.Fatalf("CompleteInstances: %v", err)
	}
	if len(out) != 1 {
		t.Fatalf("CompleteInstances returned %d outcomes for 1 entry", len(out))
	}
	return out[0]
}

// result makes an action result; its output names execution and attempt.
func result(instance uuid.UUID, execution string, attempt uint32, ok bool) port.ActionResult {
	r := port.ActionResult{
		InstanceID:  instance,
		ExecutionID: execution,
		Attempt:     attempt,
		OK:          ok,
		WorkerID:    "worker-1",
		StartedAt:   time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		FinishedAt:  time.Date(2026, 1, 2, 3, 4, 6, 7000, time.UTC),
	}
	if ok {
		r.Output = []byte(fmt.Sprintf(`{"exec":%q,"attempt":%d}`, execution, attempt))
	} else {
		r.Error = fmt.Sprintf("%s attempt %d failed", execution, attempt)
	}
	return r
}

// checkResults compares results field by field (times at microsecond
// precision, the precision both databases keep).
func checkResults(t *testing.T, what string, got, want []port.ActionResult) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d results %v, want %d %v", what, len(got), keys(got), len(want), keys(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.InstanceID != w.InstanceID || g.ExecutionID != w.ExecutionID || g.Attempt != w.Attempt ||
			g.OK != w.OK || !bytes.Equal(g.Output, w.Output) || g.Error != w.Error || g.WorkerID != w.WorkerID ||
			!g.StartedAt.Equal(w.StartedAt.Truncate(time.Microsecond)) ||
			!g.FinishedAt.Equal(w.FinishedAt.Truncate(time.Microsecond)) {
			t.Fatalf("%s: result %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// keys lists results as "execution#attempt".
func keys(rs []port.ActionResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s#%d", r.ExecutionID, r.Attempt)
	}
	return out
}

func claimedIDs(cs []port.ClaimedInstance) []uuid.UUID {
	out := make([]uuid.UUID, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// sameIDs compares as sets.
func sameIDs(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	cmp := func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) }
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// get reads an instance.
func get(t *testing.T, s port.Store, id uuid.UUID) port.InstanceRecord {
	t.Helper()
	rec, err := s.GetInstance(t.Context(), id)
	if err != nil {
		t.Fatalf("GetInstance(%s): %v", id, err)
	}
	return rec
}

// history reads the task history of an instance.
func history(t *testing.T, s port.Store, id uuid.UUID) []port.ActionResult {
	t.Helper()
	h, err := s.TaskHistory(t.Context(), id)
	if err != nil {
		t.Fatalf("TaskHistory(%s): %v", id, err)
	}
	return h
}

// wantErr checks that err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one wrapping %q", what, err, target)
	}
}

// ctx is shorthand for the test's context.
func ctx(t *testing.T) context.Context { return t.Context() }

func testPing(t *testing.T, s port.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping with a cancelled context succeeded: a probe could not time out")
	}
}

func testSchedules(t *testing.T, s port.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	cronRec := port.ScheduleRecord{Name: "nightly", Workflow: "wf", Version: 2, Inputs: []byte(`{"n":1}`), Cron: "0 2 * * *",
		Jitter: 1500 * time.Millisecond, NextRunAt: t0.Add(time.Hour), CreatedAt: t0}
	everyRec := port.ScheduleRecord{Name: "every", Workflow: "wf", Interval: 90 * time.Second, AllowDuplicate: true,
		NextRunAt: t0.Add(time.Minute), CreatedAt: t0}
	for _, r := range []port.ScheduleRecord{cronRec, everyRec} {
		if err := s.CreateSchedule(ctx, r); err != nil {
			t.Fatalf("CreateSchedule %s: %v", r.Name, err)
		}
	}
	if err := s.CreateSchedule(ctx, cronRec); !errors.Is(err, port.ErrScheduleExists) {
		t.Fatalf("a second schedule named nightly: %v, want ErrScheduleExists", err)
	}
	got, err := s.GetSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cronRec) {
		t.Fatalf("GetSchedule:\n got %+v\nwant %+v", got, cronRec)
	}
	if _, err := s.GetSchedule(ctx, "nope"); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("GetSchedule of an unknown name: %v", err)
	}
	list, err := s.ListSchedules(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "every" || list[1].Name != "nightly" || list[0].Interval != 90*time.Second || !list[0].AllowDuplicate {
		t.Fatalf("ListSchedules: %+v, %v", list, err)
	}

	// Due: NextRunAt at or before now, earliest first, active only.
	due, err := s.DueSchedules(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].Name != "every" {
		t.Fatalf("due a minute in: %+v, %v", due, err)
	}
	if due, _ = s.DueSchedules(ctx, t0.Add(2*time.Hour), 1); len(due) != 1 || due[0].Name != "every" {
		t.Fatalf("due two hours in, limit 1: %+v", due)
	}
	paused, err := s.SetSchedulePaused(ctx, "every", true, time.Time{})
	if err != nil || !paused.Paused || !paused.NextRunAt.IsZero() {
		t.Fatalf("paused: %+v, %v", paused, err)
	}
	if due, _ = s.DueSchedules(ctx, t0.Add(2*time.Hour), 10); len(due) != 1 || due[0].Name != "nightly" {
		t.Fatalf("due with every paused: %+v", due)
	}
	resumed, err := s.SetSchedulePaused(ctx, "every", false, t0.Add(3*time.Hour))
	if err != nil || resumed.Paused || !resumed.NextRunAt.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("resumed: %+v, %v", resumed, err)
	}
	if _, err := s.SetSchedulePaused(ctx, "nope", true, time.Time{}); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("pausing an unknown schedule: %v", err)
	}
	if err := s.DeleteSchedule(ctx, "every"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSchedule(ctx, "every"); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if list, _ = s.ListSchedules(ctx); len(list) != 1 {
		t.Fatalf("after the delete: %+v", list)
	}
}

// A slot is recorded once: the second engine to record it (the same slot)
// changes nothing, and a skipped slot keeps the last run.
func testScheduleRunOnce(t *testing.T, s port.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	if err := s.CreateSchedule(ctx, port.ScheduleRecord{Name: "s", Workflow: "wf", Interval: time.Minute, NextRunAt: t0, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	run := port.ScheduleRun{Name: "s", Slot: t0, Next: t0.Add(time.Minute), RanAt: t0.Add(time.Second), InstanceID: id}
	if err := s.RecordScheduleRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	again := run
	again.Next, again.InstanceID = t0.Add(time.Hour), uuid.New()
	if err := s.RecordScheduleRun(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSchedule(ctx, "s")
	if err != nil || !got.NextRunAt.Equal(t0.Add(time.Minute)) || got.LastInstanceID != id || !got.LastRunAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after recording the slot twice: %+v, %v", got, err)
	}
	skip := port.ScheduleRun{Name: "s", Slot: t0.Add(time.Minute), Next: t0.Add(2 * time.Minute), RanAt: t0.Add(61 * time.Second), Skipped: "busy"}
	if err := s.RecordScheduleRun(ctx, skip); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSchedule(ctx, "s")
	if !got.NextRunAt.Equal(t0.Add(2*time.Minute)) || got.LastInstanceID != id || !got.LastRunAt.Equal(t0.Add(time.Second)) || got.LastSkipped != "busy" {
		t.Fatalf("after a skipped slot: %+v", got)
	}
}

// A pool's statistics replace its previous row; pools are listed by node,
// capability and pool.
func testPoolStats(t *testing.T, s port.Store) {
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w1 := port.PoolStatus{Node: "w1", Capability: "core", Pool: "core", Slots: 8, Busy: 3, Completed: 1 << 40, Failed: 7, PerMinute: 120,
		LatencyP50: 1500 * time.Microsecond, LatencyP99: 2 * time.Second, UpdatedAt: t0}
	ext := port.PoolStatus{Node: "w1", Capability: "gpu", Pool: "trainer", Slots: 2, UpdatedAt: t0}
	a1 := port.PoolStatus{Node: "a1", Capability: "core", Pool: "core", Slots: 4, UpdatedAt: t0}
	if err := s.RecordPoolStats(ctx, []port.PoolStatus{w1, ext, a1}); err != nil {
		t.Fatal(err)
	}
	w1.Busy, w1.Completed, w1.UpdatedAt = 0, w1.Completed+1, t0.Add(time.Minute)
	if err := s.RecordPoolStats(ctx, []port.PoolStatus{w1}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListPoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []port.PoolStatus{a1, w1, ext}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ListPoolStats:\n got %+v\nwant %+v", got, want)
	}
}

// An id prefix finds the instances whose id starts with it (as git and
// docker find objects); CreatedAfter keeps the recent ones.
func testListInstancesByIDPrefixAndAge(t *testing.T, s port.Store) {
	ctx := t.Context()
	wf := register(t, s, "prefixed", 1)
	mk := func(id string) port.NewInstance {
		in := newInstance(wf)
		in.ID = uuid.MustParse(id)
		return in
	}
	queue(t, s, mk("abcd0000-0000-4000-8000-000000000001"), mk("abcd1111-0000-4000-8000-000000000002"), mk("abce0000-0000-4000-8000-000000000003"))
	for _, tc := range []struct {
		prefix string
		want   int
	}{{"abcd", 2}, {"ABCD1", 1}, {"abcd1111-0000", 1}, {"abc", 3}, {"abcf", 0}, {"abce0000000040008000000000000003", 1}} {
		page, err := s.ListInstances(ctx, port.InstanceFilter{IDPrefix: tc.prefix})
		if err != nil || len(page.Instances) != tc.want {
			t.Errorf("prefix %q: %d instances, %v; want %d", tc.prefix, len(page.Instances), err, tc.want)
		}
	}
	for _, bad := range []string{"xyz", "abcd-g", strings.Repeat("a", 33)} {
		if _, err := s.ListInstances(ctx, port.InstanceFilter{IDPrefix: bad}); !errors.Is(err, port.ErrInvalidArgument) {
			t.Errorf("prefix %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if page, err := s.ListInstances(ctx, port.InstanceFilter{CreatedAfter: time.Now().Add(-time.Hour)}); err != nil || len(page.Instances) != 3 {
		t.Errorf("created in the last hour: %d, %v; want 3", len(page.Instances), err)
	}
	if page, err := s.ListInstances(ctx, port.InstanceFilter{CreatedAfter: time.Now().Add(time.Hour)}); err != nil || len(page.Instances) != 0 {
		t.Errorf("created after an hour from now: %d, %v; want 0", len(page.Instances), err)
	}
}
