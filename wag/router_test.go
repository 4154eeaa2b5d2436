package wag

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
)

// fakeDir is a Directory whose roles the test sets; every session it opens
// records what the Router sends on it.
type fakeDir struct {
	mu      sync.Mutex
	roles   map[string]Role
	changed chan struct{}
	links   map[string]*fakeLink
	opens   map[string]int
	owners  map[string][]Owner // who each session of a node was opened as
	// holdRoles, when set, makes the links' SetRoles wait for it to close.
	holdRoles chan struct{}
	// refuse, when set, is what the links answer every handoff of these
	// attempts.
	refuse map[port.AttemptKey]error
	quar   []string // quarantined nodes, sorted
}

func newFakeDir() *fakeDir {
	return &fakeDir{roles: map[string]Role{}, changed: make(chan struct{}), links: map[string]*fakeLink{}, opens: map[string]int{}}
}

func (d *fakeDir) set(capability, node string, epoch uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roles[capability] = Role{Node: node, Epoch: epoch}
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *fakeDir) Roles() map[string]Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.roles)
}

func (d *fakeDir) Quarantined() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.quar
}

func (d *fakeDir) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *fakeDir) Open(_ context.Context, node string, o Owner, up Uplink) (Link, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owners == nil {
		d.owners = map[string][]Owner{}
	}
	d.owners[node] = append(d.owners[node], o)
	l := &fakeLink{done: make(chan struct{}), hold: d.holdRoles, up: up, refuse: d.refuse}
	d.links[node] = l
	d.opens[node]++
	return l, nil
}

func (d *fakeDir) link(node string) *fakeLink {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.links[node]
}

type fakeLink struct {
	done       chan struct{} // closed when the "stream" ends
	endOnce    sync.Once
	hold       chan struct{} // SetRoles waits for it to close, if set
	up         Uplink        // the Router's side of the session
	refuse     map[port.AttemptKey]error
	mu         sync.Mutex
	handoffs   []Handoff
	dispatched []port.AttemptKey
	cancelled  []port.AttemptKey
	roleSets   []map[string]uint64 // every SetRoles, as it began
}

func (l *fakeLink) SetRoles(roles map[string]uint64, _ []string) error {
	l.mu.Lock()
	l.roleSets = append(l.roleSets, maps.Clone(roles))
	l.mu.Unlock()
	if l.hold != nil {
		<-l.hold
	}
	return nil
}

// lastRoles is the role set of the latest SetRoles, and how many there were.
func (l *fakeLink) lastRoles() (map[string]uint64, int) {
	if l == nil {
		return nil, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.roleSets) == 0 {
		return nil, 0
	}
	return l.roleSets[len(l.roleSets)-1], len(l.roleSets)
}
func (l *fakeLink) Dispatch(hs []Handoff) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := make([]error, len(hs))
	for i, h := range hs {
		l.dispatched = append(l.dispatched, h.AttemptKey)
		l.handoffs = append(l.handoffs, h)
		errs[i] = l.refuse[h.AttemptKey]
	}
	return errs
}
func (l *fakeLink) Cancel(keys []port.AttemptKey) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelled = append(l.cancelled, keys...)
	return nil
}
func (l *fakeLink) Ack(uint64) {}
func (l *fakeLink) Close()     { l.end() }

func (l *fakeLink) Done() <-chan struct{} { return l.done }
func (l *fakeLink) end()                  { l.endOnce.Do(func() { close(l.done) }) }

func (l *fakeLink) has(cancelled bool, key port.AttemptKey) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cancelled {
		return slices.Contains(l.cancelled, key)
	}
	return slices.Contains(l.dispatched, key)
}

// handoff returns the last handoff of key on the link, if any.
func (l *fakeLink) handoff(key port.AttemptKey) (Handoff, bool) {
	if l == nil {
		return Handoff{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.handoffs) - 1; i >= 0; i-- {
		if l.handoffs[i].AttemptKey == key {
			return l.handoffs[i], true
		}
	}
	return Handoff{}, false
}

// startRouter starts a Router of term 1 on dir, stopped when the test ends.
func startRouter(t *testing.T, dir *fakeDir) *Router {
	t.Helper()
	r, err := NewRouter(RouterConfig{Term: 1, Sink: newSink(), Directory: dir, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// routeOneToA starts a Router of term 1 whose directory gives code.exec to
// node a, and dispatches one attempt there.
func routeOneToA(t *testing.T) (*fakeDir, *Router, port.TaskDispatch) {
	t.Helper()
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	r := startRouter(t, dir)
	d := task("sleep", "1s")
	d.Term = 1
	r.Dispatch(t.Context(), []port.TaskDispatch{d})
	waitUntil(t, "the dispatch on a", func() bool { return dir.link("a").has(false, d.AttemptKey) })
	return dir, r, d
}

// A cancel reaches the Waggler that held the attempt, and — as the cancel
// may have reached only it, or no Waggler at all — every Waggler that takes
// the capability's role afterwards: a worker registering a copy of the
// attempt with the successor is then told to stop it.
func TestRouterTellsSuccessorsRecentCancels(t *testing.T) {
	dir, r, d := routeOneToA(t)
	if err := r.Cancel(t.Context(), 1, []port.AttemptKey{d.AttemptKey}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the cancel on a", func() bool { return dir.link("a").has(true, d.AttemptKey) })

	dir.set("code.exec", "b", 2) // a fails; b succeeds it
	waitUntil(t, "the cancel told to the successor b", func() bool { return dir.link("b").has(true, d.AttemptKey) })
	if dir.link("b").has(false, d.AttemptKey) {
		t.Fatal("the cancelled attempt was handed to the successor")
	}
	if got := testutil.ToFloat64(r.cfg.Metrics.Capability("code.exec").WagglerFailovers); got != 1 {
		t.Fatalf("Waggler failovers counted: %v, want 1 (a to b)", got)
	}
}

// A session whose stream ends is opened again at once, though the Router
// has nothing new to send that node (it may hold no role any more): the
// host sends its unacknowledged results only on a new session, and the
// attempts of the node are handed over again on it.
func TestRouterReopensAnEndedSession(t *testing.T) {
	dir, _, d := routeOneToA(t)
	first := dir.link("a")
	first.end()
	waitUntil(t, "a second session with a", func() bool { return dir.link("a") != first })
	waitUntil(t, "the attempt handed over again on it", func() bool { return dir.link("a").has(false, d.AttemptKey) })
	dir.mu.Lock()
	defer dir.mu.Unlock()
	if dir.opens["a"] != 2 {
		t.Fatalf("%d sessions opened with a, want 2", dir.opens["a"])
	}
}

// A role given to a node while the Router is telling it its previous set
// reaches it: the change is not cleared by the earlier call's success
// (regression: a node given two capabilities at once took only the first
// Waggler role, and the other capability's tasks never ran).
func TestRouterRoleChangeDuringSetRoles(t *testing.T) {
	dir := newFakeDir()
	hold := make(chan struct{})
	dir.holdRoles = hold
	dir.set("code.exec", "a", 1)
	r := startRouter(t, dir)
	waitUntil(t, "SetRoles on a", func() bool { _, n := dir.link("a").lastRoles(); return n == 1 })
	dir.set("core", "a", 1) // while the first SetRoles is on the wire
	waitUntil(t, "the Router to take the new roles", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.roles["core"]
		return ok
	})
	close(hold)
	waitUntil(t, "a told both roles", func() bool {
		roles, _ := dir.link("a").lastRoles()
		return maps.Equal(roles, map[string]uint64{"code.exec": 1, "core": 1})
	})
}

// When a capability's Waggler moves, the successor is told, for each
// attempt, what the Router knows of it: the worker that runs it when the
// predecessor said so; otherwise whether the predecessor held it, so that
// it may run on a worker no one named (MayRun). An attempt dispatched
// after the move, or one the predecessor always refused, was never taken
// by anyone: it may not run anywhere.
func TestRouterMarksHandoffsThatMayRun(t *testing.T) {
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	running, unsure, later, refused := task("sleep", "1s"), task("sleep", "1s"), task("sleep", "1s"), task("sleep", "1s")
	for _, d := range []*port.TaskDispatch{&running, &unsure, &later, &refused} {
		d.Term = 1
	}
	dir.refuse = map[port.AttemptKey]error{refused.AttemptKey: ErrBusy}
	r := startRouter(t, dir)
	r.Dispatch(t.Context(), []port.TaskDispatch{running, unsure, refused})
	waitUntil(t, "the attempts on a", func() bool {
		for _, d := range []port.TaskDispatch{running, unsure, refused} {
			if !dir.link("a").has(false, d.AttemptKey) {
				return false
			}
		}
		return true
	})
	// a's Waggler gave one of them to a worker of node w and said so.
	dir.link("a").up.Started([]Started{{Key: running.AttemptKey, Capability: "code.exec", Epoch: 1, WorkerID: "w/code.exec/0", Generation: 1<<32 | 1}})

	dir.set("code.exec", "b", 2) // a fails; b succeeds it
	waitUntil(t, "the Router to take the new role", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.roles["code.exec"].Node == "b"
	})
	r.Dispatch(t.Context(), []port.TaskDispatch{later})
	waitUntil(t, "the four attempts on b", func() bool {
		for _, d := range []port.TaskDispatch{running, unsure, later, refused} {
			if !dir.link("b").has(false, d.AttemptKey) {
				return false
			}
		}
		return true
	})
	for _, c := range []struct {
		name   string
		key    port.AttemptKey
		worker string
		mayRun bool
	}{
		{"the attempt whose worker a named", running.AttemptKey, "w/code.exec/0", false},
		{"the attempt a held without naming a worker", unsure.AttemptKey, "", true},
		{"the attempt dispatched after the move", later.AttemptKey, "", false},
		{"the attempt a refused (busy)", refused.AttemptKey, "", false},
	} {
		h, _ := dir.link("b").handoff(c.key)
		if h.WorkerID != c.worker || h.MayRun != c.mayRun || h.Epoch != 2 {
			t.Errorf("%s: handed to b as worker %q, may run %v, epoch %d; want worker %q, may run %v, epoch 2",
				c.name, h.WorkerID, h.MayRun, h.Epoch, c.worker, c.mayRun)
		}
	}
	if h, _ := dir.link("a").handoff(unsure.AttemptKey); h.MayRun {
		t.Error("the first handoff of an attempt says it may run already")
	}
}

// An attempt an earlier term had in flight (the engine resumed it) may run
// on a worker already: its first handoff says so, so that a Waggler that
// succeeded the one holding it waits for the workers to register.
func TestRouterHandsResumedAttemptsAsMayRun(t *testing.T) {
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	r := startRouter(t, dir)
	resumed, fresh := task("sleep", "1s"), task("sleep", "1s")
	resumed.Term, fresh.Term = 1, 1
	resumed.Resumed = true
	r.Dispatch(t.Context(), []port.TaskDispatch{resumed, fresh})
	waitUntil(t, "both attempts on a", func() bool {
		return dir.link("a").has(false, resumed.AttemptKey) && dir.link("a").has(false, fresh.AttemptKey)
	})
	if h, _ := dir.link("a").handoff(resumed.AttemptKey); !h.MayRun {
		t.Error("the resumed attempt was handed over as new")
	}
	if h, _ := dir.link("a").handoff(fresh.AttemptKey); h.MayRun {
		t.Error("a new attempt was handed over as one that may run")
	}
}

// A follower owner's Router hands attempts to the Wagglers but never sets
// the hosts' roles; promoted to the leader's (SetLeader), it opens its
// sessions again as the leader of the new term, sets the roles and hands
// over again what is in flight; demoted, it opens them again as a
// follower.
func TestRouterFollowerAndPromotion(t *testing.T) {
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	r, err := NewRouter(RouterConfig{Term: 2, Sink: newSink(), Directory: dir, Logger: zaptest.NewLogger(t),
		Follower: true, PartitionCount: 2, Partitions: map[int]uint64{1: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	d := task("echo", nil)
	d.Term = 2
	if errs := r.Dispatch(t.Context(), []port.TaskDispatch{d}); errs != nil {
		t.Fatal(errs)
	}
	handedOn := func(l *fakeLink) bool {
		if l == nil {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.Contains(l.dispatched, d.AttemptKey)
	}
	waitUntil(t, "the attempt handed to a", func() bool { return handedOn(dir.link("a")) })
	owners := func() []Owner {
		dir.mu.Lock()
		defer dir.mu.Unlock()
		return slices.Clone(dir.owners["a"])
	}
	if o := owners(); len(o) != 1 || !o[0].Follower || o[0].Term != 2 || o[0].Count != 2 || o[0].Partitions[1] != 3 {
		t.Fatalf("sessions opened as %+v, want one of a follower of term 2 owning partition 1 at epoch 3", o)
	}
	if _, n := dir.link("a").lastRoles(); n != 0 {
		t.Fatalf("a follower's Router set roles %d times", n)
	}

	first := dir.link("a")
	r.SetLeader(5)
	waitUntil(t, "a session opened again as the leader's", func() bool {
		l := dir.link("a")
		_, n := l.lastRoles()
		return l != first && n > 0 && handedOn(l)
	})
	if o := owners(); len(o) != 2 || o[1].Follower || o[1].Term != 5 {
		t.Fatalf("sessions opened as %+v, want the second one the leader's of term 5", o)
	}
	if roles, _ := dir.link("a").lastRoles(); roles["code.exec"] != 1 {
		t.Fatalf("roles set %v, want code.exec at epoch 1", roles)
	}

	r.SetLeader(0)
	waitUntil(t, "a session opened again as a follower's", func() bool {
		o := owners()
		return len(o) == 3 && o[2].Follower && o[2].Term == 2
	})
}
