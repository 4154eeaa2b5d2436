package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
)

// waitLimit bounds every wait of a test for a signal.
const waitLimit = 20 * time.Second

// ---- clock ----

// fakeClock is an engine.Clock whose time moves only when the test calls
// Advance; timers due by then fire. Tests wait for a timer to be armed
// (waitTimer) instead of sleeping.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{} // armed
	changed chan struct{}           // closed and replaced when timers change
}

func newFakeClock() *fakeClock {
	return &fakeClock{
		now:     time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		timers:  map[*fakeTimer]struct{}{},
		changed: make(chan struct{}),
	}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) engine.Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// notifyLocked wakes waitTimer callers.
func (c *fakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves time forward by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
	c.notifyLocked()
}

// waitTimer waits until a timer is armed to fire within d from now, and
// returns how far ahead it is.
func (c *fakeClock) waitTimer(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		c.mu.Lock()
		var (
			next  time.Duration
			found bool
		)
		for tm := range c.timers {
			if ahead := tm.at.Sub(c.now); ahead <= d && (!found || ahead < next) {
				next, found = ahead, true
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if found {
			return next
		}
		select {
		case <-changed:
		case <-limit.C:
			t.Fatalf("no timer was armed within %s of now", d)
		}
	}
}

// advanceToTimer waits for a timer within d and advances time to it.
func (c *fakeClock) advanceToTimer(t testing.TB, d time.Duration) {
	t.Helper()
	c.Advance(c.waitTimer(t, d))
}

type fakeTimer struct {
	c  *fakeClock
	ch chan time.Time
	at time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	delete(t.c.timers, t)
	t.drain()
	t.c.notifyLocked()
	return armed
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	t.drain()
	t.at = t.c.now.Add(d)
	if d <= 0 {
		delete(t.c.timers, t)
		t.ch <- t.c.now
	} else {
		t.c.timers[t] = struct{}{}
	}
	t.c.notifyLocked()
	return armed
}

func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

// ---- dispatcher ----

// fakeDispatcher records dispatches and cancels and lets the test answer
// them through the engine's ResultSink.
type fakeDispatcher struct {
	mu         sync.Mutex
	dispatched []engine.TaskDispatch
	cancelled  []engine.AttemptKey
	failNext   int // fail this many Dispatch calls
	calls      int
	changed    chan struct{}
	next       int // index of the next dispatch handed to the test
}

func newFakeDispatcher() *fakeDispatcher { return &fakeDispatcher{changed: make(chan struct{})} }

var errDispatchDown = errors.New("waggler unavailable")

func (d *fakeDispatcher) Dispatch(_ context.Context, tasks []engine.TaskDispatch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.failNext > 0 {
		d.failNext--
		d.notifyLocked()
		return errDispatchDown
	}
	d.dispatched = append(d.dispatched, tasks...)
	d.notifyLocked()
	return nil
}

func (d *fakeDispatcher) Cancel(_ context.Context, keys []engine.AttemptKey) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancelled = append(d.cancelled, keys...)
	d.notifyLocked()
	return nil
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
func (d *fakeDispatcher) take(t testing.TB, n int) []engine.TaskDispatch {
	t.Helper()
	var out []engine.TaskDispatch
	d.wait(t, "dispatches", func() bool {
		if len(d.dispatched)-d.next < n {
			return false
		}
		out = slices.Clone(d.dispatched[d.next : d.next+n])
		d.next += n
		return true
	})
	slices.SortFunc(out, func(a, b engine.TaskDispatch) int {
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
func (d *fakeDispatcher) one(t testing.TB, exec string, attempt uint32) engine.TaskDispatch {
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
func (d *fakeDispatcher) waitCancelled(t testing.TB, keys ...engine.AttemptKey) {
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

func (d *fakeDispatcher) cancelledKeys() []engine.AttemptKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.cancelled)
}

// ---- store ----

// countingStore wraps a Store to count the group commits and measure the
// snapshot bytes written; gate, when set, holds PersistProgress calls until
// the test closes it.
type countingStore struct {
	engine.Store
	mu                sync.Mutex
	persistCalls      int
	completeCalls     int
	progressRows      int
	stateBytes        int
	largestState      int
	gate              chan struct{}
	persistInProgress chan struct{} // signalled when a gated call starts
}

func (s *countingStore) PersistProgress(ctx context.Context, batch []engine.Progress) ([]error, error) {
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

func (s *countingStore) CompleteInstances(ctx context.Context, batch []engine.Completion) ([]error, error) {
	s.mu.Lock()
	s.completeCalls++
	for _, c := range batch {
		s.stateBytes += len(c.State)
	}
	s.mu.Unlock()
	return s.Store.CompleteInstances(ctx, batch)
}

func (s *countingStore) counts() (persist, complete, stateBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistCalls, s.completeCalls, s.stateBytes
}

// hasTimerWithin reports whether a timer is armed to fire within d.
func (c *fakeClock) hasTimerWithin(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tm := range c.timers {
		if tm.at.Sub(c.now) <= d {
			return true
		}
	}
	return false
}
