package node

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// fakeMesh is a mesh whose leadership the test sets. Its subscriptions
// coalesce like the real one's: a subscriber always ends on the latest
// value.
type fakeMesh struct {
	mu      sync.Mutex
	cur     mesh.Leadership
	subs    map[chan mesh.Leadership]struct{}
	members []mesh.Member
	// barrier, when set, is what Barrier does.
	barrier func(ctx context.Context) error
}

var _ meshNode = (*fakeMesh)(nil)

func newFakeMesh() *fakeMesh { return &fakeMesh{subs: map[chan mesh.Leadership]struct{}{}} }

func (f *fakeMesh) Start(context.Context) error    { return nil }
func (f *fakeMesh) Stop(context.Context) error     { return nil }
func (f *fakeMesh) Halt() error                    { return nil }
func (f *fakeMesh) GossipAddr() string             { return "127.0.0.1:1" }
func (f *fakeMesh) UpdateMeta(mesh.NodeMeta) error { return nil }
func (f *fakeMesh) State() mesh.ControlState       { return mesh.ControlState{} }
func (f *fakeMesh) StateChanged() <-chan struct{}  { return nil }
func (f *fakeMesh) GossipKeys() [][]byte           { return nil }
func (f *fakeMesh) CheckPartitions() error         { return nil }
func (f *fakeMesh) Apply(context.Context, mesh.Command) error {
	return mesh.ErrNotLeader
}
func (f *fakeMesh) ChangeKeyring(mesh.KeyringOp, []byte) error {
	return mesh.ErrNotEncrypted
}
func (f *fakeMesh) Subscribe() (<-chan mesh.Event, func()) {
	ch := make(chan mesh.Event)
	return ch, func() {}
}

func (f *fakeMesh) Members() []mesh.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members
}

func (f *fakeMesh) Leader() mesh.Leadership {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

func (f *fakeMesh) Barrier(ctx context.Context) error {
	f.mu.Lock()
	b := f.barrier
	f.mu.Unlock()
	if b != nil {
		return b(ctx)
	}
	return nil
}

func (f *fakeMesh) Leadership() (<-chan mesh.Leadership, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan mesh.Leadership, 1)
	ch <- f.cur
	f.subs[ch] = struct{}{}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, ch)
	}
}

func (f *fakeMesh) setBarrier(b func(ctx context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.barrier = b
}

// set publishes a leadership value, replacing any value not read yet.
func (f *fakeMesh) set(l mesh.Leadership) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = l
	for ch := range f.subs {
		select {
		case <-ch:
		default:
		}
		ch <- l
	}
}

type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, []port.TaskDispatch) []error   { return nil }
func (nopDispatcher) Cancel(context.Context, uint64, []port.AttemptKey) error { return nil }
func (nopDispatcher) Nodes(string) []string                                   { return nil }

// loopHarness runs a leader loop over a fake mesh and records what it
// publishes.
type loopHarness struct {
	mesh      *fakeMesh
	published chan *engine.Engine
	stop      func() *engine.Engine
}

func startLoop(t *testing.T) *loopHarness {
	t.Helper()
	return startLoopWanting(t, nil)
}

// startLoopWanting runs a leader loop whose ownership comes from want
// (nil: the leader owns every instance).
func startLoopWanting(t *testing.T, want func(mesh.Leadership, time.Time) (ownership, bool)) *loopHarness {
	t.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := &loopHarness{mesh: newFakeMesh(), published: make(chan *engine.Engine, 16)}
	l := &ownerLoop{
		mesh: h.mesh,
		log:  zaptest.NewLogger(t),
		newEngine: func(o ownership) (*termEngine, error) {
			e, err := engine.New(engine.Config{Store: store, Dispatcher: nopDispatcher{}, Term: o.term, Shards: 1,
				PartitionCount: o.parts.count, Partitions: o.parts.epochs, Follower: !o.leader, Owner: engineOwner("a")})
			return &termEngine{Engine: e}, err
		},
		want:    want,
		publish: func(e *engine.Engine) { h.published <- e },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *engine.Engine, 1)
	go func() { done <- engineOf(l.run(ctx)) }()
	var once sync.Once
	var last *engine.Engine
	h.stop = func() *engine.Engine {
		once.Do(func() {
			cancel()
			last = <-done
			if last != nil {
				last.Abandon()
			}
		})
		return last
	}
	t.Cleanup(func() { h.stop() })
	return h
}

// next waits for the next publication.
func (h *loopHarness) next(t *testing.T) *engine.Engine {
	t.Helper()
	select {
	case e := <-h.published:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the leader loop published nothing within 10s")
		return nil
	}
}

// none checks that nothing was published that the test has not read.
func (h *loopHarness) none(t *testing.T) {
	t.Helper()
	select {
	case e := <-h.published:
		t.Fatalf("unexpected publication %v", e)
	default:
	}
}

// TestLeaderLoopFollowsTerms: an engine per term, the old one abandoned
// (and unpublished) before the next starts, nothing while following.
func TestLeaderLoopFollowsTerms(t *testing.T) {
	h := startLoop(t)

	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 3, Leader: "a"})
	e3 := h.next(t)
	if e3 == nil || e3.Term() != 3 {
		t.Fatalf("published %v, want the engine of term 3", e3)
	}

	// A new term while still leading: abandon, then a new engine.
	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 5, Leader: "a"})
	if e := h.next(t); e != nil {
		t.Fatalf("published %v, want nil (the term-3 engine abandoned first)", e)
	}
	e5 := h.next(t)
	if e5 == nil || e5.Term() != 5 {
		t.Fatalf("published %v, want the engine of term 5", e5)
	}
	if err := e3.Start(context.Background()); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("the term-3 engine was not stopped: Start = %v", err)
	}

	// Lost: abandoned at once.
	h.mesh.set(mesh.Leadership{IsLeader: false, Term: 6, Leader: "b", LeaderGRPC: "127.0.0.1:2"})
	if e := h.next(t); e != nil {
		t.Fatalf("published %v, want nil", e)
	}
	if err := e5.Start(context.Background()); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("the term-5 engine was not stopped: Start = %v", err)
	}
	if last := h.stop(); last != nil {
		t.Errorf("the loop left engine %v running while following", last)
	}
	h.none(t)
}

// TestLeaderLoopBarrier: the engine starts only after the Barrier; a
// failed Barrier is retried while the node leads; leadership lost during
// the Barrier starts nothing.
func TestLeaderLoopBarrier(t *testing.T) {
	h := startLoop(t)
	calls := make(chan struct{}, 16)
	release := make(chan error)
	h.mesh.setBarrier(func(ctx context.Context) error {
		calls <- struct{}{}
		select {
		case err := <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 2, Leader: "a"})
	<-calls
	h.none(t) // nothing before the barrier returns
	release <- errors.New("barrier timed out")
	<-calls // retried
	release <- nil
	if e := h.next(t); e == nil || e.Term() != 2 {
		t.Fatalf("published %v, want the engine of term 2", e)
	}

	// Leadership moves while a barrier waits: the barrier fails, nothing
	// starts for the old term.
	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 4, Leader: "a"})
	if e := h.next(t); e != nil {
		t.Fatalf("published %v, want nil", e)
	}
	<-calls
	h.mesh.set(mesh.Leadership{IsLeader: false, Term: 5, Leader: "b"})
	release <- errors.New("leadership lost")
	if last := h.stop(); last != nil {
		t.Errorf("an engine runs after leadership moved during its barrier: term %d", last.Term())
	}
	h.none(t)
}

// TestRouterRedirectsForwardedCalls: a forwarded call that reaches a node
// which does not lead is answered with a NotLeaderError naming the leader
// it knows, never forwarded a second time; without any leader a call
// fails with ErrNoLeader once the forwarding window ends.
func TestRouterRedirectsForwardedCalls(t *testing.T) {
	fm := newFakeMesh()
	fm.set(mesh.Leadership{Leader: "s2", LeaderGRPC: "127.0.0.1:1", Term: 4})
	r := &forwarder{self: "s1", mesh: fm, log: zaptest.NewLogger(t), limits: apiLimits{maxSpecBytes: 1 << 20, maxInputBytes: 1 << 20}, timeout: 200 * time.Millisecond,
		active: func() *engine.Engine { return nil }, conns: newConnCache(1<<20, nil)}
	defer func() { _ = r.conns.close() }()

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedHeader, "s3"))
	_, err := r.CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: "x"})
	var nl *mesh.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != "s2" || nl.LeaderGRPC != "127.0.0.1:1" {
		t.Fatalf("forwarded call on a follower: %v, want a NotLeaderError naming s2", err)
	}

	fm.set(mesh.Leadership{})
	began := time.Now()
	_, err = r.CancelInstance(context.Background(), &robonetv1.CancelInstanceRequest{InstanceId: "x"})
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("no leader: %v, want ErrNoLeader", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("took %s with a 200ms window", took)
	}
}

// TestOwnerLoopKeepsTheEngineAcrossLeadership: an engine lives as long as
// its partitions stay; the Raft leadership moving only gives it the
// leader's part (schedules, sweeps) or takes it away, and a follower that
// has known no leader for longer than the owner lease stops it.
func TestOwnerLoopKeepsTheEngineAcrossLeadership(t *testing.T) {
	var (
		mu    sync.Mutex
		parts = map[int]uint64{1: 5, 3: 5}
		lost  bool // the owner lease lapsed
	)
	h := startLoopWanting(t, func(l mesh.Leadership, _ time.Time) (ownership, bool) {
		mu.Lock()
		defer mu.Unlock()
		if l.Term == 0 || lost {
			return ownership{}, false
		}
		return ownership{term: l.Term, leader: l.IsLeader, parts: partitionSet{count: 4, epochs: maps.Clone(parts)}}, true
	})

	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 3, Leader: "a"})
	e := h.next(t)
	if e == nil || e.Follower() {
		t.Fatalf("published %v, want the leader's engine", e)
	}
	h.mesh.set(mesh.Leadership{Term: 4, Leader: "b", LeaderGRPC: "127.0.0.1:2"})
	waitFor(t, "the engine to follow", func() bool { return e.Follower() })
	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 6, Leader: "a"})
	waitFor(t, "the engine to lead again", func() bool { return !e.Follower() })
	h.none(t) // the same engine all along

	mu.Lock()
	parts = map[int]uint64{1: 5, 3: 5, 2: 7} // a partition gained: a new engine life
	mu.Unlock()
	h.mesh.set(mesh.Leadership{IsLeader: true, Term: 6, Leader: "a"})
	if got := h.next(t); got != nil {
		t.Fatalf("published %v, want nil (the engine abandoned first)", got)
	}
	e2 := h.next(t)
	if e2 == nil || e2 == e || len(e2.PartitionStats()) != 3 {
		t.Fatalf("published %v, want a new engine of three partitions", e2)
	}
	if err := e.Start(context.Background()); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("the first engine was not stopped: Start = %v", err)
	}

	mu.Lock()
	lost = true
	mu.Unlock()
	h.mesh.set(mesh.Leadership{Term: 7})
	if got := h.next(t); got != nil {
		t.Fatalf("published %v, want nil once nothing is owned", got)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
