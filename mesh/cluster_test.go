package mesh_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/mesh/meshtest"
)

const wait = meshtest.DefaultTimeout

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// voters returns the sorted voter names of m's Raft configuration.
func voters(m *mesh.Mesh) []string {
	var out []string
	for _, s := range m.RaftConfiguration() {
		if s.Voter {
			out = append(out, s.Name)
		}
	}
	return out
}

func inConfig(m *mesh.Mesh, name string) (in, voter bool) {
	for _, s := range m.RaftConfiguration() {
		if s.Name == name {
			return true, s.Voter
		}
	}
	return false, false
}

// mustApply applies cmd through the cluster's current leader. A retry
// after an unknown outcome may find an assignment already applied
// (ErrStaleEpoch); that counts as applied when the state shows it.
func mustApply(t *testing.T, c *meshtest.TestCluster, cmd mesh.Command, check func(mesh.ControlState) bool) {
	t.Helper()
	err := c.Apply(ctxT(t), cmd)
	if err == nil || (errors.Is(err, mesh.ErrStaleEpoch) && check != nil && check(c.Leader().State())) {
		return
	}
	t.Fatalf("applying command %d: %v", cmd.Type(), err)
}

// currentLeader returns the mesh all running servers agree leads, or nil.
func currentLeader(c *meshtest.TestCluster) *mesh.Mesh {
	name, _ := c.LeaderAmong(c.Running(true))
	if name == "" {
		return nil
	}
	return c.Node(name).Mesh
}

// awaitLeadership reads ch until a value satisfies cond, failing the test
// after the standard wait.
func awaitLeadership(t *testing.T, ch <-chan mesh.Leadership, what string, cond func(mesh.Leadership) bool) mesh.Leadership {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("leadership channel closed waiting for %s", what)
			}
			if cond(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestElectLeader(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := meshtest.NewTestCluster(t, 3, 2)
	leader, term := c.WaitForLeader(wait)
	t.Logf("leader %s in term %d after %v", leader, term, time.Since(start))
	c.WaitForMembers(wait)

	lm := c.Mesh(leader)
	if got := voters(lm); !reflect.DeepEqual(got, []string{"s0", "s1", "s2"}) {
		t.Fatalf("voters %v", got)
	}
	// Workers follow the leadership through gossip. (On a busy machine
	// the leadership may move meanwhile: they follow the current one.)
	for _, w := range []string{"w0", "w1"} {
		meshtest.Eventually(t, wait, w+" to see the leader", func() bool {
			leader, term = c.LeaderAmong(c.Running(true))
			l := c.Mesh(w).Leader()
			return leader != "" && l.Leader == leader && l.Term == term && !l.IsLeader && l.LeaderGRPC == "127.0.0.1:0"
		})
	}
	// Members: sorted, roles and Raft fields filled for servers.
	meshtest.Eventually(t, wait, "members with leader and voters", func() bool {
		if leader, _ = c.LeaderAmong(c.Running(true)); leader == "" {
			return false
		}
		ms := c.Mesh("s1").Members()
		if len(ms) != 5 || !slices.IsSortedFunc(ms, func(a, b mesh.Member) int { return compare(a.Name, b.Name) }) {
			return false
		}
		for _, m := range ms {
			server := m.HasRole(mesh.RoleServer)
			if m.Leader != (m.Name == leader) || m.Voter != server || m.Status != mesh.StatusAlive ||
				(server && m.RaftAddr == "") || m.GossipAddr == "" {
				return false
			}
		}
		return true
	})
	// Followers redirect with the leader's name and address.
	follower := "s0"
	if leader == follower {
		follower = "s1"
	}
	for _, name := range []string{follower, "w0"} {
		err := c.Mesh(name).Apply(ctxT(t), mesh.SetSetting("k", "v"))
		var nle *mesh.NotLeaderError
		if !errors.As(err, &nle) || !errors.Is(err, mesh.ErrNotLeader) || nle.Leader != leader || nle.LeaderGRPC != "127.0.0.1:0" {
			t.Fatalf("Apply on %s: %v, want a NotLeaderError naming %s", name, err, leader)
		}
		if err := c.Mesh(name).Barrier(ctxT(t)); !errors.Is(err, mesh.ErrNotLeader) {
			t.Fatalf("Barrier on %s: %v", name, err)
		}
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestKillLeaderFailover(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 1)
	leader, term := c.WaitForLeader(wait)

	// A follower's leadership subscription ends on the new leader.
	follower := "s0"
	if leader == follower {
		follower = "s1"
	}
	sub, cancel := c.Mesh(follower).Leadership()
	defer cancel()
	if first := <-sub; first.Leader != leader {
		t.Fatalf("first value %+v, want the current leader %s", first, leader)
	}

	killed := time.Now()
	c.Kill(leader)
	newLeader, newTerm := c.WaitForLeader(5 * time.Second)
	took := time.Since(killed)
	t.Logf("failover from %s (term %d) to %s (term %d) in %v", leader, term, newLeader, newTerm, took)
	if newLeader == leader || newTerm <= term {
		t.Fatalf("new leader %s term %d after %s term %d", newLeader, newTerm, leader, term)
	}
	awaitLeadership(t, sub, "the follower to see a new leader", func(l mesh.Leadership) bool {
		if l.IsLeader && l.Term <= term {
			t.Fatalf("follower reports itself leader in old term: %+v", l)
		}
		return l.Leader != "" && l.Leader != leader && l.Term > term
	})
	// Workers follow too.
	meshtest.Eventually(t, wait, "the worker to see the new leader", func() bool {
		return c.Mesh("w0").Leader().Leader == newLeader
	})
	// The new leader works.
	mustApply(t, c, mesh.SetSetting("after", "failover"), nil)
}

func TestMembershipEvents(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 1, 0)
	events, cancel := c.Mesh("s0").Subscribe()
	defer cancel()
	expect := func(kind mesh.EventKind, name string) mesh.Event {
		t.Helper()
		timeout := time.After(wait)
		for {
			select {
			case e := <-events:
				if e.Kind == kind && e.Member.Name == name {
					return e
				}
			case <-timeout:
				t.Fatalf("no %s event for %s", kind, name)
			}
		}
	}
	c.AddWorker("w-leaves")
	e := expect(mesh.EventJoin, "w-leaves")
	if e.Member.Status != mesh.StatusAlive || !e.Member.HasRole(mesh.RoleWorker) || e.Member.Capabilities["test.echo"] != 2 || e.At.IsZero() {
		t.Fatalf("join event %+v", e)
	}
	c.Stop("w-leaves")
	if e := expect(mesh.EventLeave, "w-leaves"); e.Member.Status != mesh.StatusLeft {
		t.Fatalf("leave event %+v", e)
	}

	c.AddWorker("w-dies")
	expect(mesh.EventJoin, "w-dies")
	c.Kill("w-dies")
	if e := expect(mesh.EventFailed, "w-dies"); e.Member.Status != mesh.StatusFailed {
		t.Fatalf("failed event %+v", e)
	}
	// A killed node that comes back joins again.
	c.Restart("w-dies")
	expect(mesh.EventJoin, "w-dies")

	// Members keeps left and failed nodes with their status.
	c.Kill("w-dies")
	expect(mesh.EventFailed, "w-dies")
	status := map[string]mesh.MemberStatus{}
	for _, m := range c.Mesh("s0").Members() {
		status[m.Name] = m.Status
	}
	want := map[string]mesh.MemberStatus{"s0": mesh.StatusAlive, "w-leaves": mesh.StatusLeft, "w-dies": mesh.StatusFailed}
	if !reflect.DeepEqual(status, want) {
		t.Fatalf("members %v, want %v", status, want)
	}
}

func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 0, 1, meshtest.WithConfig(func(cfg *mesh.Config) { cfg.EventBuffer = 1 }))
	slow, cancelSlow := c.Mesh("w0").Subscribe() // never read until the end
	defer cancelSlow()
	for i := range 4 {
		c.AddWorker("x" + strconv.Itoa(i))
	}
	c.WaitForMembers(wait) // gossip went on
	meshtest.Eventually(t, wait, "the newest event to be buffered", func() bool {
		select {
		case e := <-slow:
			return e.Member.Name == "x3" && e.Kind == mesh.EventJoin
		default:
			return false
		}
	})
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestJoinRetry(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	log := meshtest.Logger(t, zapcore.DebugLevel)

	early := mesh.TestConfig("early")
	early.Join = []string{target}
	early.Logger = log
	em, err := mesh.New(early)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- em.Start(ctxT(t)) }()
	defer em.Halt()

	late := mesh.TestConfig("late")
	late.BindPort = port
	late.Logger = log
	lm, err := mesh.New(late)
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer lm.Halt()
	if err := <-started; err != nil {
		t.Fatalf("early node: %v", err)
	}
	meshtest.Eventually(t, wait, "the late node to see the early one", func() bool {
		return len(lm.Members()) == 2
	})

	// Nobody there: Start gives up after JoinTimeout with ErrJoin.
	lonely := mesh.TestConfig("lonely")
	lonely.Join = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}
	lonely.JoinTimeout = 300 * time.Millisecond
	lonely.Logger = log
	m, err := mesh.New(lonely)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctxT(t)); !errors.Is(err, mesh.ErrJoin) {
		t.Fatalf("Start with nobody to join: %v, want ErrJoin", err)
	}
	if err := m.Stop(ctxT(t)); err != nil {
		t.Fatalf("Stop after a failed Start: %v", err)
	}
}

func TestMetadataUpdate(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 1, 1)
	events, cancel := c.Mesh("s0").Subscribe()
	defer cancel()
	w := c.Mesh("w0")
	meta := mesh.NodeMeta{
		Name: "ignored", Roles: []mesh.Role{mesh.RoleWorker}, GRPCAddr: "127.0.0.1:9999",
		Capabilities: map[string]int{"ai.inference": 4, "code.exec": 8}, Version: "v2", TrustAnchor: bytes.Repeat([]byte{9}, 44),
	}
	if err := w.UpdateMeta(meta); err != nil {
		t.Fatal(err)
	}
	meta.Name = "w0"
	deadline := time.After(wait)
	for done := false; !done; {
		select {
		case e := <-events:
			done = e.Kind == mesh.EventUpdate && e.Member.Name == "w0" && reflect.DeepEqual(e.Member.NodeMeta, meta)
		case <-deadline:
			t.Fatal("no update event with the new metadata")
		}
	}
	// The leader registers the published hash-chain anchor in the control
	// state.
	meshtest.Eventually(t, wait, "w0's anchor in the control state", func() bool {
		return bytes.Equal(c.Mesh("s0").State().Anchors["w0"], meta.TrustAnchor)
	})
	// A server keeps its Raft address and server role whatever it is given.
	s := c.Mesh("s0")
	raftAddr := s.RaftAddr()
	if err := s.UpdateMeta(mesh.NodeMeta{GRPCAddr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "w0 to see s0's new metadata", func() bool {
		for _, m := range w.Members() {
			if m.Name == "s0" {
				return m.GRPCAddr == "127.0.0.1:1" && m.RaftAddr == raftAddr && m.HasRole(mesh.RoleServer)
			}
		}
		return false
	})

	caps := map[string]int{}
	for i := range 60 {
		caps["capability."+strconv.Itoa(i)] = i
	}
	if err := w.UpdateMeta(mesh.NodeMeta{Capabilities: caps}); !errors.Is(err, mesh.ErrMetaTooLarge) {
		t.Fatalf("oversized metadata: %v", err)
	}
}

func TestBootstrapExpect(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 2, 0, meshtest.WithBootstrapExpect(3), meshtest.WithoutLeaderWait())
	c.WaitForMembers(wait)
	// Two servers that see each other wait for the third: no configuration,
	// no leader, for several election timeouts.
	observe := time.NewTimer(time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-observe.C:
			done = true
		case <-tick.C:
			for _, name := range []string{"s0", "s1"} {
				m := c.Mesh(name)
				if l := m.Leader(); l.Leader != "" || len(m.RaftConfiguration()) > 0 {
					t.Fatalf("%s bootstrapped with 2 of 3 servers: %+v %+v", name, l, m.RaftConfiguration())
				}
			}
		}
	}
	tick.Stop()

	c.AddServer("s2")
	_, term := c.WaitForLeader(wait)
	want := []string{"s0", "s1", "s2"}
	for _, name := range want {
		meshtest.Eventually(t, wait, name+" to hold the bootstrap configuration", func() bool {
			return reflect.DeepEqual(voters(c.Mesh(name)), want)
		})
	}

	// Never twice: a fresh server with the lowest name and the same
	// expectation joins the existing cluster instead of bootstrapping its own.
	c.AddServer("a0")
	meshtest.Eventually(t, wait, "a0 to be added to the existing cluster", func() bool {
		lm := currentLeader(c) // agreed by a0 too
		if lm == nil {
			return false
		}
		in, _ := inConfig(lm, "a0")
		return in
	})
	// And a restarted server (same data dir) rejoins without bootstrapping.
	c.Kill("s1")
	c.Restart("s1")
	meshtest.Eventually(t, wait, "s1 to follow the leader again", func() bool {
		l := c.Mesh("s1").Leader()
		return l.Leader != "" && l.Term >= term
	})
	meshtest.Eventually(t, wait, "all four servers in one configuration", func() bool {
		if currentLeader(c) == nil {
			return false
		}
		for _, name := range c.Running(true) {
			if got := c.Mesh(name).RaftConfiguration(); len(got) != 4 {
				return false
			}
		}
		return true
	})
}

// TestLeavingServerKeepsTheQuorum: of two servers, the follower stops
// gracefully, and the other keeps leading, alone, able to commit. The
// follower waits for the leader to take it out of the configuration before
// it goes, so the removal commits with its vote; before it waited, the
// removal usually won that race too, so this guards the outcome, and the
// planner's table (a leaving server removed while alive) the order.
func TestLeavingServerKeepsTheQuorum(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 2, 0)
	leader, _ := c.WaitForLeader(wait)
	meshtest.Eventually(t, wait, "both servers voters", func() bool {
		lm := currentLeader(c)
		return lm != nil && len(voters(lm)) == 2
	})
	follower := "s0"
	if follower == leader {
		follower = "s1"
	}
	c.Stop(follower)
	meshtest.Eventually(t, wait, follower+" out of the configuration", func() bool {
		in, _ := inConfig(c.Mesh(leader), follower)
		return !in
	})
	// A write needs a quorum: with the follower still a voter it could
	// not commit, and the leader would step down.
	if err := c.Apply(ctxT(t), mesh.SetSetting("after", "leave")); err != nil {
		t.Fatalf("the remaining server cannot commit: %v", err)
	}
}

func TestReconciliation(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 0)
	c.WaitForLeader(wait)
	// in reports name's place in the current leader's configuration.
	in := func(name string) (known, in, voter bool) {
		lm := currentLeader(c)
		if lm == nil {
			return false, false, false
		}
		in, voter = inConfig(lm, name)
		return true, in, voter
	}

	// A fourth server joins as non-voter and is promoted once stable.
	joined := time.Now()
	c.AddServer("s3")
	sawNonvoter := false
	meshtest.Eventually(t, wait, "s3 to be promoted", func() bool {
		known, in, voter := in("s3")
		if known && in && !voter {
			sawNonvoter = true
		}
		return voter
	})
	stab := mesh.TestConfig("x").ServerStabilization
	if !sawNonvoter || time.Since(joined) < stab {
		t.Fatalf("s3 became a voter after %v without %v as a non-voter (saw non-voter: %v)", time.Since(joined), stab, sawNonvoter)
	}

	// A server that leaves is removed at once (well within the grace).
	grace := mesh.TestConfig("x").DeadServerGrace
	left := time.Now()
	c.Stop("s3")
	meshtest.Eventually(t, grace/2, "s3 to be removed after leaving", func() bool {
		known, in, _ := in("s3")
		return known && !in
	})
	t.Logf("left server removed after %v", time.Since(left))

	// A failed server is removed after the grace, not before.
	leader, _ := c.WaitForLeader(wait)
	victim := "s0"
	if victim == leader {
		victim = "s1"
	}
	c.Kill(victim)
	failedAt := time.Now()
	meshtest.Eventually(t, wait, victim+" to be removed after failing", func() bool {
		known, in, _ := in(victim)
		return known && !in
	})
	if took := time.Since(failedAt); took < grace {
		t.Fatalf("failed server removed after %v, before the grace of %v", took, grace)
	}
	if got := voters(c.Leader()); len(got) != 2 {
		t.Fatalf("voters %v", got)
	}
	// It comes back: added again, promoted again.
	c.Restart(victim)
	meshtest.Eventually(t, wait, victim+" to be a voter again", func() bool {
		_, _, voter := in(victim)
		return voter
	})
}

func TestMinorityLeaderStepsDown(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 1)
	old, oldTerm := c.WaitForLeader(wait)
	om := c.Mesh(old)
	sub, cancel := om.Leadership()
	defer cancel()
	<-sub

	c.Partition(old)
	cut := time.Now()
	// The latest value is never lost: the step-down arrives.
	awaitLeadership(t, sub, "the isolated leader to step down", func(l mesh.Leadership) bool { return !l.IsLeader })
	t.Logf("isolated leader %s stepped down after %v", old, time.Since(cut))
	if err := om.Apply(ctxT(t), mesh.SetSetting("stale", "write")); !errors.Is(err, mesh.ErrNotLeader) {
		t.Fatalf("Apply on the isolated old leader: %v, want ErrNotLeader", err)
	}
	var majority []string
	for _, n := range c.Running(true) {
		if n != old {
			majority = append(majority, n)
		}
	}
	var newLeader string
	var newTerm uint64
	meshtest.Eventually(t, wait, "the majority to elect a new leader", func() bool {
		newLeader, newTerm = c.LeaderAmong(majority)
		return newLeader != ""
	})
	if newLeader == old || newTerm <= oldTerm {
		t.Fatalf("majority leader %s term %d; old %s term %d", newLeader, newTerm, old, oldTerm)
	}
	meshtest.Eventually(t, wait, "a write on the majority side", func() bool {
		name, _ := c.LeaderAmong(majority)
		return name != "" && c.Mesh(name).Apply(ctxT(t), mesh.SetSetting("majority", "write")) == nil
	})

	c.Heal()
	leader, _ := c.WaitForLeader(wait)
	if leader == "" {
		t.Fatal("no leader after heal")
	}
	c.WaitForMembers(wait)
	meshtest.Eventually(t, wait, "the old leader to catch up", func() bool {
		st := om.State()
		_, stale := st.Settings["stale"]
		return st.Settings["majority"] == "write" && !stale
	})
}

func TestRestartEveryServer(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"kill", "stop"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := meshtest.NewTestCluster(t, 3, 1, meshtest.WithConfig(func(c *mesh.Config) { c.ManualWagglers = true }))
			_, term := c.WaitForLeader(wait)
			at := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
			has := func(node string, epoch uint64) func(mesh.ControlState) bool {
				return func(s mesh.ControlState) bool {
					return s.Wagglers["code.exec"] == mesh.WagglerAssignment{Node: node, Epoch: epoch}
				}
			}
			mustApply(t, c, mesh.AssignWaggler("code.exec", "w0", 1), has("w0", 1))
			mustApply(t, c, mesh.Quarantine("w9", "test", at, false), nil)
			mustApply(t, c, mesh.SetSetting("k", "v"), nil)
			mustApply(t, c, mesh.AssignWaggler("code.exec", "w1", 2), has("w1", 2))
			lm := c.Leader()
			if err := lm.Barrier(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			want := lm.State()
			for _, name := range c.Running(true) {
				if mode == "kill" {
					c.Kill(name)
				} else {
					c.Stop(name)
				}
			}
			for _, name := range []string{"s0", "s1", "s2"} {
				c.Restart(name)
			}
			_, term2 := c.WaitForLeader(wait)
			if term2 <= term {
				t.Fatalf("term %d after restart, want > %d", term2, term)
			}
			meshtest.Eventually(t, wait, "all three servers to be voters again", func() bool {
				lm := currentLeader(c)
				return lm != nil && reflect.DeepEqual(voters(lm), []string{"s0", "s1", "s2"})
			})
			// The partitions are assigned again in the new term; the rest
			// is as it was.
			want.Partitions = nil
			meshtest.Eventually(t, wait, "every server to have the state", func() bool {
				leader, term := c.LeaderAmong(c.Running(true))
				for _, name := range c.Running(true) {
					s := c.Mesh(name).State()
					owned, ok := s.PartitionsOwnedBy(leader, term)
					s.Partitions = nil
					if !ok || len(owned) != s.PartitionCount || !reflect.DeepEqual(s, want) {
						return false
					}
				}
				return true
			})
			if err := c.Apply(ctxT(t), mesh.AssignWaggler("code.exec", "w0", 2)); !errors.Is(err, mesh.ErrStaleEpoch) {
				t.Fatalf("epoch after restart: %v", err)
			}
		})
	}
}

func TestControlStateReplicated(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 0, meshtest.WithConfig(func(c *mesh.Config) { c.ManualWagglers = true }))
	ctx := ctxT(t)
	if err := c.Leader().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	mustApply(t, c, mesh.AssignWaggler("net.scan", "w1", 3), func(s mesh.ControlState) bool {
		return s.Wagglers["net.scan"] == mesh.WagglerAssignment{Node: "w1", Epoch: 3}
	})
	if err := c.Apply(ctx, mesh.AssignWaggler("net.scan", "w2", 3)); !errors.Is(err, mesh.ErrStaleEpoch) {
		t.Fatalf("equal epoch: %v", err)
	}
	mustApply(t, c, mesh.RawCommand(mesh.IgnoreUnknown|122, []byte("{}")), nil) // unknown type that may be skipped: ignored, not an error
	mustApply(t, c, mesh.SetSetting("after-unknown", "applied"), nil)
	lm := c.Leader()
	want := lm.State()
	if want.Wagglers["net.scan"] != (mesh.WagglerAssignment{Node: "w1", Epoch: 3}) || want.Settings["after-unknown"] != "applied" ||
		len(want.Settings) != 1 || len(want.Quarantine) != 0 {
		t.Fatalf("leader state %+v", want)
	}
	meshtest.Eventually(t, wait, "followers to apply the same state", func() bool {
		want = lm.State() // the leader may still be placing partitions
		for _, name := range c.Running(true) {
			if !reflect.DeepEqual(c.Mesh(name).State(), want) {
				return false
			}
		}
		return true
	})
	// A cancelled context returns at once.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lm.Apply(cancelled, mesh.SetSetting("x", "y")); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, mesh.ErrNotLeader) {
		t.Fatalf("Apply with a cancelled context: %v", err)
	}
}

func TestStopIsIdempotentAndClosesChannels(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 1, 0)
	m := c.Mesh("s0")
	events, _ := m.Subscribe()
	lead, _ := m.Leadership()
	c.Stop("s0")
	if err := m.Stop(ctxT(t)); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := m.Halt(); err != nil {
		t.Fatalf("Halt after Stop: %v", err)
	}
	for range events {
	}
	var last mesh.Leadership
	for l := range lead {
		last = l
	}
	if last.IsLeader {
		t.Fatalf("last leadership value after Stop %+v, want not leader", last)
	}
	if err := m.Start(ctxT(t)); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
}

// TestLifecycleOfAMesh: a mesh starts once; one stopped before it started
// closes its subscriptions and never starts.
func TestLifecycleOfAMesh(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 1, 0)
	if err := c.Mesh("s0").Start(ctxT(t)); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	m, err := mesh.New(mesh.TestConfig("never-started"))
	if err != nil {
		t.Fatal(err)
	}
	events, _ := m.Subscribe()
	if err := m.Stop(ctxT(t)); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if _, open := <-events; open {
		t.Fatal("a subscription outlived the mesh")
	}
	if err := m.Start(ctxT(t)); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
	if err := m.Halt(); err != nil {
		t.Fatalf("Halt after Stop: %v", err)
	}
}

// raftTLS certifies name with the CA in dir (a server certificate) and
// returns its Raft TLS configuration.
func raftTLS(t *testing.T, dir, name string) *mesh.RaftTLS {
	t.Helper()
	cert, key, err := pki.CreateNodeCert(dir, dir, pki.NodeCert{Name: name, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.Load(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return &mesh.RaftTLS{Server: id.RaftServerTLS(), Client: id.RaftClientTLS()}
}

// A server whose certificate is of another CA joins the gossip (it has
// the key) and is added to Raft as a non-voter, but Raft cannot reach it
// (the TLS handshakes fail both ways), so it is never promoted: the
// cluster keeps its quorum and commits as before. The servers of the mesh
// replicate over mutual TLS.
func TestRaftRefusesForeignCertificates(t *testing.T) {
	t.Parallel()
	ourCA, theirCA := t.TempDir(), t.TempDir()
	for _, dir := range []string{ourCA, theirCA} {
		if _, _, err := pki.CreateCA(dir, time.Hour, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	c := meshtest.NewTestCluster(t, 2, 0, meshtest.WithConfig(func(cfg *mesh.Config) {
		if cfg.Name == "intruder" {
			cfg.RaftTLS = raftTLS(t, theirCA, cfg.Name)
		} else {
			cfg.RaftTLS = raftTLS(t, ourCA, cfg.Name)
		}
	}))
	c.WaitForLeader(wait)
	mustApply(t, c, mesh.SetSetting("before", "1"), func(st mesh.ControlState) bool { return st.Settings["before"] == "1" })

	c.AddServer("intruder")
	// leader is the leader the mesh's own servers agree on ("" while
	// none); inLeaderConfig is name's place in its configuration.
	leader := func() string {
		l, _ := c.LeaderAmong(slices.DeleteFunc(c.Running(true), func(n string) bool { return n == "intruder" }))
		return l
	}
	inLeaderConfig := func(name string) (in, voter bool) {
		if l := leader(); l != "" {
			return inConfig(c.Mesh(l), name)
		}
		return false, false
	}
	meshtest.Eventually(t, wait, "the intruder added as a non-voter", func() bool {
		in, _ := inLeaderConfig("intruder")
		return in
	})
	// A server of the mesh joins after it and is promoted once stable:
	// the intruder, stable for longer, would have been promoted first.
	c.AddServer("s2")
	meshtest.Eventually(t, wait, "s2 promoted", func() bool {
		_, voter := inLeaderConfig("s2")
		return voter
	})
	if _, voter := inLeaderConfig("intruder"); voter {
		t.Fatal("a server Raft cannot reach was promoted to voter")
	}
	// Through whichever of the mesh's servers leads by then (on a busy
	// machine the leadership can move meanwhile; SetSetting is idempotent).
	var lastErr error
	t.Cleanup(func() {
		if t.Failed() && lastErr != nil {
			t.Logf("the last commit failed with: %v", lastErr)
		}
	})
	meshtest.Eventually(t, wait, "a commit with the intruder in the configuration", func() bool {
		l := leader()
		if l == "" {
			return false
		}
		lastErr = c.Mesh(l).Apply(ctxT(t), mesh.SetSetting("after", "1"))
		return lastErr == nil
	})
	if st := c.Mesh("intruder").State(); st.Settings["after"] != "" {
		t.Fatalf("the intruder received the control state: %+v", st.Settings)
	}
}

// An advertise address may be a host name (a container's service name):
// gossip advertises what it resolves to, Raft the name; a name that does
// not resolve is refused with the flag to fix.
func TestAdvertiseHostName(t *testing.T) {
	t.Parallel()
	cfg := mesh.TestConfig("named")
	cfg.AdvertiseAddr = "localhost"
	cfg.Server = true
	cfg.BootstrapExpect = 1
	cfg.Logger = meshtest.Logger(t, zapcore.InfoLevel)
	m, err := mesh.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctxT(t)); err != nil {
		t.Fatalf("start advertising localhost: %v", err)
	}
	defer m.Halt()
	if host, _, err := net.SplitHostPort(m.GossipAddr()); err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("gossip address %q (%v), want a loopback IP", m.GossipAddr(), err)
	}

	bad := mesh.TestConfig("unresolvable")
	bad.AdvertiseAddr = "no-such-host.invalid"
	bad.Logger = cfg.Logger
	bm, err := mesh.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := bm.Start(ctxT(t)); err == nil || !strings.Contains(err.Error(), "--advertise") {
		t.Fatalf("start advertising an unresolvable name: %v, want an error naming --advertise", err)
	}
	_ = bm.Stop(ctxT(t))
}

// A server cut off and healed is a voter that knows the leader again within
// seconds: cut for less than DeadServerTimeout it stays a voter throughout
// (the grace alone does not remove a voter nothing replaces) and is back as
// soon as gossip merges and Raft reaches it; cut for longer it is removed,
// and added and promoted again after the heal.
func TestHealedServerRejoins(t *testing.T) {
	t.Parallel()
	cfg := mesh.TestConfig("x")
	for _, tc := range []struct {
		name    string
		leader  bool          // cut the leader off (else a follower)
		cut     time.Duration // how long
		removed bool
	}{
		{"leader cut for longer than the grace, shorter than the timeout", true, cfg.DeadServerGrace + cfg.DeadServerTimeout/2, false},
		{"follower cut for longer than the timeout", false, cfg.DeadServerTimeout + 2*time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := meshtest.NewTestCluster(t, 3, 0)
			leader, _ := c.WaitForLeader(wait)
			c.WaitForMembers(wait)
			victim := leader
			if !tc.leader {
				for _, n := range c.Running(true) {
					if n != leader {
						victim = n
						break
					}
				}
			}
			var others []string
			for _, n := range c.Running(true) {
				if n != victim {
					others = append(others, n)
				}
			}
			c.Partition(victim)
			deadline := time.Now().Add(tc.cut)
			wasRemoved := false
			for time.Now().Before(deadline) {
				if name, _ := c.LeaderAmong(others); name != "" {
					if in, _ := inConfig(c.Mesh(name), victim); !in {
						wasRemoved = true
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if wasRemoved != tc.removed {
				t.Fatalf("removed from the configuration during a cut of %v: %v, want %v (grace %v, timeout %v)",
					tc.cut, wasRemoved, tc.removed, cfg.DeadServerGrace, cfg.DeadServerTimeout)
			}
			c.Heal()
			healed := time.Now()
			vm := c.Mesh(victim)
			meshtest.Eventually(t, wait, victim+" to be a voter that knows the leader", func() bool {
				name, _ := c.LeaderAmong(others)
				if name == "" || vm.Leader().Leader != name {
					return false
				}
				_, voter := inConfig(c.Mesh(name), victim)
				return voter
			})
			back := time.Since(healed)
			t.Logf("%s back as a voter knowing the leader %v after the heal", victim, back)
			if back > 5*time.Second {
				t.Fatalf("%s took %v after the heal to be a voter that knows the leader, want under 5 s", victim, back)
			}
		})
	}
}
