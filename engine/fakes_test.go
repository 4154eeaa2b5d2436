package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/robonet/robonet/engine/port"
)

// waitLimit bounds every wait of a test for a signal.
const waitLimit = 20 * time.Second

// ---- dispatcher ----

// fakeDispatcher records dispatches and cancels and lets the test answer
// them through the engine's ResultSink.
type fakeDispatcher struct {
	mu         sync.Mutex
	dispatched []port.TaskDispatch
	cancelled  []port.AttemptKey
	failNext   int // fail this many Dispatch calls
	// refuse, when set, answers each attempt of a Dispatch (nil: accept).
	refuse  func(port.TaskDispatch) error
	calls   int
	changed chan struct{}
	next    int // index of the next dispatch handed to the test
	// nodes answers Nodes: the nodes serving each capability.
	nodes map[string][]string
	asked int // Nodes calls
}

func newFakeDispatcher() *fakeDispatcher { return &fakeDispatcher{changed: make(chan struct{})} }

var errDispatchDown = errors.New("waggler unavailable")

func (d *fakeDispatcher) Dispatch(_ context.Context, tasks []port.TaskDispatch) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.failNext > 0 {
		d.failNext--
		d.notifyLocked()
		errs := make([]error, len(tasks))
		for i := range errs {
			errs[i] = errDispatchDown
		}
		return errs
	}
	var errs []error
	for i, t := range tasks {
		if d.refuse != nil {
			if err := d.refuse(t); err != nil {
				if errs == nil {
					errs = make([]error, len(tasks))
				}
				errs[i] = err
				continue
			}
		}
		d.dispatched = append(d.dispatched, t)
	}
	d.notifyLocked()
	return errs
}

func (d *fakeDispatcher) Cancel(_ context.Context, _ uint64, keys []port.AttemptKey) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancelled = append(d.cancelled, keys...)
	d.notifyLocked()
	return nil
}

func (d *fakeDispatcher) Nodes(capability string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	return slices.Clone(d.nodes[capability])
}

// setNodes sets the nodes that serve capability.
func (d *fakeDispatcher) setNodes(capability string, nodes ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodes == nil {
		d.nodes = map[string][]string{}
	}
	d.nodes[capability] = nodes
}

// nodesAsked is how many times the engine asked for nodes.
func (d *fakeDispatcher) nodesAsked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

func (d *fakeDispatcher) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// wait waits until cond (called with d.mu held) holds.
func (d *fakeDispatcher) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		d.mu.Lock()
		ok := cond()
		changed := d.changed
		d.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-limit.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// take waits for the next n dispatches (in any order) and returns them
// sorted by execution id.
func (d *fakeDispatcher) take(t testing.TB, n int) []port.TaskDispatch {
	t.Helper()
	var out []port.TaskDispatch
	d.wait(t, "dispatches", func() bool {
		if len(d.dispatched)-d.next < n {
			return false
		}
		out = slices.Clone(d.dispatched[d.next : d.next+n])
		d.next += n
		return true
	})
	slices.SortFunc(out, func(a, b port.TaskDispatch) int {
		if a.ExecutionID != b.ExecutionID {
			if a.ExecutionID < b.ExecutionID {
				return -1
			}
			return 1
		}
		return int(a.Attempt) - int(b.Attempt)
	})
	return out
}

// one waits for the next dispatch and checks its execution and attempt.
func (d *fakeDispatcher) one(t testing.TB, exec string, attempt uint32) port.TaskDispatch {
	t.Helper()
	got := d.take(t, 1)[0]
	if got.ExecutionID != exec || got.Attempt != attempt {
		t.Fatalf("dispatched %s#%d, want %s#%d", got.ExecutionID, got.Attempt, exec, attempt)
	}
	return got
}

// pending returns how many dispatches the test has not taken.
func (d *fakeDispatcher) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dispatched) - d.next
}

// waitCancelled waits until every key was cancelled.
func (d *fakeDispatcher) waitCancelled(t testing.TB, keys ...port.AttemptKey) {
	t.Helper()
	d.wait(t, "cancellations", func() bool {
		for _, k := range keys {
			if !slices.Contains(d.cancelled, k) {
				return false
			}
		}
		return true
	})
}

func (d *fakeDispatcher) cancelledKeys() []port.AttemptKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.cancelled)
}

// ---- store ----

// countingStore wraps a Store to count the group commits and measure the
// snapshot bytes written; gate, when set, holds PersistProgress calls until
// the test closes it.
type countingStore struct {
	port.Store
	mu                sync.Mutex
	persistCalls      int
	completeCalls     int
	listCalls         int
	progressRows      int
	stateBytes        int
	largestState      int
	gate              chan struct{}
	persistInProgress chan struct{} // signalled when a gated call starts
	// completeGate, when set, holds CompleteInstances calls after their
	// commit (announced on completeCommitted) until the test closes it.
	completeGate      chan struct{}
	completeCommitted chan struct{}
	// claimCalls and claimedInstances count ClaimInstances calls and the
	// instances they returned; claimSig is signalled after each call.
	claimCalls, claimedInstances int
	claimSig                     chan struct{}
	// queueGate, when set, holds QueueInstances calls after their commit
	// (announced on queueCommitted) until the test closes it.
	queueGate      chan struct{}
	queueCommitted chan struct{}
}

func (s *countingStore) ClaimInstances(ctx context.Context, req port.ClaimRequest) ([]port.ClaimedInstance, error) {
	got, err := s.Store.ClaimInstances(ctx, req)
	s.mu.Lock()
	s.claimCalls++
	s.claimedInstances += len(got)
	s.mu.Unlock()
	select {
	case s.claimSig <- struct{}{}:
	default:
	}
	return got, err
}

// claims returns how many ClaimInstances calls returned and how many
// instances they claimed.
func (s *countingStore) claims() (calls, instances int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimCalls, s.claimedInstances
}

// waitClaims waits until at least n ClaimInstances calls returned.
func (s *countingStore) waitClaims(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		if calls, _ := s.claims(); calls >= n {
			return
		}
		select {
		case <-s.claimSig:
		case <-timeout:
			t.Fatalf("waited %s for %d claims", waitLimit, n)
		}
	}
}

func (s *countingStore) QueueInstances(ctx context.Context, in []port.NewInstance) ([]port.Queued, error) {
	s.mu.Lock()
	gate := s.queueGate
	s.mu.Unlock()
	out, err := s.Store.QueueInstances(ctx, in)
	if gate != nil && err == nil {
		s.queueCommitted <- struct{}{}
		<-gate
	}
	return out, err
}

func (s *countingStore) PersistProgress(ctx context.Context, batch []port.Progress) ([]error, error) {
	s.mu.Lock()
	gate := s.gate
	s.persistCalls++
	for _, p := range batch {
		s.progressRows += len(p.Results)
		if p.State != nil {
			s.progressRows++
			s.stateBytes += len(p.State)
			s.largestState = max(s.largestState, len(p.State))
		}
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case s.persistInProgress <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.PersistProgress(ctx, batch)
}

func (s *countingStore) CompleteInstances(ctx context.Context, batch []port.Completion) ([]error, error) {
	s.mu.Lock()
	s.completeCalls++
	for _, c := range batch {
		s.stateBytes += len(c.State)
	}
	gate := s.completeGate
	s.mu.Unlock()
	out, err := s.Store.CompleteInstances(ctx, batch)
	if gate != nil && err == nil {
		s.completeCommitted <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, err
}

func (s *countingStore) ListWorkflows(ctx context.Context, f port.WorkflowFilter) ([]port.WorkflowVersion, error) {
	s.mu.Lock()
	s.listCalls++
	s.mu.Unlock()
	return s.Store.ListWorkflows(ctx, f)
}

// lists is how often workflow versions were listed.
func (s *countingStore) lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listCalls
}

func (s *countingStore) counts() (persist, complete, stateBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistCalls, s.completeCalls, s.stateBytes
}
