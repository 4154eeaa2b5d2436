package wag

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/internal/clock/clocktest"
)

// TestHolders: per capability, the up member holding the role at the
// highest epoch, by gossip or by the control state; a holder that is not
// up never counts; equal epochs go to an advertisement over an
// assignment, then to the smaller name, whatever the order of members.
func TestHolders(t *testing.T) {
	members := []RoleMember{
		{Name: "self", Up: true, Roles: map[string]uint64{"d": 2}},
		{Name: "w1", Up: false, Roles: map[string]uint64{"a": 1, "b": 1}},
		{Name: "w2", Up: true, Roles: map[string]uint64{"c": 4, "tie": 6, "mixed": 3}},
		{Name: "w3", Up: true},
		{Name: "w4", Up: false},
		{Name: "w0", Up: true, Roles: map[string]uint64{"tie": 6}},
	}
	assigned := map[string]Role{
		"a":     {"w3", 2}, // the successor of the failed w1: gossip never told
		"b":     {"w4", 3}, // assigned to a node that left since: not up
		"c":     {"w3", 3}, // older than what w2 advertises
		"d":     {"w2", 1}, // older than self's own role
		"e":     {"w2", 1}, // only in the control state
		"mixed": {"self", 3},
	}
	want := map[string]Role{
		"a": {"w3", 2}, "c": {"w2", 4}, "d": {"self", 2}, "e": {"w2", 1},
		"tie":   {"w0", 6}, // two advertisements at epoch 6: the smaller name
		"mixed": {"w2", 3}, // advertised by w2, assigned to self at the same epoch: the advertisement
	}
	if got := Holders(members, assigned); !maps.Equal(got, want) {
		t.Fatalf("Holders:\n got %v\nwant %v", got, want)
	}
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	if got := Holders(reversed, assigned); !maps.Equal(got, want) {
		t.Fatalf("Holders with the members reversed:\n got %v\nwant %v", got, want)
	}
	wantGossip := map[string]Role{"c": {"w2", 4}, "d": {"self", 2}, "tie": {"w0", 6}, "mixed": {"w2", 3}}
	if got := Holders(members, nil); !maps.Equal(got, wantGossip) {
		t.Fatalf("Holders from gossip alone:\n got %v\nwant %v", got, wantGossip)
	}
}

// fakeRoleSource is a RoleSource the test drives.
type fakeRoleSource struct {
	mu       sync.Mutex
	members  []RoleMember
	assigned map[string]Role
	server   bool
	changed  chan struct{}

	reads   chan chan map[string]Role // a read asks the test for its answer
	adverts chan map[string]uint64
}

func newFakeRoleSource(server bool, members ...RoleMember) *fakeRoleSource {
	return &fakeRoleSource{
		members: members, server: server, changed: make(chan struct{}),
		reads: make(chan chan map[string]Role), adverts: make(chan map[string]uint64, 16),
	}
}

// update changes the source under its lock and signals the change.
func (s *fakeRoleSource) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeRoleSource) Members() []RoleMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

func (s *fakeRoleSource) Assigned() (map[string]Role, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.server {
		return nil, false
	}
	return maps.Clone(s.assigned), true
}

func (s *fakeRoleSource) ReadAssigned(ctx context.Context) (map[string]Role, error) {
	answer := make(chan map[string]Role, 1)
	select {
	case s.reads <- answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case roles := <-answer:
		if roles == nil {
			return nil, errors.New("no server answered")
		}
		return roles, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *fakeRoleSource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *fakeRoleSource) Advertise(roles map[string]uint64) error {
	s.adverts <- roles
	return nil
}

// fakeRoleHost is a Waggler host whose roles the test sets.
type fakeRoleHost struct {
	self     string
	mu       sync.Mutex
	roles    map[string]uint64
	watchers []func()
}

func (h *fakeRoleHost) Roles() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.roles)
}

func (h *fakeRoleHost) OnRoles(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers = append(h.watchers, f)
}

func (h *fakeRoleHost) Target(capability string, epoch uint64) (TargetSource, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.roles[capability]; !ok || e != epoch {
		return TargetSource{}, false
	}
	return TargetSource{Key: TargetKey(h.self, capability, epoch)}, true
}

// take has the host run capability at epoch, as a leader's SetRoles does.
func (h *fakeRoleHost) take(capability string, epoch uint64) {
	h.mu.Lock()
	if h.roles == nil {
		h.roles = map[string]uint64{}
	}
	h.roles[capability] = epoch
	watchers := slices.Clone(h.watchers)
	h.mu.Unlock()
	for _, f := range watchers {
		f()
	}
}

// fakeRolePools are pools that report every Attach.
type fakeRolePools struct {
	mu       sync.Mutex
	caps     map[string]int
	attached map[string]string
	attaches chan string // capability + " → " + key
}

func newFakeRolePools(caps ...string) *fakeRolePools {
	p := &fakeRolePools{caps: map[string]int{}, attached: map[string]string{}, attaches: make(chan string, 16)}
	for _, c := range caps {
		p.caps[c] = 1
	}
	return p
}

func (p *fakeRolePools) Capabilities() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.caps)
}

func (p *fakeRolePools) AttachedTo(capability string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attached[capability]
}

func (p *fakeRolePools) Attach(capability string, src TargetSource) {
	p.mu.Lock()
	p.attached[capability] = src.Key
	p.mu.Unlock()
	p.attaches <- capability + " → " + src.Key
}

// remoteTargets is a RoleFollowerConfig.Remote that reaches every node.
func remoteTargets(_ context.Context, node, capability string, epoch uint64) (TargetSource, error) {
	return TargetSource{Key: TargetKey(node, capability, epoch)}, nil
}

// runFollower runs a follower until the test ends.
func runFollower(t *testing.T, cfg RoleFollowerConfig) *RoleFollower {
	t.Helper()
	cfg.Logger = zaptest.NewLogger(t)
	if cfg.Remote == nil {
		cfg.Remote = remoteTargets
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	f, err := NewRoleFollower(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

func expectAttach(t *testing.T, p *fakeRolePools, want string) {
	t.Helper()
	if got := recv(t, p.attaches, "an attach: "+want); got != want {
		t.Fatalf("attach: got %q, want %q", got, want)
	}
}

// TestRoleFollowerFollowsMoves: on a server, the pools follow the role of
// their capability as the control state moves it from node to node, to
// this node once its host runs it (which it advertises), and to a newer
// epoch advertised in gossip before the control state shows it.
func TestRoleFollowerFollowsMoves(t *testing.T) {
	src := newFakeRoleSource(true,
		RoleMember{Name: "self", Up: true, Roles: map[string]uint64{"c": 9}}, // stale gossip: the host's own roles count
		RoleMember{Name: "n1", Up: true}, RoleMember{Name: "n2", Up: true})
	src.assigned = map[string]Role{"c": {"n1", 1}}
	host := &fakeRoleHost{self: "self"}
	pools := newFakeRolePools("c")
	runFollower(t, RoleFollowerConfig{Self: "self", Source: src, Host: host, Pools: pools, Clock: clocktest.New()})

	if got := recv(t, src.adverts, "the first advertisement"); len(got) != 0 {
		t.Fatalf("advertised %v, want no roles", got)
	}
	expectAttach(t, pools, "c → n1/c@1")

	src.update(func() { src.assigned["c"] = Role{"n2", 2} })
	expectAttach(t, pools, "c → n2/c@2")

	// n2 fails; the role comes here, which the host does not run yet.
	src.update(func() {
		src.members[2].Up = false
		src.assigned["c"] = Role{"self", 3}
	})
	host.take("c", 3)
	if got := recv(t, src.adverts, "the advertisement of c"); !maps.Equal(got, map[string]uint64{"c": 3}) {
		t.Fatalf("advertised %v, want c@3", got)
	}
	expectAttach(t, pools, "c → self/c@3")

	// n1 advertises a newer epoch than the control state shows yet.
	src.update(func() { src.members[1].Roles = map[string]uint64{"c": 4} })
	expectAttach(t, pools, "c → n1/c@4")
}

// TestRoleFollowerReadsControl: a worker-only node reads the roles from a
// server every Interval while a pool is in doubt, and follows them.
func TestRoleFollowerReadsControl(t *testing.T) {
	src := newFakeRoleSource(false,
		RoleMember{Name: "self", Up: true}, RoleMember{Name: "n1", Up: true}, RoleMember{Name: "n2", Up: true})
	pools := newFakeRolePools("c")
	clk := clocktest.New()
	runFollower(t, RoleFollowerConfig{Self: "self", Source: src, Host: &fakeRoleHost{self: "self"}, Pools: pools, Clock: clk})

	clk.AdvanceToTimer(t, time.Second)
	recv(t, src.reads, "a read (no Waggler yet)") <- map[string]Role{"c": {"n1", 1}}
	expectAttach(t, pools, "c → n1/c@1")

	// n1 fails: in doubt, the next Interval reads again.
	src.update(func() { src.members[1].Up = false })
	clk.AdvanceToTimer(t, time.Second)
	recv(t, src.reads, "a read (the Waggler's node failed)") <- map[string]Role{"c": {"n2", 2}}
	expectAttach(t, pools, "c → n2/c@2")
}

// TestRoleFollowerReadCadence: a worker-only node reads every Interval
// while in doubt, every refreshTicks Intervals otherwise, never while a
// read runs; a server never reads.
func TestRoleFollowerReadCadence(t *testing.T) {
	src := newFakeRoleSource(false, RoleMember{Name: "n1", Up: true})
	f, err := NewRoleFollower(RoleFollowerConfig{
		Self: "self", Source: src, Host: &fakeRoleHost{}, Pools: newFakeRolePools("c"), Remote: remoteTargets, Interval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	due := func() []bool {
		var out []bool
		for range 2 * refreshTicks {
			out = append(out, f.readDue())
		}
		return out
	}
	every := slices.Repeat([]bool{true}, 2*refreshTicks)
	if got := due(); !slices.Equal(got, every) {
		t.Fatalf("in doubt (no Waggler): %v, want a read every Interval", got)
	}
	f.following["c"] = Role{"n1", 1}
	var want []bool
	for i := range 2 * refreshTicks {
		want = append(want, (i+1)%refreshTicks == 0)
	}
	if got := due(); !slices.Equal(got, want) {
		t.Fatalf("following an up Waggler: %v, want %v", got, want)
	}
	f.fetching = true
	if got := due(); slices.Contains(got, true) {
		t.Fatalf("while a read runs: %v, want none", got)
	}
	f.fetching = false
	src.server = true
	delete(f.following, "c")
	if got := due(); slices.Contains(got, true) {
		t.Fatalf("on a server: %v, want none", got)
	}
}
