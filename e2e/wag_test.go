package e2e_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// These tests run Wagglers across an in-process mesh: one server on the
// embedded store that serves no capability (so every task crosses nodes),
// and worker-only nodes that serve the capability "work" with a "mark"
// action the test controls: every run is recorded with the node that ran
// it, and runs block until the test releases them.

// runLog records runs of a test action, wherever they happen, and lets the
// test wait for a condition on them.
type runLog[T any] struct {
	mu      sync.Mutex
	runs    []T
	changed chan struct{} // closed and replaced at every run
}

func newRunLog[T any]() runLog[T] { return runLog[T]{changed: make(chan struct{})} }

func (l *runLog[T]) add(r T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitRuns waits until cond holds of the runs so far.
func (l *runLog[T]) waitRuns(t *testing.T, what string, cond func([]T) bool) []T {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		runs := slices.Clone(l.runs)
		ch := l.changed
		l.mu.Unlock()
		if cond(runs) {
			return runs
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; runs: %+v", what, runs)
		}
	}
}

func (l *runLog[T]) snapshot() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// marks records the runs of the "mark" action across every node.
type marks struct {
	runLog[markRun]
	release chan struct{} // closed: every run (current and future) returns
}

type markRun struct {
	node, exec string
	attempt    uint32
}

func newMarks() *marks {
	return &marks{runLog: newRunLog[markRun](), release: make(chan struct{})}
}

// registry returns node's action registry with "mark".
func (m *marks) registry(t *testing.T, nodeName string) *wag.Registry {
	reg := wag.NewRegistry()
	err := reg.Register("mark", func(ctx context.Context, call *wag.Call) (any, error) {
		m.add(markRun{node: nodeName, exec: call.Key.ExecutionID, attempt: call.Key.Attempt})
		select {
		case <-m.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return map[string]any{"node": nodeName, "in": call.Input}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// wagMesh is a server and worker nodes.
type wagMesh struct {
	t       *testing.T
	server  *meshNode
	workers map[string]*meshNode
	marks   *marks
	dataDir string
}

// wagNodeConfig is a node of a wagMesh: tight gossip and heartbeat
// timings, so failures are seen in under a second.
func wagNodeConfig(t *testing.T, name string, server bool, join []string, caps map[string]int, reg *wag.Registry) node.Config {
	cfg := meshNodeConfig(t, name, "", "", server, join, 1) // no DSN: SQLite
	cfg.Capabilities = caps
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named(name) // the Wagglers' story, should a test fail
	cfg.Wag.Registry = reg
	// These meshes test placement and failover, not trust: operators
	// vouch for every node and every worker program, so none starts on
	// probation (trust_test.go tests probation, forgeries and the
	// Sentinel; programs_test.go programs').
	cfg.TrustPeers = []string{"*", "*/*"}
	return cfg
}

// startWagMesh starts the server (SQLite, no capability) and one worker
// node per name, each serving "work" with two slots.
func startWagMesh(t *testing.T, workers ...string) *wagMesh {
	t.Helper()
	return startWagMeshWith(t, nil, workers...)
}

// startWagMeshWith is startWagMesh with adjust (if not nil) changing each
// node's configuration ("server" first) before it starts.
func startWagMeshWith(t *testing.T, adjust func(name string, cfg *node.Config), workers ...string) *wagMesh {
	t.Helper()
	m := &wagMesh{t: t, workers: map[string]*meshNode{}, marks: newMarks()}
	t.Cleanup(func() {
		select {
		case <-m.marks.release:
		default:
			close(m.marks.release) // let blocked actions return before the nodes stop
		}
	})
	scfg := wagNodeConfig(t, "server", true, nil, map[string]int{}, nil)
	if adjust != nil {
		adjust("server", &scfg)
	}
	m.dataDir = scfg.DataDir
	s := startNodeWith(t, scfg)
	m.server = &meshNode{testNode: s, name: "server", server: true, mesh: robonetv1.NewMeshServiceClient(s.conn)}
	join := []string{s.node.GossipAddr()}
	for _, name := range workers {
		cfg := wagNodeConfig(t, name, false, join, map[string]int{"work": 2}, m.marks.registry(t, name))
		if adjust != nil {
			adjust(name, &cfg)
		}
		w := startNodeWith(t, cfg)
		m.workers[name] = &meshNode{testNode: w, name: name, mesh: robonetv1.NewMeshServiceClient(w.conn)}
	}
	eventually(t, 30*time.Second, "an engine leader", func() bool { return s.node.Term() > 0 })
	return m
}

// waggler returns the node holding the Waggler role of "work" (per the
// control state) once every worker's pool follows it.
func (m *wagMesh) waggler(not string) string {
	m.t.Helper()
	var holder string
	eventually(m.t, 30*time.Second, "a waggler for work", func() bool {
		holder = ""
		for _, mem := range m.server.node.Members() {
			if mem.Status == mesh.StatusAlive && mem.Wagglers["work"] > 0 && mem.Name != not {
				holder = mem.Name
			}
		}
		return holder != ""
	})
	return holder
}

// finish releases every mark run, waits for instance id to complete with
// each of its n executions recorded once, and returns the nodes every
// execution ran on, in order.
func (m *wagMesh) finish(id string, n int) map[string][]string {
	m.t.Helper()
	close(m.marks.release)
	in := waitDone(m.t, m.server.api, id, 60*time.Second)
	wantState(m.t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(m.t, id, m.history(id), n)
	runs := map[string][]string{}
	for _, r := range m.marks.snapshot() {
		runs[r.exec] = append(runs[r.exec], r.node)
	}
	return runs
}

// markSpec spreads n "mark" tasks over the capability "work".
var markSpec = testdataSpec("mark.yaml")

// history reads the recorded attempts of an instance from the server's
// store.
func (m *wagMesh) history(id string) []port.ActionResult {
	m.t.Helper()
	return taskHistory(m.t, sqliteStore, m.dataDir, "", "", id)
}

// A spread runs on the worker nodes, through the Waggler of its
// capability on one of them; the server serves nothing.
func TestWagglersRunTasksWhereTheCapabilityIs(t *testing.T) {
	m := startWagMesh(t, "w1", "w2")
	m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`)
	runs := m.marks.waitRuns(t, "four runs", func(r []markRun) bool { return len(r) == 4 })
	close(m.marks.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	nodes := map[string]int{}
	for _, r := range runs {
		nodes[r.node]++
	}
	if nodes["w1"] != 2 || nodes["w2"] != 2 {
		t.Fatalf("runs per node %v, want 2 and 2 (two slots each)", nodes)
	}
	checkOncePerExecution(t, id, m.history(id), 4)
}

// A worker node killed mid-task: its attempts fail over to the other
// workers (memberlist short-cuts the ladder) and each execution completes
// once.
func TestWorkerKilledMidTask(t *testing.T) {
	m := startWagMesh(t, "w1", "w2", "w3") // six slots
	holder := m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`)
	before := m.marks.waitRuns(t, "four runs", func(r []markRun) bool { return len(r) == 4 })
	// The victim: a worker that runs something and does not hold the
	// Waggler role.
	victim, ran := "", 0
	for _, r := range before {
		if r.node != holder && (victim == "" || r.node == victim) {
			victim = r.node
			ran++
		}
	}
	m.workers[victim].halted = true
	m.workers[victim].node.Halt()
	runs := m.marks.waitRuns(t, "the victim's attempts to run again elsewhere", func(r []markRun) bool {
		return len(r) == 4+ran
	})
	for _, r := range runs[4:] {
		if r.node == victim {
			t.Fatalf("an attempt ran again on the dead node: %+v", r)
		}
	}
	close(m.marks.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(t, id, m.history(id), 4)
	t.Logf("victim %s ran %d; runs: %+v", victim, ran, runs)
}

// The node of the Waggler killed while its attempts run on other workers:
// the leader gives the role to a successor (a higher epoch), the workers
// register with it and it adopts what they run — nothing runs twice — and
// attempts still queued are dispatched by the successor.
func TestWagglerKilledAttemptsInherited(t *testing.T) {
	m := startWagMesh(t, "w1", "w2", "w3", "w4") // eight slots
	holder := m.waggler("")
	// Eight tasks fill every slot, two of them on the Waggler's node.
	id := submitSpec(t, m.server.api, markSpec, `{"n": 8}`)
	before := m.marks.waitRuns(t, "eight runs", func(r []markRun) bool { return len(r) == 8 })
	// Each goes to the successor with its worker.
	// TestWagglerKilledBeforeTheLeaderHeardOfItsWorkers is the other case.
	m.waitWorkersKnown(id, 8)
	m.killWagglerAndFinish(id, holder, before)
}

// The node of the Waggler killed before the leader heard which worker runs
// each attempt (its reports of the starts are lost): every attempt goes to
// the successor without a worker, as one that may run already. The
// successor holds them back until the live nodes serving the capability
// have registered, so that the workers running them keep them: nothing
// that runs on a live worker runs twice.
func TestWagglerKilledBeforeTheLeaderHeardOfItsWorkers(t *testing.T) {
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name == "server" {
			cfg.Faults = &node.Faults{LoseWagglerStarts: true}
		}
	}, "w1", "w2", "w3", "w4") // eight slots
	holder := m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 8}`)
	before := m.marks.waitRuns(t, "eight runs", func(r []markRun) bool { return len(r) == 8 })
	m.killWagglerAndFinish(id, holder, before)
}

// waitWorkersKnown waits until the leader's view of instance id (its
// first task) shows n attempts running, each with its worker's node: the
// view names it from the heartbeats, which the Waggler relays after the
// attempt's start, so the leader would hand each to a successor with its
// worker.
func (m *wagMesh) waitWorkersKnown(id string, n int) {
	t := m.t
	t.Helper()
	eventually(t, 30*time.Second, "the leader to know the worker of every attempt", func() bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		as := resp.GetInstance().GetTasks()[0].GetAttempts()
		for _, a := range as {
			if !a.GetRunning() || a.GetNode() == "" {
				return false
			}
		}
		return len(as) == n
	})
}

// killWagglerAndFinish kills the node of the Waggler (holder) while the
// runs before are in flight, lets everything finish and checks that each
// run on a live worker was inherited — it ran once — and each run on the
// dead node ran once more, elsewhere.
func (m *wagMesh) killWagglerAndFinish(id, holder string, before []markRun) {
	t := m.t
	t.Helper()
	m.workers[holder].halted = true
	m.workers[holder].node.Halt()
	successor := m.waggler(holder)
	t.Logf("waggler %s killed; successor %s", holder, successor)
	// Let everything finish: the live workers' attempts report to the
	// successor, the dead node's two run again as slots free up.
	runs := m.finish(id, 8)
	for _, r := range before {
		switch got := runs[r.exec]; {
		case r.node == holder && (len(got) != 2 || got[1] == holder):
			t.Errorf("%s ran on the dead Waggler node; it must run again once, elsewhere: %v", r.exec, got)
		case r.node != holder && len(got) != 1:
			t.Errorf("%s ran on live worker %s and was inherited; it must not run again: %v", r.exec, r.node, got)
		}
	}
	t.Logf("runs: %v", runs)
}

// followLog is a zap core that sends the waggler_node of every "pool
// follows its waggler" entry to ch.
type followLog struct{ ch chan<- string }

func (c followLog) Enabled(zapcore.Level) bool        { return true }
func (c followLog) With([]zapcore.Field) zapcore.Core { return c }
func (c followLog) Sync() error                       { return nil }
func (c followLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "pool follows its waggler" {
		return ce.AddCore(e, c)
	}
	return ce
}
func (c followLog) Write(_ zapcore.Entry, fs []zapcore.Field) error {
	for _, f := range fs {
		if f.Key == "waggler_node" {
			c.ch <- f.String
		}
	}
	return nil
}

// A worker whose gossip never tells it who holds the Waggler role follows
// the Waggler the control state names: at first, and after the holder's
// node is killed — within the successor's grace, so that the successor
// adopts what it runs instead of running it again.
func TestWorkerFollowsTheControlStateWithoutGossip(t *testing.T) {
	const deaf = "w4"
	followed := make(chan string, 64) // the Waggler nodes the deaf worker's pool followed, in order
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name != deaf {
			return
		}
		cfg.Faults = &node.Faults{DeafToWagglerGossip: true}
		cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), followLog{followed})).Named(name)
	}, "w1", "w2", "w3", deaf) // eight slots
	holder := m.waggler("")
	if holder == deaf {
		t.Skipf("the deaf worker %s holds the role", deaf)
	}
	waitFollow := func(want string) {
		t.Helper()
		for {
			select {
			case got := <-followed:
				if got == want {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s never followed the Waggler on %s", deaf, want)
			}
		}
	}
	waitFollow(holder)
	id := submitSpec(t, m.server.api, markSpec, `{"n": 8}`)
	before := m.marks.waitRuns(t, "eight runs", func(r []markRun) bool { return len(r) == 8 })
	m.waitWorkersKnown(id, 8)
	m.workers[holder].halted = true
	m.workers[holder].node.Halt()
	successor := m.waggler(holder)
	waitFollow(successor)
	runs := m.finish(id, 8)
	for _, r := range before {
		if got := runs[r.exec]; r.node == deaf && len(got) != 1 {
			t.Errorf("%s ran on %s, which followed the successor %s from the control state; it must be adopted, not run again: %v", r.exec, deaf, successor, got)
		}
	}
}

// A capability no node serves: its attempts wait, visibly, until a node
// that serves it joins.
func TestCapabilityWaitsForANode(t *testing.T) {
	m := startWagMesh(t)
	id := submitSpec(t, m.server.api, markSpec, `{"n": 2}`)
	eventually(t, 30*time.Second, "the waiting notice", func() bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range resp.GetInstance().GetTasks() {
			if strings.Contains(tk.GetProgress().GetMessage(), "waiting: no node serves work") {
				return true
			}
		}
		return false
	})
	cfg := wagNodeConfig(t, "late", false, []string{m.server.node.GossipAddr()}, map[string]int{"work": 1}, m.marks.registry(t, "late"))
	startNodeWith(t, cfg)
	m.marks.waitRuns(t, "the run on the node that joined", func(r []markRun) bool { return len(r) == 1 && r[0].node == "late" })
	close(m.marks.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
}

// Admission by backlog through the public API: with two slots serving
// "work", once more than 1,024 of its attempts are in flight a new
// instance is held back — RUNNING with its first task saying why, nothing
// of it dispatched — and it starts and completes as the backlog drains.
func TestBacklogHoldsBackNewInstances(t *testing.T) {
	m := startWagMesh(t, "w1")
	m.waggler("")
	heldBack := func(id string) bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range resp.GetInstance().GetTasks() {
			if strings.Contains(tk.GetProgress().GetMessage(), "capability work has a full backlog") {
				if len(tk.GetAttempts()) != 0 || resp.GetInstance().GetState() != robonetv1.InstanceState_INSTANCE_STATE_RUNNING {
					t.Fatalf("an instance held back is %s with attempts %v", resp.GetInstance().GetState(), tk.GetAttempts())
				}
				return true
			}
		}
		return false
	}
	// Each instance adds 600 attempts; the Router counts them once the
	// engine's shard dispatched them: each one started is waited for at
	// the Waggler (which has them from the Router) before the next is
	// submitted, so the one held back is the third or a later one.
	atWaggler := func() int32 {
		resp, err := m.server.mesh.ListWagglers(ctxFor(t, 10*time.Second), &robonetv1.ListWagglersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetWagglers() {
			if r.GetCapability() == "work" {
				return r.GetInFlight() + r.GetQueued()
			}
		}
		return 0
	}
	var ids []string
	held := ""
	for len(ids) < 6 {
		id := submitSpec(t, m.server.api, markSpec, `{"n": 600}`)
		ids = append(ids, id)
		if len(ids) >= 3 && heldBack(id) {
			held = id
			break
		}
		want := int32(600 * len(ids))
		eventually(t, 30*time.Second, "the instance's attempts at the Waggler", func() bool { return atWaggler() >= want })
	}
	if held == "" {
		t.Fatalf("none of %d instances of 600 tasks was held back with 2 slots serving their capability", len(ids))
	}
	close(m.marks.release)
	for _, id := range ids {
		in := waitDone(t, m.server.api, id, 60*time.Second)
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	}
	checkOncePerExecution(t, held, m.history(held), 600)
}

// The engine leader halted while attempts run on worker-only nodes: a new
// leader takes over (new term), the workers keep running what they run —
// nothing runs again — and their results reach the new leader's engine;
// every execution is recorded once.
func TestLeaderChangeWhileWorkersRun(t *testing.T) {
	mk := newMarks()
	t.Cleanup(func() {
		select {
		case <-mk.release:
		default:
			close(mk.release)
		}
	})
	m := startMesh(t, 3, 2, func(cfg *node.Config) {
		cfg.Capabilities = map[string]int{} // servers serve nothing
		if !*cfg.Server {
			cfg.Capabilities = map[string]int{"work": 2}
			cfg.Wag.Registry = mk.registry(t, cfg.Name)
		}
	})
	old := m.leader()
	oldTerm := old.node.Term()
	id := submitSpec(t, m.follower().api, markSpec, `{"n": 4}`)
	mk.waitRuns(t, "four runs on the workers", func(r []markRun) bool { return len(r) == 4 })
	m.halt(old)
	nl := m.waitLeader(old.name, 30*time.Second)
	if nl.node.Term() <= oldTerm {
		t.Fatalf("new leader %s has term %d, not above %d", nl.name, nl.node.Term(), oldTerm)
	}
	close(mk.release)
	in := waitDone(t, nl.api, id, 60*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	if runs := mk.snapshot(); len(runs) != 4 {
		t.Errorf("%d runs, want 4: the workers' attempts must not run again after a leader change: %+v", len(runs), runs)
	}
	checkOncePerExecution(t, id, taskHistory(t, postgresStore, "", m.dsn, m.schema, id), 4)
}

// A node whose Waggler others hold streams to (the leader's Lead session,
// the other workers' Work streams) stops at once: stopping ends those
// streams instead of waiting out the stop timeout for the others to hang
// up.
func TestWagglerNodeStopsPromptly(t *testing.T) {
	m := startWagMesh(t, "w1", "w2")
	holder := m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 2}`)
	m.marks.waitRuns(t, "two runs", func(r []markRun) bool { return len(r) == 2 })
	close(m.marks.release)
	waitDone(t, m.server.api, id, 30*time.Second)
	start := time.Now()
	if err := m.workers[holder].node.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The test nodes' stop timeout is 5 s: a stop that waited for the
	// streams would take that long.
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stopping the Waggler's node took %v: it waited for streams others hold open", took)
	}
}

// doubler is a registry with the action "double": {"x": n} → 2n; a liar
// answers 2n+1. runs, if not nil, counts the runs.
func doubler(t *testing.T, liar bool, runs *atomic.Int64) *wag.Registry {
	reg := wag.NewRegistry()
	err := reg.Register("double", func(_ context.Context, call *wag.Call) (any, error) {
		if runs != nil {
			runs.Add(1)
		}
		x, _ := call.Input.(map[string]any)["x"].(int64)
		if liar {
			return 2*x + 1, nil
		}
		return 2 * x, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// verify: 2 runs each attempt on two distinct worker nodes. With only an
// honest node and a liar, the runs disagree; the tie-breaking run waits
// for a third node — visibly — and when one joins, the majority's (honest)
// output is the result and the liar is outvoted.
func TestVerifyOutvotesALiar(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		switch name {
		case "server":
			cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), core)).Named(name)
		default:
			cfg.Wag.Registry = doubler(t, name == "liar", nil)
		}
	}, "w1", "liar")
	m.waggler("")
	id := submitSpec(t, m.server.api, `
name: verified
version: 1
tasks:
  d:
    capability: work
    action: double
    verify: 2
    with: {x: 21}
outputs:
  doubled: ${{ tasks.d.output }}
`, `{}`)
	eventually(t, 30*time.Second, "the tie-breaking run waiting for a third node", func() bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			return false
		}
		for _, tk := range resp.GetInstance().GetTasks() {
			if strings.Contains(tk.GetProgress().GetMessage(), "distinct worker nodes") {
				return true
			}
		}
		return false
	})
	cfg := wagNodeConfig(t, "w2", false, []string{m.server.node.GossipAddr()}, map[string]int{"work": 2}, doubler(t, false, nil))
	startNodeWith(t, cfg)
	in := waitDone(t, m.server.api, id, 60*time.Second)
	wantOutputs(t, in, `{"doubled": 42}`)
	outvoted := logs.FilterMessage("a worker was outvoted on a verified attempt").All()
	if len(outvoted) != 1 || outvoted[0].ContextMap()["worker_subject"] != "liar" {
		t.Fatalf("outvoted: %v, want the liar once", outvoted)
	}
}

// verify applies to each iteration of a loop: every iteration's attempt
// runs on two worker nodes (under its own run ids, poll#1#r1 and #r2),
// and the loop goes on from the agreed output.
func TestVerifyEachIterationOfALoop(t *testing.T) {
	var runs atomic.Int64
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name != "server" {
			cfg.Wag.Registry = doubler(t, false, &runs)
		}
	}, "w1", "w2")
	m.waggler("")
	id := submitSpec(t, m.server.api, `
name: verified-loop
version: 1
tasks:
  d:
    capability: work
    action: double
    verify: 2
    with: {x: "${{ iteration + 20 }}"}
    loop: {until: '${{ output == 42 }}', max: 5}
outputs:
  doubled: ${{ tasks.d.output }}
`, `{}`)
	in := waitDone(t, m.server.api, id, 60*time.Second)
	wantOutputs(t, in, `{"doubled": [40, 42]}`)
	if n := runs.Load(); n != 4 {
		t.Fatalf("%d runs, want 4: two iterations on two nodes each", n)
	}
	if d := task(t, in, "d"); !d.GetLoop() || d.GetIterations() != 2 {
		t.Fatalf("d: %v", d)
	}
}

// An operator quarantines a worker node through any node (a worker-only
// node forwards it to the leader, which commits it through Raft): what it
// runs moves to the others and runs once more there, it gets nothing
// while quarantined, the list says who and why, and once released it
// works again. Each execution is recorded once.
func TestQuarantineMovesWorkOff(t *testing.T) {
	m := startWagMesh(t, "w1", "w2", "w3")
	holder := m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`)
	before := m.marks.waitRuns(t, "four runs", func(r []markRun) bool { return len(r) == 4 })
	victim := ""
	ran := 0
	for _, r := range before {
		if r.node != holder && (victim == "" || r.node == victim) {
			victim, ran = r.node, ran+1
		}
	}
	via := robonetv1.NewMeshServiceClient(m.workers[holder].conn) // not a server: it forwards
	resp, err := via.Quarantine(ctxFor(t, 30*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_ADD, Node: victim, Reason: "suspected of tampering"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetNodes()) != 1 || resp.GetNodes()[0].GetNode() != victim || !resp.GetNodes()[0].GetManual() ||
		resp.GetNodes()[0].GetReason() != "suspected of tampering" {
		t.Fatalf("after quarantining %s: %v", victim, resp.GetNodes())
	}
	runs := m.marks.waitRuns(t, "the victim's attempts to run again elsewhere", func(r []markRun) bool { return len(r) == 4+ran })
	for _, r := range runs[4:] {
		if r.node == victim {
			t.Fatalf("an attempt moved to the quarantined node: %+v", r)
		}
	}
	close(m.marks.release)
	wantState(t, waitDone(t, m.server.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(t, id, m.history(id), 4)

	// Quarantined: six more tasks run on the others only.
	id2 := submitSpec(t, m.server.api, markSpec, `{"n": 6}`)
	wantState(t, waitDone(t, m.server.api, id2, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	for _, r := range m.marks.snapshot()[4+ran:] {
		if r.node == victim {
			t.Fatalf("the quarantined node ran %s", r.exec)
		}
	}
	// Released: it gets work again.
	if _, err := via.Quarantine(ctxFor(t, 30*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE, Node: victim}); err != nil {
		t.Fatal(err)
	}
	list, err := m.server.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST})
	if err != nil || len(list.GetNodes()) != 0 {
		t.Fatalf("after release: %v %v", list.GetNodes(), err)
	}
	seen := len(m.marks.snapshot())
	id3 := submitSpec(t, m.server.api, markSpec, `{"n": 6}`) // six tasks for six slots: every node gets two
	wantState(t, waitDone(t, m.server.api, id3, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	if !slices.ContainsFunc(m.marks.snapshot()[seen:], func(r markRun) bool { return r.node == victim }) {
		t.Fatalf("after its release, %s ran nothing", victim)
	}
}

// on: every_node runs a task once on each node serving its capability:
// three worker nodes (started out of name order; the server serves none
// of it) each run it once — the output each run returns is the name of
// the node that ran it — and the output lists them by node name.
func TestEveryNodeRunsOncePerNode(t *testing.T) {
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name == "server" {
			return
		}
		reg := wag.NewRegistry()
		if err := reg.Register("whoami", func(context.Context, *wag.Call) (any, error) { return name, nil }); err != nil {
			t.Fatal(err)
		}
		cfg.Wag.Registry = reg
	}, "w2", "w3", "w1")
	m.waggler("")
	eventually(t, 30*time.Second, "three nodes serving work", func() bool {
		n := 0
		for _, mem := range m.server.node.Members() {
			if mem.Status == mesh.StatusAlive && mem.Capabilities["work"] > 0 {
				n++
			}
		}
		return n == 3
	})
	id := submitSpec(t, m.server.api, `
name: every
version: 1
tasks:
  inventory:
    capability: work
    action: whoami
    on: every_node
outputs:
  all: ${{ tasks.inventory.output }}
`, `{}`)
	in := waitDone(t, m.server.api, id, 60*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	wantOutputs(t, in, `{"all": [{"node": "w1", "output": "w1"}, {"node": "w2", "output": "w2"}, {"node": "w3", "output": "w3"}]}`)
	checkOncePerExecution(t, id, m.history(id), 3)
}

// A node that dies while it runs its run of an on: every_node task: that
// run fails ("node X left while running") and is not moved to another
// node; under on_failure: skip its output is null and the task completes
// with the other nodes' outputs.
func TestEveryNodeRunFailsWithItsNode(t *testing.T) {
	m := startWagMesh(t, "w1", "w2", "w3")
	holder := m.waggler("")
	eventually(t, 30*time.Second, "three nodes serving work", func() bool {
		n := 0
		for _, mem := range m.server.node.Members() {
			if mem.Status == mesh.StatusAlive && mem.Capabilities["work"] > 0 {
				n++
			}
		}
		return n == 3
	})
	id := submitSpec(t, m.server.api, `
name: every-dies
version: 1
tasks:
  inventory:
    capability: work
    action: mark
    on: every_node
    on_failure: skip
    retry: {max_attempts: 1}
outputs:
  all: '${{ tasks.inventory.output.map(r, r.output == null ? "" : r.output.node) }}'
`, `{}`)
	before := m.marks.waitRuns(t, "three runs", func(r []markRun) bool { return len(r) == 3 })
	victim := ""
	for _, r := range before {
		if r.node != holder && victim == "" {
			victim = r.node
		}
		if want := map[string]string{"w1": "inventory[0]", "w2": "inventory[1]", "w3": "inventory[2]"}[r.node]; r.exec != want {
			t.Fatalf("%s ran on %s", r.exec, r.node)
		}
	}
	m.workers[victim].halted = true
	m.workers[victim].node.Halt()
	index := int32(map[string]int{"w1": 0, "w2": 1, "w3": 2}[victim])
	var lost *robonetv1.TaskAttempt
	eventually(t, 30*time.Second, "the victim's run to fail", func() bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			return false
		}
		for _, a := range task(t, resp.GetInstance(), "inventory").GetAttempts() {
			if a.GetIndex() == index && !a.GetRunning() && !a.GetOk() {
				lost = a
				return true
			}
		}
		return false
	})
	if !strings.Contains(lost.GetError(), "node "+victim+" left while running") {
		t.Fatalf("the victim's run: %v", lost)
	}
	close(m.marks.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	want := []string{`"w1"`, `"w2"`, `"w3"`}
	want[map[string]int{"w1": 0, "w2": 1, "w3": 2}[victim]] = `""`
	wantOutputs(t, in, `{"all": [`+strings.Join(want, ", ")+`]}`)
	if runs := m.marks.snapshot(); len(runs) != 3 {
		t.Fatalf("%d runs, want 3 (none moved): %+v", len(runs), runs)
	}
	// The API shows it as a spread over the nodes (roboctl get: completed
	// 2/3 (1 failed), the nodes that ran it, a line for the failed run).
	inv := task(t, in, "inventory")
	if !inv.GetSpread() || inv.GetWidth() != 3 || inv.GetDone() != 2 || inv.GetFailed() != 1 {
		t.Fatalf("inventory: %v", inv)
	}
}
