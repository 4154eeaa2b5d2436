package wag

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on a signal in these tests.
const waitTimeout = 10 * time.Second

// fakeClock is a Clock whose time moves only when a test advances it; due
// timers fire in order, synchronously, in the goroutine that advances.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	c   *fakeClock
	at  time.Time
	seq int
	f   func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	return true
}

// Advance moves time forward by d, firing every timer due on the way
// (including timers those set), each at its own time.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.at.After(target) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t == next })
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// recordingSink records what the Waggler layer reports and signals each
// report on a channel.
type recordingSink struct {
	mu       sync.Mutex
	results  []engine.TaskResult
	progress []engine.TaskProgress
	changed  chan struct{}
}

func newSink() *recordingSink { return &recordingSink{changed: make(chan struct{}, 1)} }

func (s *recordingSink) TaskResult(_ context.Context, r engine.TaskResult) {
	s.mu.Lock()
	s.results = append(s.results, r)
	s.mu.Unlock()
	s.signal()
}

func (s *recordingSink) TaskProgress(_ context.Context, p engine.TaskProgress) {
	s.mu.Lock()
	s.progress = append(s.progress, p)
	s.mu.Unlock()
	s.signal()
}

func (s *recordingSink) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *recordingSink) Results() []engine.TaskResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.results)
}

func (s *recordingSink) Progress() []engine.TaskProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.progress)
}

// waitFor waits until cond holds, re-checking on every report, or fails.
func (s *recordingSink) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// result waits for the result of an attempt.
func (s *recordingSink) result(t *testing.T, key engine.AttemptKey) engine.TaskResult {
	t.Helper()
	var out engine.TaskResult
	s.waitFor(t, "the result of "+key.IdempotencyKey(), func() bool {
		for _, r := range s.Results() {
			if r.AttemptKey == key {
				out = r
				return true
			}
		}
		return false
	})
	return out
}

// nResults waits for n results in all.
func (s *recordingSink) nResults(t *testing.T, n int) []engine.TaskResult {
	t.Helper()
	s.waitFor(t, "results", func() bool { return len(s.Results()) >= n })
	return s.Results()
}

// testKey is a fresh attempt key.
func testKey(exec string) engine.AttemptKey {
	return engine.AttemptKey{InstanceID: uuid.New(), ExecutionID: exec, Attempt: 1}
}

// task is a dispatch of action with input for capability "code.exec".
func task(action string, input any) engine.TaskDispatch {
	return engine.TaskDispatch{
		AttemptKey: testKey("t"),
		Workflow:   "wf",
		Task:       "t",
		Index:      -1,
		Capability: "code.exec",
		Action:     action,
		Input:      input,
	}
}

// testConfig is a config with test timings (real clock unless set).
func testConfig(t *testing.T, sink engine.ResultSink, caps map[string]int) Config {
	return Config{
		NodeName:          "n1",
		Capabilities:      caps,
		Sink:              sink,
		Logger:            zaptest.NewLogger(t),
		HeartbeatInterval: 50 * time.Millisecond,
		CancelGrace:       200 * time.Millisecond,
	}
}

// startLocal builds and starts a Local that the test stops.
func startLocal(t *testing.T, cfg Config) *Local {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := l.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return l
}

// recv waits for a value on ch or fails.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
