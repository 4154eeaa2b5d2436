package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/metrics"
)

// gate is a handler that blocks until released (or cancelled), counting
// how many run at once.
type gate struct {
	started  chan port.AttemptKey
	release  chan struct{}
	mu       sync.Mutex
	running  int
	maxSeen  int
	finished atomic.Int64
}

func newGate() *gate {
	return &gate{started: make(chan port.AttemptKey, 1000), release: make(chan struct{})}
}

func (g *gate) handler(ctx context.Context, call *Call) (any, error) {
	g.mu.Lock()
	g.running++
	g.maxSeen = max(g.maxSeen, g.running)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
		g.finished.Add(1)
	}()
	g.started <- call.Key
	select {
	case <-g.release:
		return "released", nil
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
}

func registryWith(t *testing.T, handlers map[string]Handler) *Registry {
	r := NewRegistry()
	for name, h := range handlers {
		if err := r.Register(name, h); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func status(l *testNode, capability string) WagglerStatus {
	for _, st := range l.Wagglers() {
		if st.Capability == capability {
			return st
		}
	}
	return WagglerStatus{}
}

func TestPoolBounds(t *testing.T) {
	sink := newSink()
	g := newGate()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 3})
	cfg.Registry = registryWith(t, map[string]Handler{"gate": g.handler})
	l := startLocal(t, cfg)

	var tasks []port.TaskDispatch
	for i := range 20 {
		d := task("gate", nil)
		d.ExecutionID = fmt.Sprintf("t[%d]", i)
		tasks = append(tasks, d)
	}
	if err := l.Dispatch(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		recv(t, g.started, "a start")
	}
	if st := status(l, "code.exec"); st.Running != 3 || st.Queued != 17 || st.Workers != 3 || st.State != StateDispatching {
		t.Fatalf("status %+v", st)
	}
	select {
	case k := <-g.started:
		t.Fatalf("a fourth attempt (%s) started with a pool of 3", k.ExecutionID)
	default:
	}
	close(g.release)
	results := sink.nResults(t, 20)
	for _, r := range results {
		if !r.OK || r.Output != "released" || !strings.HasPrefix(r.WorkerID, "n1/code.exec/") || r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) {
			t.Fatalf("result %+v", r)
		}
	}
	if g.maxSeen != 3 {
		t.Fatalf("max concurrency %d, want 3", g.maxSeen)
	}
	if st := status(l, "code.exec"); st.State != StateIdle {
		t.Fatalf("status after the last result: %+v", st)
	}
}

// A Waggler host answers per attempt: a capability whose queue is full
// refuses with ErrBusy, naming it, while another capability's attempt is
// accepted.
func TestHostQueueFullIsBusy(t *testing.T) {
	cfg := testConfig(t, newSink(), nil).Config
	cfg.QueueSize = 2
	host, err := NewWagglerHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	s, err := host.Open(1, nopUplink{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoles(map[string]uint64{"code.exec": 1, "net.scan": 1}, nil); err != nil {
		t.Fatal(err)
	}
	handoff := func(d port.TaskDispatch) Handoff { return Handoff{TaskDispatch: d, Epoch: 1} }
	if errs := s.Dispatch([]Handoff{handoff(task("gate", nil)), handoff(task("gate", nil))}); errs != nil {
		t.Fatal(errs)
	}
	other := task("echo", "x")
	other.Capability = "net.scan"
	wrongEpoch := task("echo", "y")
	errs := s.Dispatch([]Handoff{handoff(other), handoff(task("gate", nil)), {TaskDispatch: wrongEpoch, Epoch: 2}})
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], ErrBusy) || !errors.Is(errs[2], ErrNotWaggler) {
		t.Fatalf("dispatch to a full queue: %v, want the other capability accepted, ErrBusy, ErrNotWaggler", errs)
	}
	if !strings.Contains(errs[1].Error(), "code.exec") {
		t.Errorf("error does not name the capability: %v", errs[1])
	}
	if st := host.Waggler("net.scan").Status(); st.Queued != 1 {
		t.Fatalf("net.scan %+v", st)
	}
}

// nopUplink drops what a host reports.
type nopUplink struct{}

func (nopUplink) Results([]SeqResult) error    { return nil }
func (nopUplink) Progress([]port.TaskProgress) {}
func (nopUplink) Started([]Started)            {}

// The Router holds what a busy Waggler refuses and hands it over once
// there is room: every attempt runs.
func TestRouterRetriesBusyWagglers(t *testing.T) {
	sink := newSink()
	g := newGate()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	cfg.QueueSize = 1
	cfg.Registry = registryWith(t, map[string]Handler{"gate": g.handler})
	l := startLocal(t, cfg)
	tasks := []port.TaskDispatch{task("gate", nil), task("gate", nil), task("gate", nil), task("gate", nil)}
	if errs := l.Dispatch(context.Background(), tasks); errs != nil {
		t.Fatal(errs)
	}
	recv(t, g.started, "the first start")
	close(g.release)
	sink.nResults(t, 4)
}

// waitUntil polls cond (the state lives in other goroutines) until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDispatchUnknownCapabilityWaits(t *testing.T) {
	sink := newSink()
	l := startLocal(t, testConfig(t, sink, map[string]int{"code.exec": 1}))
	d := task("echo", 1)
	d.Capability = "gpu.render"
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatalf("dispatch for an unknown capability: %v", err)
	}
	sink.waitFor(t, "the waiting notice", func() bool { return len(sink.Progress()) > 0 })
	p := sink.Progress()[0]
	if p.AttemptKey != d.AttemptKey || p.Message != "waiting: no node serves gpu.render" {
		t.Fatalf("progress %+v", p)
	}
	if w := l.router.Waiting(); w["gpu.render"] != 1 {
		t.Fatalf("waiting %v", w)
	}
	// A node takes the role (here: this one, with a worker brought from
	// elsewhere): the attempt goes to its Waggler, which waits for a
	// worker, and the worker takes it.
	l.dir.Assign("gpu.render", 1)
	waitUntil(t, "the role", func() bool { return l.Waggler("gpu.render") != nil })
	waitUntil(t, "the attempt handed over", func() bool { return status(l, "gpu.render").Queued == 1 })
	if len(sink.Results()) != 0 {
		t.Fatal("a result for an attempt nobody can run")
	}
	fw := newFakeWorker("remote/gpu.render/1")
	if err := l.Waggler("gpu.render").AddWorker(fw); err != nil {
		t.Fatal(err)
	}
	a := recv(t, fw.runs, "the assignment")
	fw.report(l.Waggler("gpu.render"), a, "rendered")
	if r := sink.result(t, d.AttemptKey); !r.OK || r.Output != "rendered" {
		t.Fatalf("result %+v", r)
	}
}

func TestPanicIsContained(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	cfg.Registry = registryWith(t, map[string]Handler{"boom": func(context.Context, *Call) (any, error) { panic("kaboom") }})
	l := startLocal(t, cfg)
	d, next := task("boom", nil), task("echo", "still alive")
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d, next}); err != nil {
		t.Fatal(err)
	}
	r := sink.result(t, d.AttemptKey)
	if r.OK || !strings.Contains(r.Error, "action boom panicked: kaboom") || !strings.Contains(r.Error, "TestPanicIsContained") {
		t.Fatalf("result %+v", r)
	}
	if strings.Contains(r.Error, "runtime/debug.Stack") || len(r.Error) > 3000 {
		t.Errorf("stack not trimmed: %s", r.Error)
	}
	if r := sink.result(t, next.AttemptKey); !r.OK || r.Output != "still alive" {
		t.Fatalf("the worker did not survive the panic: %+v", r)
	}
}

func TestHungActionIsAbandoned(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	release := make(chan struct{})
	returned := make(chan struct{})
	cfg.Registry = registryWith(t, map[string]Handler{"hang": func(context.Context, *Call) (any, error) {
		defer close(returned)
		<-release // ignores cancellation
		return "too late", nil
	}})
	cfg.CancelGrace = 50 * time.Millisecond
	l := startLocal(t, cfg)
	hung := task("hang", nil)
	hung.Timeout = 30 * time.Millisecond
	next := task("echo", "next")
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{hung, next}); err != nil {
		t.Fatal(err)
	}
	r := sink.result(t, hung.AttemptKey)
	if r.OK || !strings.Contains(r.Error, "timed out after 30ms") || !strings.Contains(r.Error, "abandoned") {
		t.Fatalf("result %+v", r)
	}
	// The slot is free although the action still hangs.
	if r := sink.result(t, next.AttemptKey); !r.OK || r.Output != "next" {
		t.Fatalf("next %+v", r)
	}
	select {
	case <-returned:
		t.Fatal("the hung action returned early")
	default:
	}
	close(release)
	<-returned
	// Its result is discarded: still exactly two results, one per key.
	if st := status(l, "code.exec"); st.State != StateIdle {
		t.Fatalf("status %+v", st)
	}
	if n := len(sink.Results()); n != 2 {
		t.Fatalf("%d results, want 2", n)
	}
}

func TestAttemptTimeoutAndCancel(t *testing.T) {
	sink := newSink()
	g := newGate()
	causes := make(chan error, 4)
	waiting := make(chan struct{}, 4)
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	cfg.Registry = registryWith(t, map[string]Handler{
		"gate": g.handler,
		"wait": func(ctx context.Context, _ *Call) (any, error) {
			waiting <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err() // a handler that returns the bare ctx error
		},
	})
	l := startLocal(t, cfg)
	ctx := context.Background()

	timed := task("wait", nil)
	timed.Timeout = 30 * time.Millisecond
	if err := l.Dispatch(ctx, []port.TaskDispatch{timed}); err != nil {
		t.Fatal(err)
	}
	r := sink.result(t, timed.AttemptKey)
	if r.OK || r.Error != "attempt timed out after 30ms: context canceled" {
		t.Fatalf("timeout result %+v", r)
	}
	if c := recv(t, causes, "the cause"); !errors.Is(c, errTimedOut) {
		t.Fatalf("cause %v", c)
	}

	cancelled, next := task("wait", nil), task("echo", "after")
	if err := l.Dispatch(ctx, []port.TaskDispatch{cancelled, next}); err != nil {
		t.Fatal(err)
	}
	recv(t, waiting, "the first attempt")
	recv(t, waiting, "the second attempt")
	waitUntil(t, "next queued behind it", func() bool {
		st := status(l, "code.exec")
		return st.Running == 1 && st.Queued == 1
	})
	if err := l.Cancel(ctx, 1, []port.AttemptKey{cancelled.AttemptKey, testKey("unknown")}); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, causes, "the cause"); !errors.Is(c, errCancelled) {
		t.Fatalf("cause %v", c)
	}
	// The pool has one worker, so the cancelled attempt finished before
	// next ran: had it reported, its result would be here already.
	sink.result(t, next.AttemptKey)
	for _, r := range sink.Results() {
		if r.AttemptKey == cancelled.AttemptKey {
			t.Fatalf("a cancelled attempt reported %+v", r)
		}
	}
}

func TestOutputLimits(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 2})
	cfg.MaxOutputBytes = 100
	cfg.Registry = registryWith(t, map[string]Handler{
		"chan": func(context.Context, *Call) (any, error) { return make(chan int), nil },
		"ints": func(context.Context, *Call) (any, error) { return []int{1, 2}, nil },
		// 10 GB of JSON if encoded whole, built in no time by reference.
		"aliased": func(context.Context, *Call) (any, error) {
			out, s := make([]any, 10_000), strings.Repeat("x", 1<<20)
			for i := range out {
				out[i] = s
			}
			return out, nil
		},
	})
	l := startLocal(t, cfg)
	big, small, weird, ints := task("echo", strings.Repeat("x", 200)), task("echo", strings.Repeat("x", 90)), task("chan", nil), task("ints", nil)
	aliased := task("aliased", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{big, small, weird, ints, aliased}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []port.AttemptKey{big.AttemptKey, aliased.AttemptKey} {
		if r := sink.result(t, k); r.OK || !strings.Contains(r.Error, "output is more than 100 bytes of JSON") {
			t.Fatalf("%+v: %+v", k, r)
		}
	}
	if r := sink.result(t, small.AttemptKey); !r.OK {
		t.Fatalf("small %+v", r)
	}
	if r := sink.result(t, weird.AttemptKey); r.OK || !strings.Contains(r.Error, "not a JSON-like value") {
		t.Fatalf("chan %+v", r)
	}
	if r := sink.result(t, ints.AttemptKey); !r.OK || fmt.Sprint(r.Output) != "[1 2]" || fmt.Sprintf("%T", r.Output.([]any)[0]) != "int64" {
		t.Fatalf("outputs are not normalized: %+v", r)
	} else if string(r.OutputJSON) != "[1,2]" {
		t.Fatalf("the result carries %q as the output's encoding, want its canonical JSON [1,2]", r.OutputJSON)
	}
}

func TestUnknownActionFails(t *testing.T) {
	sink := newSink()
	l := startLocal(t, testConfig(t, sink, map[string]int{"code.exec": 1}))
	d := task("teleport", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	if r := sink.result(t, d.AttemptKey); r.OK || r.Error != `unknown action "teleport": this node's code.exec workers run echo, exec, http, sleep` {
		t.Fatalf("result %+v", r)
	}
}

func TestCallCarriesTheAttempt(t *testing.T) {
	sink := newSink()
	calls := make(chan *Call, 1)
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	core, logs := observer.New(zap.InfoLevel)
	cfg.Logger = zap.New(core)
	cfg.Registry = registryWith(t, map[string]Handler{"look": func(_ context.Context, c *Call) (any, error) {
		c.Logger().Info("looking")
		calls <- c
		return nil, nil
	}})
	l := startLocal(t, cfg)
	d := task("look", map[string]any{"k": "v"})
	d.Index = 4
	d.Attempt = 2
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	c := recv(t, calls, "the call")
	if c.Key != d.AttemptKey || c.Task != "t" || c.Index != 4 || c.Capability != "code.exec" || c.Action != "look" ||
		c.Input.(map[string]any)["k"] != "v" || c.Progress == nil || c.MaxOutputBytes != DefaultMaxOutputBytes {
		t.Fatalf("call %+v", c)
	}
	// The action's logger carries the attempt's fields.
	looked := logs.FilterMessage("looking").AllUntimed()
	if len(looked) != 1 {
		t.Fatalf("%d log entries from the action, want 1", len(looked))
	}
	if f := looked[0].ContextMap(); f["instance"] != d.InstanceID.String() || f["task"] != "t" || fmt.Sprint(f["attempt"]) != "2" || f["worker"] != c.Worker {
		t.Fatalf("the action's log fields %v", f)
	}
	if got, want := c.IdempotencyKey(), d.InstanceID.String()+"/t#2"; got != want {
		t.Fatalf("idempotency key %q, want %q", got, want)
	}
	if r := sink.result(t, d.AttemptKey); !r.OK || r.Output != nil {
		t.Fatalf("result %+v", r)
	}
}

func TestStopWaitsForRunningActions(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	started, cancelled, proceed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	cfg.Registry = registryWith(t, map[string]Handler{"slow": func(ctx context.Context, _ *Call) (any, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		<-proceed
		returned.Store(true)
		return nil, ctx.Err()
	}})
	l, err := newTestNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := task("slow", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d, task("echo", "queued")}); err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- l.Stop(context.Background()) }()
	recv(t, cancelled, "the action's cancellation")
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while an action was running", err)
	default:
	}
	close(proceed)
	if err := recv(t, stopped, "Stop"); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("Stop returned before the action")
	}
	if r := sink.Results(); len(r) != 0 {
		t.Fatalf("results after stop: %+v", r)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if errs := l.Dispatch(context.Background(), []port.TaskDispatch{task("echo", 1)}); len(errs) != 1 || !errors.Is(errs[0], ErrNotRunning) {
		t.Fatalf("dispatch after stop: %v", errs)
	}
	if err := l.Start(context.Background()); err == nil {
		t.Fatal("start after stop succeeded")
	}
}

func TestStopReportsActionsThatDoNotReturn(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	started, release := make(chan struct{}), make(chan struct{})
	cfg.Registry = registryWith(t, map[string]Handler{"stuck": func(context.Context, *Call) (any, error) {
		close(started)
		<-release
		return nil, nil
	}})
	l, err := newTestNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := task("stuck", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = l.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), d.IdempotencyKey()) {
		t.Fatalf("stop with a stuck action: %v", err)
	}
	close(release) // let the goroutine go, for goleak
	// A later Stop waits for the first (here, for the stuck goroutine to
	// go at last) and returns the error of its stop.
	if again := l.Stop(context.Background()); again == nil || !strings.Contains(again.Error(), d.IdempotencyKey()) {
		t.Fatalf("second stop: %v, want the first's: %v", again, err)
	}
}

func TestLifecycle(t *testing.T) {
	sink := newSink()
	l, err := newTestNode(testConfig(t, sink, map[string]int{"code.exec": 1}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if errs := l.Dispatch(ctx, []port.TaskDispatch{task("echo", 1)}); len(errs) != 1 || !errors.Is(errs[0], ErrNotRunning) {
		t.Fatalf("dispatch before start: %v", errs)
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	l, err = newTestNode(testConfig(t, sink, map[string]int{"code.exec": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx); err == nil {
		t.Fatal("second start succeeded")
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSleepProgressRidesHeartbeats(t *testing.T) {
	sink := newSink()
	l := startLocal(t, testConfig(t, sink, map[string]int{"code.exec": 1}))
	d := task("sleep", map[string]any{"duration": "300ms"})
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	r := sink.result(t, d.AttemptKey)
	if !r.OK || r.Output.(map[string]any)["slept"] != "300ms" {
		t.Fatalf("result %+v", r)
	}
	var last port.TaskProgress
	n := 0
	for _, p := range sink.Progress() {
		if p.AttemptKey != d.AttemptKey {
			continue
		}
		n++
		// The action's last report ("slept", every step done) rides a
		// heartbeat when one falls between it and the result.
		done := p.Message == "slept" && p.StepsDone == sleepSteps && p.ETA == 0
		if p.WorkerID != "n1/code.exec/1" || p.StepsTotal != sleepSteps || p.Seq <= last.Seq || p.StepsDone < last.StepsDone || (p.Message != "sleeping" && !done) {
			t.Fatalf("progress %+v after %+v", p, last)
		}
		if !done && (p.ETA <= 0 || p.ETA > 300*time.Millisecond) {
			t.Errorf("ETA %v", p.ETA)
		}
		last = p
	}
	// 300ms at one heartbeat per 50ms: several heartbeats, well into the steps.
	if n < 3 || last.StepsDone < 3 {
		t.Fatalf("%d heartbeats, last %+v", n, last)
	}
}

func TestExecHeartbeatsReportMemory(t *testing.T) {
	if _, _, ok := procSample(1); !ok {
		t.Skip("no /proc")
	}
	sink := newSink()
	l := startLocal(t, testConfig(t, sink, map[string]int{"code.exec": 1}))
	d := task("exec", map[string]any{"argv": []any{"sleep", "0.3"}})
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	if r := sink.result(t, d.AttemptKey); !r.OK {
		t.Fatalf("result %+v", r)
	}
	for _, p := range sink.Progress() {
		if p.MemBytes > 0 && p.CPUPercent >= 0 {
			return
		}
	}
	t.Fatalf("no heartbeat carried the process's memory: %+v", sink.Progress())
}

func TestConfigValidation(t *testing.T) {
	sink := newSink()
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"pool too small", func(c *Config) { c.Capabilities = map[string]int{"code.exec": 0} }, `capability "code.exec": pool size 0 must be 1..1024 (--capability code.exec=SIZE)`},
		{"pool too big", func(c *Config) { c.Capabilities = map[string]int{"code.exec": 1025} }, "pool size 1025 must be 1..1024"},
		{"bad name", func(c *Config) { c.Capabilities = map[string]int{"Code_Exec": 1} }, `capability "Code_Exec": a name is lowercase`},
		{"trailing dot", func(c *Config) { c.Capabilities = map[string]int{"code.": 1} }, `capability "code."`},
		{"interval", func(c *Config) { c.HeartbeatInterval = time.Microsecond }, "HeartbeatInterval"},
		{"missed", func(c *Config) { c.MissedHeartbeats = -1 }, "MissedHeartbeats -1 must be 1..100"},
		{"output", func(c *Config) { c.MaxOutputBytes = -5 }, "MaxOutputBytes -5"},
		{"queue", func(c *Config) { c.QueueSize = -1 }, "QueueSize -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Capabilities: map[string]int{"code.exec": 4, "ai.inference": 1}}
			tc.edit(&cfg)
			_, err := newTestNode(nodeConfig{Config: cfg, sink: sink})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	d := Config{}.WithDefaults()
	if d.HeartbeatInterval != 5*time.Second || d.MissedHeartbeats != 3 || d.MaxOutputBytes != 1<<20 || d.Registry == nil || d.Clock == nil || d.Logger == nil || d.NodeName == "" {
		t.Fatalf("defaults %+v", d)
	}
}

// Once a newer leader has opened a session with a Waggler host, a deposed
// one can neither start attempts nor cancel the new one's; nor can an
// older term open a session at all.
func TestTermFence(t *testing.T) {
	host := startedHost(t)
	old, err := host.Open(2, nopUplink{})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.SetRoles(map[string]uint64{"code.exec": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := host.Open(3, nopUplink{}); err != nil {
		t.Fatal(err)
	}
	d := Handoff{TaskDispatch: task("echo", "old"), Epoch: 1}
	if errs := old.Dispatch([]Handoff{d}); len(errs) != 1 || !errors.Is(errs[0], port.ErrStaleTerm) {
		t.Fatalf("dispatch by the deposed leader: %v, want ErrStaleTerm", errs)
	}
	if err := old.Cancel([]port.AttemptKey{d.AttemptKey}); !errors.Is(err, port.ErrStaleTerm) {
		t.Fatalf("cancel by the deposed leader: %v, want ErrStaleTerm", err)
	}
	if err := old.SetRoles(nil, nil); !errors.Is(err, port.ErrStaleTerm) {
		t.Fatalf("roles set by the deposed leader: %v, want ErrStaleTerm", err)
	}
	if _, err := host.Open(1, nopUplink{}); !errors.Is(err, port.ErrStaleTerm) {
		t.Fatalf("a session of an older term: %v, want ErrStaleTerm", err)
	}
	if st := host.Waggler("code.exec").Status(); st.Queued != 0 {
		t.Fatalf("the deposed leader's attempt was queued: %+v", st)
	}
}

// A pool counts what its workers finished: totals, finishes in the last
// minute, run-time percentiles, and the slots busy now.
func TestPoolStats(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 3})
	release := make(chan struct{})
	cfg.Registry = registryWith(t, map[string]Handler{
		"ok":    func(context.Context, *Call) (any, error) { return "fine", nil },
		"fail":  func(context.Context, *Call) (any, error) { return nil, errors.New("no") },
		"block": func(ctx context.Context, _ *Call) (any, error) { <-release; return nil, nil },
	})
	l := startLocal(t, cfg)
	var tasks []port.TaskDispatch
	for range 4 {
		tasks = append(tasks, task("ok", nil))
	}
	tasks = append(tasks, task("fail", nil))
	if err := l.Dispatch(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	for _, d := range tasks {
		sink.result(t, d.AttemptKey)
	}
	blocked := task("block", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{blocked}); err != nil {
		t.Fatal(err)
	}
	var st PoolStats
	waitUntil(t, "the blocked attempt to hold a slot", func() bool {
		stats := l.workers.PoolStats()
		if len(stats) != 1 {
			t.Fatalf("pool stats %+v, want one pool", stats)
		}
		st = stats[0]
		return st.Busy == 1
	})
	if st.Capability != "code.exec" || st.Pool != "code.exec" || st.Slots != 3 || st.Completed != 4 || st.Failed != 1 || st.PerMinute != 5 ||
		st.LatencyP99 < st.LatencyP50 || st.Utilisation() != 1.0/3 {
		t.Fatalf("pool stats %+v", st)
	}
	close(release)
	sink.result(t, blocked.AttemptKey)
	if st = l.workers.PoolStats()[0]; st.Busy != 0 || st.Completed != 5 {
		t.Fatalf("after the blocked attempt: %+v", st)
	}
}

// The meter's minute forgets what finished more than a minute ago, and its
// percentiles come from the latest run times only.
func TestPoolMeter(t *testing.T) {
	var m poolMeter
	t0 := time.Unix(1_000_000, 0)
	for i := range 300 { // run times 1..300 ms, one finish a second
		m.record(t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Millisecond, i%10 != 0)
	}
	var s PoolStats
	m.read(&s, t0.Add(299*time.Second))
	// The last 256 runs are 45..300 ms; 60 of the finishes are within the
	// last minute (seconds 240..299).
	if s.Completed != 270 || s.Failed != 30 || s.PerMinute != 60 || s.LatencyP50 != 172*time.Millisecond || s.LatencyP99 != 298*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	// The histogram counts every run (1..300 ms, cumulative by bound).
	want := map[float64]uint64{0.0005: 0, 0.001: 1, 0.005: 5, 0.01: 10, 0.05: 50, 0.1: 100, 0.5: 300, 3600: 300}
	for i, le := range metrics.TaskBuckets {
		if n, ok := want[le]; ok && s.Runs.Counts[i] != n {
			t.Errorf("runs of at most %gs: %d, want %d", le, s.Runs.Counts[i], n)
		}
	}
	if s.Runs.Count != 300 || s.Runs.Sum != 45150*time.Millisecond {
		t.Errorf("histogram count %d sum %s, want 300 and 45.15s", s.Runs.Count, s.Runs.Sum)
	}
	s = PoolStats{}
	m.read(&s, t0.Add(time.Hour))
	if s.PerMinute != 0 {
		t.Fatalf("an hour later %d finishes in the last minute, want 0", s.PerMinute)
	}
}

// An action's error and progress text reach the Waggler as UTF-8 within
// the bounds a stream carries, however the action wrote them.
func TestActionTextIsFitted(t *testing.T) {
	sink := newSink()
	cfg := testConfig(t, sink, map[string]int{"code.exec": 1})
	release := make(chan struct{}) // closed once a heartbeat carried the progress
	cfg.Registry = registryWith(t, map[string]Handler{
		"unruly": func(ctx context.Context, call *Call) (any, error) {
			call.Progress(Progress{Message: "\xff" + strings.Repeat("p", 2*MaxProgressTextBytes)})
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("\xfe" + strings.Repeat("e", 2*MaxErrorBytes))
		},
	})
	l := startLocal(t, cfg)
	d := task("unruly", nil)
	if err := l.Dispatch(context.Background(), []port.TaskDispatch{d}); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "a heartbeat carrying the progress", func() bool {
		return slices.ContainsFunc(sink.Progress(), func(p port.TaskProgress) bool { return p.AttemptKey == d.AttemptKey && p.Message != "" })
	})
	close(release)
	r := sink.result(t, d.AttemptKey)
	if r.OK || len(r.Error) > MaxErrorBytes || !utf8.ValidString(r.Error) || !strings.HasPrefix(r.Error, "\uFFFDeee") || !strings.HasSuffix(r.Error, " bytes clipped)") {
		t.Fatalf("error of %d bytes, valid UTF-8: %v: %.40q…", len(r.Error), utf8.ValidString(r.Error), r.Error)
	}
	n := 0
	for _, p := range sink.Progress() {
		if p.AttemptKey != d.AttemptKey {
			continue
		}
		n++
		if len(p.Message) > MaxProgressTextBytes || !utf8.ValidString(p.Message) || !strings.HasPrefix(p.Message, "\uFFFDppp") {
			t.Fatalf("progress message of %d bytes, valid UTF-8: %v: %.40q…", len(p.Message), utf8.ValidString(p.Message), p.Message)
		}
	}
	if n == 0 {
		t.Fatal("no heartbeat carried the progress")
	}
}
