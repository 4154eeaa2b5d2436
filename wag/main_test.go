package wag

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on a signal in these tests.
const waitTimeout = 10 * time.Second

// recordingSink records what the Waggler layer reports and signals each
// report on a channel.
type recordingSink struct {
	mu       sync.Mutex
	results  []port.TaskResult
	progress []port.TaskProgress
	changed  chan struct{}
}

func newSink() *recordingSink { return &recordingSink{changed: make(chan struct{}, 1)} }

func (s *recordingSink) TaskResult(_ context.Context, r port.TaskResult) {
	s.mu.Lock()
	s.results = append(s.results, r)
	s.mu.Unlock()
	s.signal()
}

// TaskStarted records nothing: the tests read starts off the workers.
func (s *recordingSink) TaskStarted([]Started) {}

func (s *recordingSink) TaskProgress(_ context.Context, p port.TaskProgress) {
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

func (s *recordingSink) Results() []port.TaskResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.results)
}

func (s *recordingSink) Progress() []port.TaskProgress {
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
func (s *recordingSink) result(t *testing.T, key port.AttemptKey) port.TaskResult {
	t.Helper()
	var out port.TaskResult
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
func (s *recordingSink) nResults(t *testing.T, n int) []port.TaskResult {
	t.Helper()
	s.waitFor(t, "results", func() bool { return len(s.Results()) >= n })
	return s.Results()
}

// testKey is a fresh attempt key.
func testKey(exec string) port.AttemptKey {
	return port.AttemptKey{InstanceID: uuid.New(), ExecutionID: exec, Attempt: 1}
}

// task is a dispatch of action with input for capability "code.exec".
func task(action string, input any) port.TaskDispatch {
	return port.TaskDispatch{
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
func testConfig(t *testing.T, sink port.ResultSink, caps map[string]int) nodeConfig {
	return nodeConfig{Config: Config{
		NodeName:          "n1",
		Capabilities:      caps,
		Logger:            zaptest.NewLogger(t),
		HeartbeatInterval: 50 * time.Millisecond,
		CancelGrace:       200 * time.Millisecond,
	}, sink: sink}
}

// nodeConfig is a Config and the engine's sink, for a testNode.
type nodeConfig struct {
	Config
	sink port.ResultSink
}

// testNode is a node's Waggler layer in one process, wired as package node
// wires a node of its own: the worker host, the Waggler host holding the
// role of every capability served here (epoch 1), and a Router of term 1
// in front, reporting to the test's sink.
type testNode struct {
	workers *WorkerHost
	host    *WagglerHost
	dir     *StaticDirectory
	router  *Router
}

func newTestNode(cfg nodeConfig) (*testNode, error) {
	workers, err := NewWorkerHost(cfg.Config)
	if err != nil {
		return nil, err
	}
	host, err := NewWagglerHost(cfg.Config)
	if err != nil {
		return nil, err
	}
	full := cfg.WithDefaults()
	dir := NewStaticDirectory(full.NodeName, host)
	for c := range cfg.Capabilities {
		dir.Assign(c, 1)
	}
	router, err := NewRouter(RouterConfig{Term: 1, Sink: cfg.sink, Directory: dir, Logger: full.Logger, Clock: full.Clock, NodeName: full.NodeName})
	if err != nil {
		return nil, err
	}
	FollowLocal(workers, host)
	return &testNode{workers: workers, host: host, dir: dir, router: router}, nil
}

func (l *testNode) Start(ctx context.Context) error {
	if err := l.workers.Start(ctx); err != nil {
		return err
	}
	if err := l.host.Start(ctx); err != nil {
		return err
	}
	if err := l.router.Start(ctx); err != nil {
		return err
	}
	FollowLocal(l.workers, l.host) // the pools run now: attach them
	return nil
}

func (l *testNode) Stop(ctx context.Context) error {
	return errors.Join(l.router.Stop(ctx), l.host.Stop(ctx), l.workers.Stop(ctx))
}

// Dispatch dispatches through the Router, under term 1 unless the tasks
// say otherwise.
func (l *testNode) Dispatch(ctx context.Context, tasks []port.TaskDispatch) []error {
	for i := range tasks {
		if tasks[i].Term == 0 {
			tasks[i].Term = 1
		}
	}
	return l.router.Dispatch(ctx, tasks)
}

func (l *testNode) Nodes(capability string) []string { return l.router.Nodes(capability) }

func (l *testNode) Cancel(ctx context.Context, term uint64, keys []port.AttemptKey) error {
	return l.router.Cancel(ctx, term, keys)
}

// Wagglers returns the status of every Waggler on the node.
func (l *testNode) Wagglers() []WagglerStatus { return l.host.Status() }

// Waggler returns the Waggler of capability, or nil.
func (l *testNode) Waggler(capability string) *Waggler { return l.host.Waggler(capability) }

// startLocal builds and starts a testNode that the test stops.
func startLocal(t *testing.T, cfg nodeConfig) *testNode {
	t.Helper()
	l, err := newTestNode(cfg)
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
