package wag

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock/clocktest"
	"github.com/robonet/robonet/sentinel"
)

// fakeWorker is a worker the test drives by hand: it records what the
// Waggler asks of it and sends heartbeats and reports only when told.
type fakeWorker struct {
	id      string
	runs    chan Assignment
	cancels chan Assignment
}

func newFakeWorker(id string) *fakeWorker {
	return &fakeWorker{id: id, runs: make(chan Assignment, 16), cancels: make(chan Assignment, 16)}
}

func (f *fakeWorker) ID() string       { return f.id }
func (f *fakeWorker) Run(a Assignment) { f.runs <- a }
func (f *fakeWorker) Cancel(key port.AttemptKey, gen uint64) {
	f.cancels <- Assignment{TaskDispatch: port.TaskDispatch{AttemptKey: key}, Generation: gen}
}

// assigned returns the assignment the worker got, failing if it got none
// (every call into a fake worker is synchronous with the fake clock).
func (f *fakeWorker) assigned(t *testing.T) Assignment {
	t.Helper()
	select {
	case a := <-f.runs:
		return a
	default:
		t.Fatalf("worker %s got no assignment", f.id)
		panic("unreachable")
	}
}

func (f *fakeWorker) idle(t *testing.T) {
	t.Helper()
	select {
	case a := <-f.runs:
		t.Fatalf("worker %s got an unexpected assignment of %s gen %d", f.id, a.ExecutionID, a.Generation)
	default:
	}
}

func (f *fakeWorker) beat(w *Waggler, a Assignment, seq uint64, p Progress) {
	w.Heartbeat(Heartbeat{Key: a.AttemptKey, Generation: a.Generation, WorkerID: f.id, Seq: seq, Progress: p})
}

func (f *fakeWorker) report(w *Waggler, a Assignment, output any) {
	w.Report(Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: f.id, OK: true, Output: output})
}

// wagglerHarness is a started Waggler on a fake clock (interval 1s, ticks
// every 500ms, slack 250ms, dead after 3 missed) with a transition log.
type wagglerHarness struct {
	w    *Waggler
	clk  *clocktest.Fake
	sink *recordingSink

	mu          sync.Mutex
	transitions []string
}

func newHarness(t *testing.T, workers ...*fakeWorker) *wagglerHarness {
	return newHarnessWith(t, nil, workers...)
}

// newHarnessWith is newHarness with the Waggler's Trust.
func newHarnessWith(t *testing.T, tr Trust, workers ...*fakeWorker) *wagglerHarness {
	h := &wagglerHarness{clk: clocktest.New(), sink: newSink()}
	cfg := Config{NodeName: "n1", Clock: h.clk, HeartbeatInterval: time.Second, Logger: zaptest.NewLogger(t), Trust: tr}.WithDefaults()
	h.w = newWaggler(cfg, "code.exec", 1, h.sink, cfg.Logger)
	h.w.onTransition = func(from, to WagglerState) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.transitions = append(h.transitions, from.String()+"→"+to.String())
	}
	for _, fw := range workers {
		if err := h.w.AddWorker(fw); err != nil {
			t.Fatal(err)
		}
	}
	h.w.start()
	t.Cleanup(h.w.close)
	return h
}

// took returns and clears the transitions so far.
func (h *wagglerHarness) took() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.transitions, " ")
	h.transitions = nil
	return s
}

func (h *wagglerHarness) dispatch(execs ...string) []port.TaskDispatch {
	var ds []port.TaskDispatch
	for _, e := range execs {
		d := task("echo", e)
		d.AttemptKey = testKey(e)
		ds = append(ds, d)
	}
	h.w.enqueue(ds)
	return ds
}

func TestWagglerStateTransitions(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1)
	if got := h.w.Status().State; got != StateIdle {
		t.Fatalf("initial state %v", got)
	}

	d := h.dispatch("a")[0]
	if got, want := h.took(), "IDLE→DISPATCHING DISPATCHING→MONITORING"; got != want {
		t.Fatalf("dispatch: transitions %q, want %q", got, want)
	}
	a := w1.assigned(t)
	if a.AttemptKey != d.AttemptKey || a.Generation == 0 {
		t.Fatalf("assignment %+v", a)
	}
	if st := h.w.Status(); st.State != StateMonitoring || st.Running != 1 || st.Queued != 0 || st.Workers != 1 {
		t.Fatalf("status while running: %+v", st)
	}

	w1.report(h.w, a, "done")
	if got, want := h.took(), "MONITORING→COLLECTING COLLECTING→IDLE"; got != want {
		t.Fatalf("result: transitions %q, want %q", got, want)
	}
	if r := h.sink.Results(); len(r) != 1 || !r[0].OK || r[0].Output != "done" || r[0].WorkerID != "w1" {
		t.Fatalf("results %+v", r)
	}

	// Two attempts, one worker: the second waits, then follows the first.
	h.dispatch("b", "c")
	if got, want := h.took(), "IDLE→DISPATCHING"; got != want {
		t.Fatalf("queued: transitions %q, want %q", got, want)
	}
	if st := h.w.Status(); st.State != StateDispatching || st.Running != 1 || st.Queued != 1 {
		t.Fatalf("status with one queued: %+v", st)
	}
	b := w1.assigned(t)
	w1.report(h.w, b, nil)
	if got, want := h.took(), "DISPATCHING→COLLECTING COLLECTING→DISPATCHING DISPATCHING→MONITORING"; got != want {
		t.Fatalf("next: transitions %q, want %q", got, want)
	}
	c := w1.assigned(t)
	w1.report(h.w, c, nil)
	if got, want := h.took(), "MONITORING→COLLECTING COLLECTING→IDLE"; got != want {
		t.Fatalf("last: transitions %q, want %q", got, want)
	}
}

// TestWagglerFailover walks the whole ladder: late, alert with a backup
// pre-selected (and kept from other work), dead → FAILOVER → the same
// attempt re-dispatched to the backup under a new generation; the dead
// worker's late result is discarded and the worker comes back.
func TestWagglerFailover(t *testing.T) {
	w1, w2 := newFakeWorker("w1"), newFakeWorker("w2")
	h := newHarness(t, w1, w2)
	d := h.dispatch("a")[0]
	var main, other *fakeWorker
	var a Assignment
	select {
	case a = <-w1.runs:
		main, other = w1, w2
	case a = <-w2.runs:
		main, other = w2, w1
	default:
		t.Fatal("no worker got the attempt")
	}
	main.beat(h.w, a, 1, Progress{StepsDone: 1, StepsTotal: 4})
	if p := h.sink.Progress(); len(p) != 1 || p[0].StepsDone != 1 || p[0].StepsTotal != 4 || p[0].WorkerID != main.id || p[0].Seq != 1 {
		t.Fatalf("progress %+v", p)
	}
	h.took()

	// Silence from t=0 (the heartbeat came at t=0 too). Late at 1.5s.
	h.clk.Advance(1500 * time.Millisecond)
	if st := h.w.Status(); st.Failovers != 0 || st.State != StateMonitoring {
		t.Fatalf("after one missed: %+v", st)
	}
	// Alert at 2.5s: the other worker stands by and takes no other work.
	h.clk.Advance(time.Second)
	h.dispatch("b")
	other.idle(t)
	if st := h.w.Status(); st.Queued != 1 {
		t.Fatalf("the backup took other work: %+v", st)
	}
	h.took()

	// Dead at 3.5s: failover to the backup, same attempt, new generation.
	h.clk.Advance(time.Second)
	if got, want := h.took(), "DISPATCHING→FAILOVER FAILOVER→DISPATCHING"; got != want {
		t.Fatalf("failover: transitions %q, want %q", got, want)
	}
	a2 := other.assigned(t)
	if a2.AttemptKey != d.AttemptKey || a2.Input != d.Input || a2.Generation <= a.Generation {
		t.Fatalf("re-dispatch %+v after %+v", a2, a)
	}
	if c := <-main.cancels; c.AttemptKey != d.AttemptKey || c.Generation != a.Generation {
		t.Fatalf("dead worker cancel %+v", c)
	}
	if got := testutil.ToFloat64(h.w.m.WorkerFailovers); got != 1 {
		t.Fatalf("worker failovers counted: %v, want 1", got)
	}
	if st := h.w.Status(); st.Failovers != 1 || st.Workers != 1 || st.Running != 1 || st.Queued != 1 {
		t.Fatalf("after failover: %+v", st)
	}

	// Heartbeats of the old generation are stale, not progress.
	before := len(h.sink.Progress())
	main.beat(h.w, a, 2, Progress{})
	if len(h.sink.Progress()) != before {
		t.Fatal("a heartbeat of the dead generation was forwarded")
	}

	// The dead worker's late result is discarded; the worker is back and
	// takes the queued attempt.
	main.report(h.w, a, "late")
	if r := h.sink.Results(); len(r) != 0 {
		t.Fatalf("late result forwarded: %+v", r)
	}
	if b := main.assigned(t); b.ExecutionID != "b" {
		t.Fatalf("revived worker got %+v", b)
	}
	if st := h.w.Status(); st.Workers != 2 {
		t.Fatalf("worker not back: %+v", st)
	}

	// The backup's result is the one result of the attempt.
	other.report(h.w, a2, "fresh")
	r := h.sink.Results()
	if len(r) != 1 || r[0].AttemptKey != d.AttemptKey || r[0].Output != "fresh" || r[0].WorkerID != other.id {
		t.Fatalf("results %+v", r)
	}
}

// TestWagglerFailoverWithoutBackup: nobody is free at the alert, so the
// failed-over attempt waits at the head of the queue for the next worker.
func TestWagglerFailoverWithoutBackup(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1)
	d := h.dispatch("a", "b")
	a := w1.assigned(t)
	h.clk.Advance(3500 * time.Millisecond)
	if st := h.w.Status(); st.Failovers != 1 || st.Queued != 2 || st.Running != 0 || st.Workers != 0 || st.State != StateDispatching {
		t.Fatalf("after failover: %+v", st)
	}
	w3 := newFakeWorker("w3")
	if err := h.w.AddWorker(w3); err != nil {
		t.Fatal(err)
	}
	a2 := w3.assigned(t)
	if a2.AttemptKey != d[0].AttemptKey || a2.Generation == a.Generation {
		t.Fatalf("failed-over attempt did not go first: %+v", a2)
	}
}

func TestWagglerWorkerDeadShortCut(t *testing.T) {
	w1, w2, w3 := newFakeWorker("w1"), newFakeWorker("w2"), newFakeWorker("w3")
	h := newHarness(t, w1)
	d := h.dispatch("a")[0]
	a := w1.assigned(t)
	if err := h.w.AddWorker(w2); err != nil {
		t.Fatal(err)
	}
	h.took()
	h.w.WorkerDead("w1") // no time passes
	if got, want := h.took(), "MONITORING→FAILOVER FAILOVER→DISPATCHING DISPATCHING→MONITORING"; got != want {
		t.Fatalf("transitions %q, want %q", got, want)
	}
	a2 := w2.assigned(t)
	if a2.AttemptKey != d.AttemptKey || a2.Generation == a.Generation {
		t.Fatalf("re-dispatch %+v", a2)
	}
	// An idle worker declared dead gets no work until it is added again.
	if err := h.w.AddWorker(w3); err != nil {
		t.Fatal(err)
	}
	h.w.WorkerDead("w3")
	h.dispatch("b")
	w3.idle(t)
	if st := h.w.Status(); st.Workers != 1 || st.Queued != 1 {
		t.Fatalf("status %+v", st)
	}
	if err := h.w.AddWorker(w3); err != nil {
		t.Fatalf("re-adding a dead worker: %v", err)
	}
	if b := w3.assigned(t); b.ExecutionID != "b" {
		t.Fatalf("revived worker got %+v", b)
	}
	if err := h.w.AddWorker(w3); err == nil {
		t.Fatal("adding a live worker twice succeeded")
	}
}

// TestWagglerWorkersOfANodeBackAlive: memberlist declared a node failed
// while it was only slow; it is a member again, and its pool's stream never
// broke (so it does not register again). Its idle workers take work again
// at once; one declared dead mid-attempt still waits for its report.
func TestWagglerWorkersOfANodeBackAlive(t *testing.T) {
	busy, idle := newFakeWorker("b/work/1"), newFakeWorker("b/work/2")
	h := newHarness(t, busy)
	d := h.dispatch("a")[0]
	a := busy.assigned(t)
	if err := h.w.AddWorker(idle); err != nil {
		t.Fatal(err)
	}
	h.w.workersOfNodeDead("b")
	if st := h.w.Status(); st.Workers != 0 || st.Queued != 1 {
		t.Fatalf("after the node's death: %+v", st)
	}
	// Another node back changes nothing for b's workers.
	before := h.w.Status()
	h.w.workersOfNodeAlive("c")
	idle.idle(t)
	if st := h.w.Status(); st != before {
		t.Fatalf("another node back changed %+v into %+v", before, st)
	}
	h.w.workersOfNodeAlive("b")
	a2 := idle.assigned(t)
	if a2.AttemptKey != d.AttemptKey || a2.Generation == a.Generation {
		t.Fatalf("the idle worker got %+v", a2)
	}
	h.dispatch("b")
	busy.idle(t) // still out of service: its slot runs the old generation
	if st := h.w.Status(); st.Queued != 1 {
		t.Fatalf("status %+v", st)
	}
	busy.report(h.w, a, "late") // stale, but its slot is free now
	if b := busy.assigned(t); b.ExecutionID != "b" {
		t.Fatalf("the worker that reported got %+v", b)
	}
}

func TestWagglerHeartbeats(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1)
	h.dispatch("a")
	a := w1.assigned(t)
	// A heartbeat a little under every interval keeps the attempt alive
	// for ever, gaps included; replays are counted and not forwarded.
	seqs := []uint64{1, 2, 2, 5, 3, 6, 9, 10}
	for _, seq := range seqs {
		h.clk.Advance(900 * time.Millisecond)
		w1.beat(h.w, a, seq, Progress{Message: fmt.Sprint(seq)})
	}
	h.clk.Advance(900 * time.Millisecond)
	st := h.w.Status()
	if st.Failovers != 0 || st.ReplaysIgnored != 2 || st.State != StateMonitoring {
		t.Fatalf("status %+v", st)
	}
	// The series: six accepted, two replays, and 3, 4, 7 and 8 missing
	// from the sequence when 5 and 9 arrived (3 came late: a replay then).
	m := h.w.m
	if got := [3]float64{testutil.ToFloat64(m.HeartbeatsReceived), testutil.ToFloat64(m.HeartbeatsReplayed), testutil.ToFloat64(m.HeartbeatsMissed)}; got != [3]float64{6, 2, 4} {
		t.Fatalf("heartbeats received, replayed, missed: %v, want [6 2 4]", got)
	}
	var got []uint64
	for _, p := range h.sink.Progress() {
		got = append(got, p.Seq)
		if p.Message != fmt.Sprint(p.Seq) || p.At.IsZero() {
			t.Errorf("progress %+v", p)
		}
	}
	if want := []uint64{1, 2, 5, 6, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("forwarded seqs %v, want %v", got, want)
	}
}

func TestWagglerCancel(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1)
	ds := h.dispatch("a", "b", "c")
	a := w1.assigned(t)
	h.w.cancel([]port.AttemptKey{ds[0].AttemptKey, ds[1].AttemptKey, testKey("unknown")})
	if c := <-w1.cancels; c.AttemptKey != ds[0].AttemptKey || c.Generation != a.Generation {
		t.Fatalf("cancel %+v", c)
	}
	if st := h.w.Status(); st.Running != 0 || st.Queued != 1 {
		t.Fatalf("status %+v", st)
	}
	// The worker stays busy until it reports; its report is discarded.
	w1.idle(t)
	w1.report(h.w, a, "too late")
	c := w1.assigned(t)
	if c.ExecutionID != "c" {
		t.Fatalf("got %+v, want c (b was cancelled while queued)", c)
	}
	w1.report(h.w, c, "ok")
	if r := h.sink.Results(); len(r) != 1 || r[0].AttemptKey != ds[2].AttemptKey {
		t.Fatalf("results %+v", r)
	}
	// A cancelled attempt raises no alarm.
	h.clk.Advance(10 * time.Second)
	if st := h.w.Status(); st.Failovers != 0 || st.State != StateIdle {
		t.Fatalf("status %+v", st)
	}
}

func TestWagglerDuplicateDispatchIgnored(t *testing.T) {
	w1, w2 := newFakeWorker("w1"), newFakeWorker("w2")
	h := newHarness(t, w1, w2)
	d := h.dispatch("a")
	h.w.enqueue(d)
	if st := h.w.Status(); st.Running != 1 || st.Queued != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestWagglerWaitingNotice(t *testing.T) {
	h := newHarness(t)
	ds := h.dispatch("a", "b")
	h.clk.Advance(500 * time.Millisecond)
	h.clk.Advance(5 * time.Second)
	p := h.sink.Progress()
	if len(p) != 2 {
		t.Fatalf("progress %+v, want one notice per attempt", p)
	}
	for i, n := range p {
		if n.AttemptKey != ds[i].AttemptKey || n.Message != "waiting: no worker offers capability code.exec" {
			t.Errorf("notice %+v", n)
		}
	}
	if st := h.w.Status(); st.State != StateDispatching || st.Queued != 2 || st.Workers != 0 {
		t.Fatalf("status %+v", st)
	}
	w1 := newFakeWorker("w1")
	if err := h.w.AddWorker(w1); err != nil {
		t.Fatal(err)
	}
	if a := w1.assigned(t); a.AttemptKey != ds[0].AttemptKey {
		t.Fatalf("assignment %+v", a)
	}
}

// An inherited attempt whose worker's node memberlist declared failed is
// queued at once — dispatched to a live worker without waiting
// InheritGrace for the dead one to register — while one whose worker's
// node is alive waits for it.
func TestWagglerInheritFromFailedNode(t *testing.T) {
	live := newFakeWorker("live/code.exec/1")
	h := newHarness(t, live)
	h.w.nodeDead = func(node string) bool { return node == "gone" }
	gone, other := task("echo", "gone"), task("echo", "other")
	gone.AttemptKey, other.AttemptKey = testKey("gone"), testKey("other")
	h.w.Inherit([]Handoff{
		{TaskDispatch: other, WorkerID: "slow/code.exec/1", Generation: 7},
		{TaskDispatch: gone, WorkerID: "gone/code.exec/1", Generation: 8},
	})
	if a := live.assigned(t); a.AttemptKey != gone.AttemptKey {
		t.Fatalf("the live worker got %s, want the attempt of the failed node", a.ExecutionID)
	}
	live.idle(t)
	if st := h.w.Status(); st.Queued != 0 || st.Running != 2 {
		t.Fatalf("status %+v: want both attempts running (one waiting for its worker)", st)
	}
}

// A dispatch of an attempt the Waggler finished (a new leader dispatching
// again what was in flight) is answered with the result again; the
// attempt does not run twice. The memory fades after rememberResults.
func TestWagglerFinishedAttemptNotRunAgain(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1)
	d := h.dispatch("a")[0]
	a := w1.assigned(t)
	w1.report(h.w, a, "out")
	if got := len(h.sink.Results()); got != 1 {
		t.Fatalf("%d results, want 1", got)
	}
	h.w.enqueue([]port.TaskDispatch{d})
	w1.idle(t)
	rs := h.sink.Results()
	if len(rs) != 2 || rs[1].AttemptKey != d.AttemptKey || rs[1].Output != "out" {
		t.Fatalf("results %+v: want the first result sent again", rs)
	}
	// A result a pool encoded (as a local pool does) is remembered encoded
	// and sent again decoded, equal.
	e := h.dispatch("e")[0]
	b := w1.assigned(t)
	out := map[string]any{"v": int64(7), "s": []any{"x", 1.5}}
	h.w.Report(Report{Key: b.AttemptKey, Generation: b.Generation, WorkerID: w1.id, OK: true, Output: out, OutputJSON: value.MustEncode(out)})
	h.w.enqueue([]port.TaskDispatch{e})
	w1.idle(t)
	if rs = h.sink.Results(); len(rs) != 4 || rs[3].AttemptKey != e.AttemptKey || !value.Equal(rs[3].Output, out) ||
		string(rs[3].OutputJSON) != string(value.MustEncode(out)) {
		t.Fatalf("results %+v: want the encoded result sent again, decoded", rs)
	}
	h.clk.Advance(rememberResults + time.Second)
	h.w.enqueue([]port.TaskDispatch{d})
	if b := w1.assigned(t); b.AttemptKey != d.AttemptKey {
		t.Fatalf("after the memory faded the attempt must run: got %+v", b)
	}
}

// A worker's report on a predecessor's assignment that reaches the
// successor before the leader's handoff (the pool kept it while it had no
// Waggler) is a completion: it goes to the engine, and the handoff that
// follows is answered with it instead of waiting for heartbeats that will
// never come. A report of this Waggler's own epoch for an attempt it does
// not hold stays stale.
func TestWagglerPredecessorReportBeforeHandoff(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1) // epoch 1: a predecessor's generations are < 1<<32
	d := task("echo", "a")
	d.AttemptKey = testKey("a")
	h.w.Report(Report{Key: d.AttemptKey, Generation: 5, WorkerID: "w1", OK: true, Output: "early"})
	if rs := h.sink.Results(); len(rs) != 1 || rs[0].Output != "early" {
		t.Fatalf("results %+v, want the early report", rs)
	}
	h.w.Inherit([]Handoff{{TaskDispatch: d, WorkerID: "w1", Generation: 5}})
	if rs := h.sink.Results(); len(rs) != 2 || rs[1].AttemptKey != d.AttemptKey {
		t.Fatalf("results %+v, want the result sent again for the handoff", rs)
	}
	if st := h.w.Status(); st.Running != 0 || st.Queued != 0 {
		t.Fatalf("status %+v: the finished attempt must not be held", st)
	}
	b := testKey("b")
	h.w.Report(Report{Key: b, Generation: 1<<32 + 9, WorkerID: "w1", OK: true})
	if rs := h.sink.Results(); len(rs) != 2 {
		t.Fatalf("a report of this epoch for an unknown attempt was taken: %+v", rs)
	}
}

// A report that answers a cancel is never an attempt's result: the
// cancel came from a Waggler that moved the attempt elsewhere (failover,
// quarantine) or from the engine. Seen in the chaos run: a worker paused
// past its heartbeats had its attempt failed over and cancelled; it
// reported the cancel after its Waggler moved, and the successor took the
// report for the attempt's failure ("sleep: attempt cancelled"), which
// failed the instance while the attempt ran on under its new generation.
func TestWagglerCancelledReportIsNeverAResult(t *testing.T) {
	w1 := newFakeWorker("w1")
	h := newHarness(t, w1) // epoch 1
	d := task("echo", "moved")
	d.AttemptKey = testKey("moved")
	// A predecessor's assignment (generation 5), cancelled there: its
	// report reaches this Waggler before the handoff.
	h.w.Report(Report{Key: d.AttemptKey, Generation: 5, WorkerID: "w1", Error: "sleep: attempt cancelled", Cancelled: true})
	if rs := h.sink.Results(); len(rs) != 0 {
		t.Fatalf("a predecessor's cancelled assignment was taken as the attempt's result: %+v", rs)
	}
	// The handoff of its new generation on another worker waits for that
	// worker, as any handoff does.
	h.w.Inherit([]Handoff{{TaskDispatch: d, WorkerID: "w2", Generation: 6}})
	if st := h.w.Status(); st.Running != 1 || len(h.sink.Results()) != 0 {
		t.Fatalf("status %+v, results %+v: the handoff must wait for its worker", st, h.sink.Results())
	}

	// Queued again (its worker registered without it), then a cancelled
	// report of the generation it ran under: not a completion either.
	q := task("echo", "requeued")
	q.AttemptKey = testKey("requeued")
	h.w.Inherit([]Handoff{{TaskDispatch: q, WorkerID: "w1", Generation: 7}})
	a := w1.assigned(t)
	if a.AttemptKey != q.AttemptKey {
		t.Fatalf("w1 got %+v, want the requeued attempt", a)
	}
	h.w.Report(Report{Key: q.AttemptKey, Generation: 7, WorkerID: "w1", Error: "attempt cancelled", Cancelled: true})
	if rs := h.sink.Results(); len(rs) != 0 {
		t.Fatalf("a cancelled report of the generation before was taken: %+v", rs)
	}

	// A cancel this Waggler did not send stopped its current assignment
	// (a predecessor's cancel reaching an adopted run): the attempt is
	// not done, it runs again.
	h.w.Report(Report{Key: q.AttemptKey, Generation: a.Generation, WorkerID: "w1", Error: "attempt cancelled", Cancelled: true})
	if rs := h.sink.Results(); len(rs) != 0 {
		t.Fatalf("a cancelled report was taken as the attempt's result: %+v", rs)
	}
	b := w1.assigned(t)
	if b.AttemptKey != q.AttemptKey || b.Generation == a.Generation {
		t.Fatalf("w1 got %+v, want the attempt again under a new generation", b)
	}
	w1.report(h.w, b, "done")
	if rs := h.sink.Results(); len(rs) != 1 || !rs[0].OK || rs[0].Output != "done" {
		t.Fatalf("results %+v, want the run after the cancel", rs)
	}
}

// A worker registering with what it runs is never handed an attempt
// meanwhile (the registration and the adoption are one step), and a copy
// of an attempt cancelled before the worker registered is stopped, not
// adopted; the worker takes work again once it reports on the copy.
func TestWagglerRegisterBusyAndCancelledCopy(t *testing.T) {
	h := newHarness(t)
	queued := h.dispatch("queued")[0]
	gone := task("echo", "gone")
	gone.AttemptKey = testKey("gone")
	h.w.cancel([]port.AttemptKey{gone.AttemptKey}) // cancelled before its worker shows up

	w1 := newFakeWorker("w1")
	h.w.Register([]Worker{w1}, []Running{{Assignment: Assignment{TaskDispatch: gone, Generation: 5}, WorkerID: "w1"}})
	w1.idle(t) // busy with the copy: not handed the queued attempt
	select {
	case c := <-w1.cancels:
		if c.AttemptKey != gone.AttemptKey || c.Generation != 5 {
			t.Fatalf("cancel %+v", c)
		}
	default:
		t.Fatal("the worker was not told to stop the cancelled copy")
	}
	if st := h.w.Status(); st.Running != 0 || st.Queued != 1 {
		t.Fatalf("status %+v: the cancelled copy must not be adopted", st)
	}
	h.w.Report(Report{Key: gone.AttemptKey, Generation: 5, WorkerID: "w1", Error: "cancelled"})
	if a := w1.assigned(t); a.AttemptKey != queued.AttemptKey {
		t.Fatalf("after reporting the copy the worker got %+v, want the queued attempt", a)
	}
	if rs := h.sink.Results(); len(rs) != 0 {
		t.Fatalf("the stopped copy's report reached the engine: %+v", rs)
	}
}

// The runs of a verified attempt (one Group) go to distinct nodes, never
// to a node in Avoid: a run no free worker may take waits, visibly when no
// live worker could ever take it, and goes out once one can.
func TestWagglerGroupsOnDistinctNodes(t *testing.T) {
	a1, a2, b1 := newFakeWorker("na/c/1"), newFakeWorker("na/c/2"), newFakeWorker("nb/c/1")
	h := newHarness(t, a1, a2)
	run := func(exec string, avoid ...string) port.TaskDispatch {
		d := task("echo", exec)
		d.AttemptKey, d.Group, d.Avoid = testKey(exec), "check[0]", avoid
		return d
	}
	r1, r2 := run("check[0]#r1"), run("check[0]#r2")
	h.w.enqueue([]port.TaskDispatch{r1, r2})
	// Both free workers are on node na: one run goes there, the other waits.
	var first Assignment
	select {
	case first = <-a2.runs:
	case first = <-a1.runs:
	default:
		t.Fatal("no run assigned")
	}
	a1.idle(t)
	a2.idle(t)
	h.clk.Advance(500 * time.Millisecond)
	notices := h.sink.Progress()
	if len(notices) != 1 || !strings.Contains(notices[0].Message, "distinct worker nodes") {
		t.Fatalf("progress %+v, want a waiting notice for the held run", notices)
	}
	// A worker on another node: the held run goes there.
	if err := h.w.AddWorker(b1); err != nil {
		t.Fatal(err)
	}
	if a := b1.assigned(t); a.AttemptKey == first.AttemptKey {
		t.Fatalf("both runs of the group on one node: %s", a.ExecutionID)
	}
	// A third run, avoiding both nodes, waits; an unrelated attempt does not.
	h.w.enqueue([]port.TaskDispatch{run("check[0]#r3", "na", "nb")})
	plain := h.dispatch("plain")
	var got []string
	for _, fw := range []*fakeWorker{a1, a2} {
		select {
		case a := <-fw.runs:
			got = append(got, a.ExecutionID)
		default:
		}
	}
	if len(got) != 1 || got[0] != plain[0].ExecutionID {
		t.Fatalf("free workers on na got %v, want only the unrelated attempt", got)
	}
}

// A node that finished one run of a group takes no other run of it: the
// second run waits for another node even though the first node is free.
func TestWagglerGroupRunsNeverShareANode(t *testing.T) {
	a1, b1 := newFakeWorker("na/c/1"), newFakeWorker("nb/c/1")
	h := newHarness(t, a1)
	run := func(exec string) port.TaskDispatch {
		d := task("echo", exec)
		d.AttemptKey, d.Group = testKey(exec), "check[0]"
		return d
	}
	h.w.enqueue([]port.TaskDispatch{run("check[0]#r1"), run("check[0]#r2")})
	first := a1.assigned(t)
	a1.report(h.w, first, "x")
	a1.idle(t) // free, but its node ran the group's first run
	if err := h.w.AddWorker(b1); err != nil {
		t.Fatal(err)
	}
	if a := b1.assigned(t); a.AttemptKey == first.AttemptKey {
		t.Fatalf("the same run twice: %s", a.ExecutionID)
	}
}

// fakeTrust allows each node a number of attempts at once, ranks nodes
// (2, established, unless set) and records what the Waggler observed.
type fakeTrust struct {
	mu       sync.Mutex
	allow    map[string]int
	ranks    map[string]int
	observed []sentinel.Observation
}

func (f *fakeTrust) Rank(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.ranks[node]; ok {
		return r
	}
	return 2
}

func (f *fakeTrust) Allowance(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.allow[node]; ok {
		return n
	}
	return math.MaxInt
}

func (f *fakeTrust) Observe(o sentinel.Observation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, o)
}

func (f *fakeTrust) Quarantined(map[string]bool) {}

func (f *fakeTrust) kinds(node string) map[sentinel.Kind]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[sentinel.Kind]int{}
	for _, o := range f.observed {
		if o.Node == node {
			out[o.Kind]++
		}
	}
	return out
}

// A node on probation runs only what its trust allows at once, however
// many slots it has; as its allowance grows (it completed work), it takes
// more. The Waggler tells the trust what it saw: attempts accepted,
// completed and lost.
func TestWagglerProbation(t *testing.T) {
	tr := &fakeTrust{allow: map[string]int{"new": 1}}
	n1, n2, n3 := newFakeWorker("new/c/1"), newFakeWorker("new/c/2"), newFakeWorker("new/c/3")
	h := newHarnessWith(t, tr, n1, n2, n3)
	h.dispatch("a", "b", "c")
	type run struct {
		fw *fakeWorker
		a  Assignment
	}
	take := func() []run {
		var rs []run
		for _, fw := range []*fakeWorker{n1, n2, n3} {
			select {
			case a := <-fw.runs:
				rs = append(rs, run{fw, a})
			default:
			}
		}
		return rs
	}
	first := take()
	if len(first) != 1 {
		t.Fatalf("a node allowed one attempt at a time runs %d", len(first))
	}
	tr.mu.Lock()
	tr.allow["new"] = 3 // it earned more
	tr.mu.Unlock()
	h.clk.Advance(time.Second) // the allowance is asked again each tick
	more := take()
	if len(more) != 2 {
		t.Fatalf("allowed three, the node runs %d more, want 2", len(more))
	}
	for _, r := range append(first, more...) {
		r.fw.report(h.w, r.a, "done")
	}
	k := tr.kinds("new")
	if k[sentinel.Accepted] != 3 || k[sentinel.Completed] != 3 {
		t.Fatalf("observed %v, want 3 accepted and 3 completed", k)
	}
}

// A quarantined node's attempts move to other nodes at once — the same
// attempt, a new generation, its late report refused — and it gets no
// work until released; its workers are not declared dead.
func TestWagglerQuarantine(t *testing.T) {
	bad, good := newFakeWorker("bad/c/1"), newFakeWorker("good/c/1")
	h := newHarness(t, bad)
	ds := h.dispatch("a")
	first := bad.assigned(t)
	if err := h.w.AddWorker(good); err != nil {
		t.Fatal(err)
	}
	h.w.Quarantine(map[string]bool{"bad": true})
	select {
	case c := <-bad.cancels:
		if c.AttemptKey != ds[0].AttemptKey || c.Generation != first.Generation {
			t.Fatalf("cancel %+v", c)
		}
	default:
		t.Fatal("the quarantined worker was not told to stop")
	}
	moved := good.assigned(t)
	if moved.AttemptKey != ds[0].AttemptKey || moved.Generation == first.Generation {
		t.Fatalf("moved %+v (first %+v)", moved, first)
	}
	// Its late report is stale; it frees the worker, which still gets
	// nothing while quarantined.
	bad.report(h.w, first, "late")
	h.dispatch("b")
	bad.idle(t)
	good.report(h.w, moved, "done")
	if r := h.sink.result(t, ds[0].AttemptKey); r.Output != "done" {
		t.Fatalf("result %+v, want the moved run's", r)
	}
	if b := good.assigned(t); b.ExecutionID != testKey("b").ExecutionID {
		t.Fatalf("the next attempt went to %+v", b)
	}
	// Released: it works again.
	h.w.Quarantine(map[string]bool{})
	h.dispatch("c")
	if a := bad.assigned(t); a.ExecutionID != testKey("c").ExecutionID {
		t.Fatalf("after release: %+v", a)
	}
}

// A worker lists what it runs when it registers. An attempt the leader
// hands over as running on a worker registered here without it is queued
// at once, not after InheritGrace and the heartbeat ladder; one bound to a
// worker that registers later without it is queued at the next tick after
// the registration unless its report arrives first.
// Either way the worker stays in service, and its report on the old
// assignment, if it follows the registration, completes the attempt (a
// new assignment of it is stopped).
func TestWagglerInheritedAttemptNotRunByItsWorker(t *testing.T) {
	w1 := newFakeWorker("n1/c/1")
	h := newHarness(t, w1)
	a, b := task("echo", "a"), task("echo", "b")
	a.AttemptKey, b.AttemptKey = testKey("a"), testKey("b")
	h.w.Inherit([]Handoff{{TaskDispatch: a, WorkerID: "n1/c/1", Generation: 5}})
	got := w1.assigned(t) // queued at once and handed to the free worker
	if got.AttemptKey != a.AttemptKey || got.Generation == 5 {
		t.Fatalf("assignment %+v: want a again under a new generation", got)
	}
	h.w.Report(Report{Key: a.AttemptKey, Generation: 5, WorkerID: "n1/c/1", OK: true, Output: "first"})
	if rs := h.sink.Results(); len(rs) != 1 || rs[0].Output != "first" {
		t.Fatalf("results %+v: want the report on the old assignment", rs)
	}
	select {
	case c := <-w1.cancels:
		if c.AttemptKey != a.AttemptKey || c.Generation != got.Generation {
			t.Fatalf("cancel %+v", c)
		}
	default:
		t.Fatal("the new assignment was not stopped")
	}
	w1.report(h.w, got, "second") // the stopped copy's report: stale
	if rs := h.sink.Results(); len(rs) != 1 {
		t.Fatalf("results %+v: the attempt completed twice", rs)
	}

	// Bound to a worker not registered yet, which then registers without it.
	h.w.Inherit([]Handoff{{TaskDispatch: b, WorkerID: "n2/c/1", Generation: 6}})
	if st := h.w.Status(); st.Running != 1 {
		t.Fatalf("status %+v: want b bound to its worker, waiting for it", st)
	}
	w2 := newFakeWorker("n2/c/1")
	h.w.Register([]Worker{w2}, nil)
	w1.idle(t) // its report may follow the registration: not yet
	w2.idle(t)
	h.clk.Advance(time.Second) // none did by the next tick
	var ran *fakeWorker
	select {
	case got = <-w1.runs:
		ran = w1
	case got = <-w2.runs:
		ran = w2
	default:
		t.Fatal("b was not queued again when its worker registered without it")
	}
	if got.AttemptKey != b.AttemptKey {
		t.Fatalf("assignment %+v, want b", got)
	}
	ran.report(h.w, got, "b")
	if rs := h.sink.Results(); len(rs) != 2 || rs[1].AttemptKey != b.AttemptKey {
		t.Fatalf("results %+v", rs)
	}
	if st := h.w.Status(); st.Running != 0 || st.Queued != 0 {
		t.Fatalf("status %+v", st)
	}
}

// A pool registers with a successor and sends the report it kept for an
// attempt it finished meanwhile right after: the attempt completes with
// that report and is not run a second time (regression: it was queued at
// the registration and handed out again before the report arrived) —
// whether the handoff named the worker, or came without one as an attempt
// the predecessor may have started.
func TestWagglerReportFollowingRegistration(t *testing.T) {
	for _, c := range []struct {
		name    string
		handoff func(d port.TaskDispatch) Handoff
	}{
		{"bound to its worker", func(d port.TaskDispatch) Handoff {
			return Handoff{TaskDispatch: d, WorkerID: "n2/c/1", Generation: 7}
		}},
		{"held back as it may run", func(d port.TaskDispatch) Handoff { return Handoff{TaskDispatch: d, MayRun: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w1 := newFakeWorker("n1/c/1")
			h := newHarness(t, w1) // epoch 1: a predecessor's generations are < 1<<32
			h.w.servingNodes = servedBy("n1", "n2")
			a := task("echo", "a")
			a.AttemptKey = testKey("a")
			h.w.Inherit([]Handoff{c.handoff(a)})
			w2 := newFakeWorker("n2/c/1")
			h.w.Register([]Worker{w2}, nil) // it finished a: not listed
			h.w.Report(Report{Key: a.AttemptKey, Generation: 7, WorkerID: "n2/c/1", OK: true, Output: "once"})
			h.clk.Advance(time.Second)
			h.clk.Advance(time.Second)
			w1.idle(t)
			w2.idle(t)
			if rs := h.sink.Results(); len(rs) != 1 || rs[0].Output != "once" {
				t.Fatalf("results %+v: want the kept report, once", rs)
			}
			if st := h.w.Status(); st.Running != 0 || st.Queued != 0 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// Of the free workers an attempt may run on, one of the most trusted node
// gets it (the most recently freed among equals); a worker of a less
// trusted node gets work when the more trusted ones are busy.
func TestWagglerPrefersTrustedNodes(t *testing.T) {
	low, high, top := newFakeWorker("low/c/1"), newFakeWorker("high/c/1"), newFakeWorker("top/c/1")
	tr := &fakeTrust{ranks: map[string]int{"low": 0, "high": 2, "top": 3}}
	h := newHarnessWith(t, tr, top, high, low) // low freed last
	h.dispatch("a")
	if a := top.assigned(t); a.ExecutionID != "a" {
		t.Fatalf("top got %s", a.ExecutionID)
	}
	h.dispatch("b")
	if b := high.assigned(t); b.ExecutionID != "b" {
		t.Fatalf("high got %s", b.ExecutionID)
	}
	h.dispatch("c")
	if c := low.assigned(t); c.ExecutionID != "c" {
		t.Fatalf("low got %s", c.ExecutionID)
	}
	top.idle(t)
	high.idle(t)
}

// TestShortAttemptsStayOnTheWagglersNode: once attempts are known to run
// for less than localBelow, an attempt goes to an idle worker of the
// Waggler's own node even when another node's worker was freed more
// recently; when this node's workers are busy it goes elsewhere; and once
// attempts run long, the most recently freed worker takes it again.
func TestShortAttemptsStayOnTheWagglersNode(t *testing.T) {
	local, remote := newFakeWorker("n1/code.exec/1"), newFakeWorker("n2/code.exec/1")
	h := newHarness(t, local, remote) // the Waggler runs on n1
	// runOn dispatches one attempt and returns the worker that got it.
	runOn := func() (*fakeWorker, Assignment) {
		t.Helper()
		h.dispatch("x")
		select {
		case a := <-local.runs:
			return local, a
		case a := <-remote.runs:
			return remote, a
		default:
			t.Fatal("no worker got the attempt")
			panic("unreachable")
		}
	}
	finish := func(f *fakeWorker, a Assignment, took time.Duration) {
		t.Helper()
		start := h.clk.Now()
		h.w.Report(Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: f.id, OK: true, StartedAt: start, FinishedAt: start.Add(took)})
	}
	// freeRemoteLast leaves both workers idle, the remote one freed last:
	// the one picked when locality does not apply. This node's workers
	// finished nothing lately (the clock moves past localBelow), so no
	// attempt waits for them.
	freeRemoteLast := func(took time.Duration) {
		t.Helper()
		h.clk.Advance(localBelow)
		f1, a1 := runOn()
		f2, a2 := runOn()
		if f1 == f2 {
			t.Fatal("two attempts on one worker at once")
		}
		if f1 == remote {
			f1, a1, f2, a2 = f2, a2, f1, a1
		}
		finish(f1, a1, took) // local first
		finish(f2, a2, took) // then remote
	}

	// Nothing known yet about how long attempts run: the most recently
	// freed worker, on the other node, takes the next.
	freeRemoteLast(time.Millisecond)
	if f, a := runOn(); f != remote {
		t.Fatalf("with run times unknown the attempt went to %s, want the most recently freed %s", f.id, remote.id)
	} else {
		finish(f, a, time.Millisecond)
	}
	for range localAfter / 2 {
		freeRemoteLast(time.Millisecond)
	}

	// Short attempts: this node's worker, though the other was freed last.
	f, a := runOn()
	if f != local {
		t.Fatalf("a short attempt went to %s, want this node's %s", f.id, local.id)
	}
	// While it is busy, the next waits for it (it finished one within
	// localBelow, and one attempt of 1 ms ahead drains in under that)...
	h.dispatch("waits")
	remote.idle(t)
	finish(f, a, time.Millisecond)
	if a2 := local.assigned(t); a2.ExecutionID != "waits" {
		t.Fatalf("this node's worker, freed, got %s; want the attempt that waited for it", a2.ExecutionID)
	} else {
		// ... but not once this node's workers finish nothing for
		// localBelow: at the next tick it goes to the other node.
		h.dispatch("moves")
		remote.idle(t)
		h.clk.Advance(time.Second) // the tick, HeartbeatInterval
		if a3 := remote.assigned(t); a3.ExecutionID != "moves" {
			t.Fatalf("the other node's worker got %s, want the attempt that waited", a3.ExecutionID)
		} else {
			finish(remote, a3, time.Millisecond)
		}
		finish(local, a2, time.Millisecond)
	}

	// From here on this node's workers turn attempts around (assignment to
	// report, by the Waggler's clock) in 2 ms, though each runs for 10 µs:
	// the turnaround, not the run time, says how fast a queue drains.
	for range 96 {
		f, a := runOn() // this node's: both are idle
		if f != local {
			t.Fatalf("a short attempt went to %s with this node's worker idle", f.id)
		}
		h.clk.Advance(2 * time.Millisecond)
		finish(f, a, 10*time.Microsecond)
	}
	// One attempt queued behind this node's busy worker drains in about
	// 2 ms: it waits...
	f, a = runOn()
	h.dispatch("short-queue")
	remote.idle(t)
	// ... ten do not (about 20 ms): the head of the queue goes to the other
	// node, though this node's worker finished one just now.
	h.dispatch("q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9")
	if a4 := remote.assigned(t); a4.ExecutionID != "short-queue" {
		t.Fatalf("the other node's worker got %s, want the head of the queue", a4.ExecutionID)
	} else {
		finish(remote, a4, time.Millisecond)
	}
	finish(f, a, time.Millisecond)
	for range 9 { // q1 to q9, each to whichever worker is free
		select {
		case a := <-local.runs:
			finish(local, a, time.Millisecond)
		case a := <-remote.runs:
			finish(remote, a, time.Millisecond)
		}
	}

	// Long attempts: the most recently freed worker again.
	freeRemoteLast(time.Second)
	if f, _ := runOn(); f != remote {
		t.Fatalf("after long attempts the attempt went to %s, want the most recently freed %s", f.id, remote.id)
	}
}

// mayRun is a handoff of a fresh attempt named exec that a predecessor held
// without the leader hearing of a worker (Handoff.MayRun).
func mayRun(exec string) Handoff {
	d := task("echo", exec)
	d.AttemptKey = testKey(exec)
	return Handoff{TaskDispatch: d, MayRun: true}
}

// servedBy makes the Waggler see nodes as the ones serving its capability.
func servedBy(nodes ...string) func(string) ([]string, bool) {
	return func(string) ([]string, bool) { return nodes, true }
}

// An attempt a predecessor held without the leader hearing of its worker
// may run on a worker already: the successor holds it back until each
// node serving the capability has registered. A worker that runs it lists
// it and keeps it (it does not run twice); the others are queued at the
// first tick half an interval after the last registration (a report a
// worker kept follows its registration).
func TestWagglerHoldsBackAttemptsThatMayRun(t *testing.T) {
	w1 := newFakeWorker("n1/c/1")
	h := newHarness(t, w1)
	h.w.servingNodes = servedBy("n1", "n2")
	a, b := mayRun("a"), mayRun("b")
	h.w.Inherit([]Handoff{a, b})
	w1.idle(t) // free, but n2 may run them
	if st := h.w.Status(); st.Queued != 2 || st.Running != 0 {
		t.Fatalf("status %+v: want both held back (counted queued)", st)
	}
	h.clk.Advance(time.Second) // n1 registered long ago; n2 has not
	w1.idle(t)

	w2 := newFakeWorker("n2/c/1")
	h.w.Register([]Worker{w2}, []Running{{Assignment: Assignment{TaskDispatch: a.TaskDispatch, Generation: 5}, WorkerID: w2.id}})
	w1.idle(t) // a is w2's; b waits for a report that may follow
	if st := h.w.Status(); st.Queued != 1 || st.Running != 1 {
		t.Fatalf("status %+v: want a adopted from n2 and b still held back", st)
	}
	h.clk.Advance(500 * time.Millisecond)
	if got := w1.assigned(t); got.AttemptKey != b.AttemptKey {
		t.Fatalf("w1 got %s, want b", got.ExecutionID)
	}
	w2.idle(t)
	h.w.Report(Report{Key: a.AttemptKey, Generation: 5, WorkerID: w2.id, OK: true, Output: "a"})
	h.w.Report(Report{Key: b.AttemptKey, Generation: h.w.nextGen, WorkerID: w1.id, OK: true, Output: "b"})
	if rs := h.sink.Results(); len(rs) != 2 || rs[0].Output != "a" || rs[1].Output != "b" {
		t.Fatalf("results %+v: want a from n2 and b from n1, once each", rs)
	}
	if st := h.w.Status(); st.Queued != 0 || st.Running != 0 {
		t.Fatalf("status %+v", st)
	}
}

// A node serving the capability that never registers (it lags, or dies
// without the mesh saying so yet) holds a held-back attempt for
// InheritGrace at most; without a view of the mesh, the Waggler waits that
// long too. A cancel drops a held-back attempt.
func TestWagglerHeldBackAttemptsWaitTheGraceAtMost(t *testing.T) {
	for _, c := range []struct {
		name    string
		serving func(string) ([]string, bool)
	}{
		{"a serving node never registers", servedBy("n1", "n3")},
		{"membership not known", func(string) ([]string, bool) { return nil, false }},
		{"no view of the mesh", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w1 := newFakeWorker("n1/c/1")
			h := newHarness(t, w1)
			h.w.servingNodes = c.serving
			a, gone := mayRun("a"), mayRun("gone")
			h.w.Inherit([]Handoff{a, gone})
			h.w.cancel([]port.AttemptKey{gone.AttemptKey})
			if st := h.w.Status(); st.Queued != 1 {
				t.Fatalf("status %+v: want a held back, the cancelled one gone", st)
			}
			h.clk.Advance(h.w.grace - 500*time.Millisecond)
			w1.idle(t)
			h.clk.Advance(500 * time.Millisecond)
			if got := w1.assigned(t); got.AttemptKey != a.AttemptKey {
				t.Fatalf("w1 got %s, want a at the end of the grace", got.ExecutionID)
			}
			h.clk.Advance(time.Second)
			w1.idle(t)
		})
	}
}

// Once every serving node registered, a held-back attempt handed over
// later (a session with the successor opened again) is queued at once: no
// worker listed it.
func TestWagglerHeldBackAttemptQueuedWhenAllRegistered(t *testing.T) {
	w1 := newFakeWorker("n1/c/1")
	h := newHarness(t, w1)
	h.w.servingNodes = servedBy("n1")
	h.clk.Advance(time.Second)
	a := mayRun("a")
	h.w.Inherit([]Handoff{a})
	if got := w1.assigned(t); got.AttemptKey != a.AttemptKey {
		t.Fatalf("w1 got %s, want a at once", got.ExecutionID)
	}
}
