package engine_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock/clocktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openSQLite opens a store in the test's temporary directory.
func openSQLite(t testing.TB) port.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "robonet.db"), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openPostgres opens a store on a fresh schema of the test server (skipped
// without one, outside CI).
func openPostgres(t testing.TB) port.Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema, MaxConns: 8, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stores are the adapters the cross-store tests run against.
var stores = []struct {
	name string
	open func(testing.TB) port.Store
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

// onEachStore runs test once per store adapter, each time with a harness
// of its own.
func onEachStore(t *testing.T, test func(t *testing.T, h *harness)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { test(t, newHarnessOn(t, st.open(t))) })
	}
}

// harness is one store, one fake clock and one fake dispatcher, shared by
// the engines a test starts (a restart is a second engine on the same
// store).
type harness struct {
	t     *testing.T
	store *countingStore
	clock *clocktest.Fake
	disp  *fakeDispatcher
}

func newHarness(t *testing.T) *harness { return newHarnessOn(t, openSQLite(t)) }

func newHarnessOn(t *testing.T, s port.Store) *harness {
	return &harness{t: t, store: &countingStore{Store: s, claimSig: make(chan struct{}, 1)}, clock: clocktest.New(), disp: newFakeDispatcher()}
}

// config is the test configuration: every periodic loop far apart (tests
// advance the clock to the timers they mean), no group-commit lingering.
func (h *harness) config(term uint64) engine.Config {
	return engine.Config{
		Store:             h.store,
		Dispatcher:        h.disp,
		Logger:            zaptest.NewLogger(h.t),
		Clock:             h.clock,
		NodeName:          "test",
		Term:              term,
		Shards:            2,
		ClaimInterval:     time.Hour,
		Lease:             time.Hour,
		LeaseRefresh:      10 * time.Minute,
		FlushInterval:     -1,
		SweepInterval:     24 * time.Hour,
		ScheduleInterval:  12 * time.Hour, // out of the way of the timers tests wait for
		WatchPollInterval: time.Hour,
	}
}

// start builds and starts an engine; it is stopped when the test ends.
func (h *harness) start(term uint64, mods ...func(*engine.Config)) *engine.Engine {
	h.t.Helper()
	e := h.newEngine(term, mods...)
	if err := e.Start(h.t.Context()); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	return e
}

// newEngine builds an engine without starting it.
func (h *harness) newEngine(term uint64, mods ...func(*engine.Config)) *engine.Engine {
	h.t.Helper()
	cfg := h.config(term)
	for _, m := range mods {
		m(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			h.t.Errorf("Stop: %v", err)
		}
	})
	return e
}

func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// submit submits an inline spec.
func (h *harness) submit(e *engine.Engine, spec string, inputs map[string]any) uuid.UUID {
	h.t.Helper()
	res, err := e.Submit(ctxOf(h.t), engine.SubmitRequest{Spec: []byte(spec), SpecFile: "test.yaml", Inputs: inputs})
	if err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
	return res.InstanceID
}

// answer reports the result of a dispatch.
func answer(e *engine.Engine, d port.TaskDispatch, output any) {
	e.TaskResult(context.Background(), port.TaskResult{AttemptKey: d.AttemptKey, OK: true, Output: output,
		WorkerID: "w1", StartedAt: time.Unix(1, 0), FinishedAt: time.Unix(2, 0)})
}

// failWith reports a failed attempt.
func failWith(e *engine.Engine, d port.TaskDispatch, msg string) {
	e.TaskResult(context.Background(), port.TaskResult{AttemptKey: d.AttemptKey, Error: msg, WorkerID: "w1"})
}

// echo answers a dispatch with its input.
func echo(e *engine.Engine, d port.TaskDispatch) { answer(e, d, d.Input) }

// wait follows the instance until it is finished and returns its view.
func (h *harness) wait(e *engine.Engine, id uuid.UUID) engine.InstanceView {
	h.t.Helper()
	ctx := ctxOf(h.t)
	var last engine.Event
	err := e.WatchInstance(ctx, id, 0, func(ev engine.Event) error {
		last = ev
		return nil
	})
	if err != nil {
		h.t.Fatalf("waiting for instance %s: %v", id, err)
	}
	if last.Kind != engine.EventState || !last.State.Terminal() {
		h.t.Fatalf("the watch ended with %+v, want a terminal state event", last)
	}
	v, err := e.GetInstance(ctx, id)
	if err != nil {
		h.t.Fatalf("GetInstance: %v", err)
	}
	if v.State != last.State {
		h.t.Fatalf("GetInstance says %s after the watch ended with %s", v.State, last.State)
	}
	return v
}

// history returns the recorded results of an instance.
func (h *harness) history(id uuid.UUID) []port.ActionResult {
	h.t.Helper()
	hist, err := h.store.TaskHistory(ctxOf(h.t), id)
	if err != nil {
		h.t.Fatalf("TaskHistory: %v", err)
	}
	return hist
}

// task returns the view of one task.
func task(t testing.TB, v engine.InstanceView, name string) engine.TaskView {
	t.Helper()
	for _, tv := range v.Tasks {
		if tv.Name == name {
			return tv
		}
	}
	t.Fatalf("no task %q in the view", name)
	return engine.TaskView{}
}

// jsonOf renders a value canonically, for comparisons.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	n, err := value.Normalize(v)
	if err != nil {
		t.Fatalf("normalizing %v: %v", v, err)
	}
	b, err := value.Encode(n)
	if err != nil {
		t.Fatalf("encoding %v: %v", v, err)
	}
	return string(b)
}

// waitUntil polls cond (for conditions no signal exposes) until it holds.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-limit.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
