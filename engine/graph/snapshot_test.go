package graph

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

// event is one call on a Graph after Start: a completion or a timer.
type event struct {
	fire    bool
	ref     TaskRef
	attempt uint32
	res     Result
	timer   Timer
	now     time.Time
}

func (e event) apply(g *Graph) []Effect {
	if e.fire {
		return g.Fire(e.timer, e.now)
	}
	return g.Complete(e.ref, e.attempt, e.res, e.now)
}

var scenarioInputs = map[string]any{"hosts": []any{"h0", "h1", "h2", "h3", "h4"}}

// scenarioWorkflow exercises spread, retries with jitter, skip, timeouts,
// guards and a join.
func scenarioWorkflow() *robonetv1.Workflow {
	return newWorkflow(
		input("hosts", robonetv1.ValueType_VALUE_TYPE_LIST, true, ""),
		tasks(
			newTask("discover", with(tmap("targets", ex("inputs.hosts")))),
			newTask("probe", needs("discover"), spreadOver("tasks.discover.output"),
				with(interp("http://${{ item }}/health?i=${{ index }}")),
				onFailure(policySkip), retry(3, time.Second, 2, 10*time.Second, 0.3), timeoutAfter(20*time.Second)),
			newTask("side", with(lit(`{"x":[1,2.5,"s"]}`)), timeoutAfter(5*time.Second), retry(2, time.Second, 1, 0, 0)),
			newTask("guard", needs("side"), when("tasks.side.output == 'go'"), with(ex("tasks.side.output"))),
			newTask("only", needs("guard")),
			newTask("summarize", needs("probe", "side"),
				with(tmap("probe", ex("tasks.probe.output"), "side", ex("tasks.side.output")))),
		),
		output("only", ex("tasks.only.output")),
		output("report", ex("tasks.summarize.output")),
	)
}

// scenarioEvents drives a graph to the end with a deterministic worker: it
// answers dispatches in order (echoing the input by default), lets side#1 hang until its timeout, fails
// some probe instances (probe[3] always), and fires the earliest timer every
// fourth step or when nothing is in flight.
func scenarioEvents(t *testing.T, p *Plan) []event {
	t.Helper()
	g := p.NewGraph("inst")
	fx, err := g.Start(scenarioInputs, t0)
	if err != nil {
		t.Fatal(err)
	}
	side, _ := p.Lookup("side")
	discover, _ := p.Lookup("discover")
	type attempt struct {
		ref TaskRef
		n   uint32
		in  any
	}
	var inflight []attempt
	var timers []Timer
	var events []event
	now := t0
	for step := 0; ; step++ {
		for _, e := range fx {
			switch e.Kind {
			case Dispatch:
				if e.Task.Node == side && e.Attempt == 1 {
					continue // hangs: only its timeout will fire
				}
				inflight = append(inflight, attempt{e.Task, e.Attempt, e.Input})
			case Cancel:
				inflight = slices.DeleteFunc(inflight, func(a attempt) bool { return a.ref == e.Task && a.n == e.Attempt })
			case SetTimer:
				timers = append(timers, e.Timer)
			}
		}
		if g.State().Terminal() {
			return events
		}
		now = now.Add(100 * time.Millisecond)
		var ev event
		switch {
		case len(timers) > 0 && (step%4 == 3 || len(inflight) == 0):
			i := 0
			for j, tm := range timers {
				if tm.At.Before(timers[i].At) {
					i = j
				}
			}
			tm := timers[i]
			timers = slices.Delete(timers, i, i+1)
			if tm.At.After(now) {
				now = tm.At
			}
			ev = event{fire: true, timer: tm, now: now}
		case len(inflight) > 0:
			a := inflight[0]
			inflight = inflight[1:]
			ev = event{ref: a.ref, attempt: a.n, now: now}
			switch {
			case a.ref.Node == discover:
				ev.res.Output = []any{"h0", "h1", "h2", "h3", "h4"}
			case a.ref.Index == 3 || (a.ref.Index == 1 && a.n < 3):
				ev.res.Err = fmt.Errorf("probe %d attempt %d refused", a.ref.Index, a.n)
			case a.ref.Index >= 0:
				ev.res.Output = map[string]any{"i": int64(a.ref.Index), "ok": true, "lat": 0.25}
			case a.ref.Node == side:
				ev.res.Output = "go"
			default:
				ev.res.Output = a.in // echo
			}
		default:
			t.Fatalf("scenario stuck in state %s", g.State())
		}
		events = append(events, ev)
		fx = ev.apply(g)
	}
}

type run struct {
	effects   [][]string // per event, index 0 is Start
	snapshots [][]byte   // after Start and after each event
	g         *Graph
}

func replay(t *testing.T, p *Plan, events []event) run {
	t.Helper()
	g := p.NewGraph("inst")
	fx, err := g.Start(scenarioInputs, t0)
	if err != nil {
		t.Fatal(err)
	}
	r := run{g: g}
	record := func(fx []Effect) {
		r.effects = append(r.effects, formatEffects(p, fx))
		snap, err := g.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		r.snapshots = append(r.snapshots, snap)
	}
	record(fx)
	for _, ev := range events {
		record(ev.apply(g))
	}
	return r
}

func TestScenarioOutcome(t *testing.T) {
	p := mustPlan(t, scenarioWorkflow(), Options{})
	events := scenarioEvents(t, p)
	r := replay(t, p, events)
	g := r.g
	if g.State() != Complete {
		t.Fatalf("state %s: %v", g.State(), g.Err())
	}
	want := `{"only":null,"report":{"probe":[{"i":0,"lat":0.25,"ok":true},{"i":1,"lat":0.25,"ok":true},` +
		`{"i":2,"lat":0.25,"ok":true},null,{"i":4,"lat":0.25,"ok":true}],"side":"go"}}`
	if got := string(value.MustEncode(g.Outputs())); got != want {
		t.Errorf("outputs = %s\nwant %s", got, want)
	}
	s := g.Stats()
	// side: 1 timeout; probe[1]: 2 failures; probe[3]: 3 failures.
	if s.TimedOut != 1 || s.FailedAttempts != 6 || s.Retries != 5 {
		t.Errorf("stats = %+v", s)
	}
}

func TestSnapshotRestoreResumeContinuesIdentically(t *testing.T) {
	p := mustPlan(t, scenarioWorkflow(), Options{})
	events := scenarioEvents(t, p)
	full := replay(t, p, events)
	finalSnap := full.snapshots[len(full.snapshots)-1]

	// Every input ever dispatched, by attempt, to check Resume re-sends
	// exactly the same one.
	dispatched := map[string]string{}
	for _, fx := range full.effects {
		for _, e := range fx {
			if len(e) > 9 && e[:9] == "dispatch " {
				key, _, _ := cut(e[9:], ' ')
				dispatched[key] = e
			}
		}
	}

	for k := 0; k <= len(events); k++ {
		t.Run(fmt.Sprintf("after_%d_events", k), func(t *testing.T) {
			snap := full.snapshots[k]
			g, err := p.Restore("inst", snap)
			if err != nil {
				t.Fatal(err)
			}
			again, err := g.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, snap) {
				t.Fatal("snapshot of the restored graph differs")
			}
			resumed := formatEffects(p, g.Resume(t0))
			var wantDispatches int
			for node := range p.NumTasks() {
				info := g.Task(Ref(int32(node)))
				if info.Status == TaskRunning {
					wantDispatches++
				}
				for i := int32(0); i < info.Width; i++ {
					if g.Task(TaskRef{Node: int32(node), Index: i}).Status == TaskRunning {
						wantDispatches++
					}
				}
			}
			var gotDispatches int
			for _, e := range resumed {
				if len(e) > 9 && e[:9] == "dispatch " {
					gotDispatches++
					key, _, _ := cut(e[9:], ' ')
					if dispatched[key] != e {
						t.Errorf("resumed %q, originally %q", e, dispatched[key])
					}
				}
			}
			if gotDispatches != wantDispatches {
				t.Errorf("Resume dispatched %d attempts, %d are in flight: %q", gotDispatches, wantDispatches, resumed)
			}
			for i, ev := range events[k:] {
				got := formatEffects(p, ev.apply(g))
				if want := full.effects[k+1+i]; !slices.Equal(got, want) {
					t.Fatalf("event %d: effects %q, want %q", k+i, got, want)
				}
			}
			final, err := g.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(final, finalSnap) {
				t.Error("final snapshot differs")
			}
			if got, want := value.MustEncode(g.Outputs()), value.MustEncode(full.g.Outputs()); !bytes.Equal(got, want) {
				t.Errorf("outputs %s, want %s", got, want)
			}
		})
	}
}

func cut(s string, sep byte) (string, string, bool) {
	if i := bytes.IndexByte([]byte(s), sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func TestResumeKeepsDeadlines(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("slow", with(lit(`1`)), timeoutAfter(30*time.Second)),
		newTask("flaky", with(lit(`2`)), retry(2, 7*time.Second, 1, 0, 0)),
	)), Options{})
	h.start(nil)
	h.now = t0.Add(3 * time.Second)
	expect(t, h.failed("flaky", -1, 1, "x"), `retry flaky#1 @10s`)
	snap, err := h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.p.Restore("inst", snap)
	if err != nil {
		t.Fatal(err)
	}
	// Resumed much later: deadlines are the original ones.
	expect(t, formatEffects(h.p, g.Resume(t0.Add(time.Hour))), `retry flaky#1 @10s`, `dispatch slow#1 1`, `timeout slow#1 @30s`)
	if s := g.Stats(); s.Redispatched != 1 || s.Dispatched != 0 {
		t.Errorf("stats = %+v", s)
	}
	if info := g.Task(h.ref("flaky", -1)); info.Error != "x" || info.Status != TaskRetrying {
		t.Errorf("flaky = %+v", info)
	}
}

func TestSnapshotTerminalStates(t *testing.T) {
	h := newHarness(t, newWorkflow(tasks(
		newTask("a", onFailure(policyAbort)), newTask("b"),
	)), Options{})
	h.start(nil)
	h.failed("a", -1, 1, "fatal")
	snap, err := h.g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.p.Restore("inst", snap)
	if err != nil {
		t.Fatal(err)
	}
	if g.State() != Failed || g.Err().Error() != h.g.Err().Error() {
		t.Fatalf("restored %s %v", g.State(), g.Err())
	}
	var we *WorkflowError
	if !errors.As(g.Err(), &we) || *we != *h.g.err {
		t.Errorf("err = %#v", g.Err())
	}
	expect(t, formatEffects(h.p, g.Resume(t0)), `finished FAILED`)
	if st := g.Task(h.ref("b", -1)).Status; st != TaskCancelled {
		t.Errorf("b = %s", st)
	}

	// PENDING round-trips too.
	pg := h.p.NewGraph("p")
	snap, _ = pg.Snapshot()
	g, err = h.p.Restore("p", snap)
	if err != nil || g.State() != Pending {
		t.Fatalf("pending restore: %v %v", g, err)
	}
	if fx := g.Resume(t0); fx != nil {
		t.Errorf("Resume of a pending graph = %v", fx)
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	p := mustPlan(t, scenarioWorkflow(), Options{})
	events := scenarioEvents(t, p)
	a, b := replay(t, p, events), replay(t, p, events)
	for i := range a.snapshots {
		if !bytes.Equal(a.snapshots[i], b.snapshots[i]) {
			t.Fatalf("snapshot %d differs between identical runs", i)
		}
	}
	// A stale completion changes Stats but not the state, so not the bytes.
	g := a.g
	before, _ := g.Snapshot()
	g.Complete(Ref(0), 99, Result{Output: 1}, t0)
	after, _ := g.Snapshot()
	if !bytes.Equal(before, after) {
		t.Error("stale completion changed the snapshot")
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	p := mustPlan(t, scenarioWorkflow(), Options{})
	events := scenarioEvents(t, p)
	r := replay(t, p, events)
	mid := r.snapshots[len(r.snapshots)/2]

	if _, err := p.Restore("other", mid); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("wrong instance: %v", err)
	}
	other := mustPlan(t, newWorkflow(tasks(newTask("x"))), Options{})
	if _, err := other.Restore("inst", mid); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("wrong plan: %v", err)
	}
	for n := range len(mid) {
		if _, err := p.Restore("inst", mid[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: restored", n)
		}
	}
	if _, err := p.Restore("inst", append(slices.Clone(mid), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	// Corrupted bytes never panic; whatever restores must be usable.
	for i := range mid {
		for _, x := range []byte{1, 0x80, 0xff} {
			bad := slices.Clone(mid)
			bad[i] ^= x
			g, err := p.Restore("inst", bad)
			if err != nil {
				continue
			}
			g.Resume(t0)
			for node := range p.NumTasks() {
				g.Task(Ref(int32(node)))
			}
			if _, err := g.Snapshot(); err != nil {
				t.Errorf("snapshot after restore of corrupted bytes: %v", err)
			}
		}
	}
}
