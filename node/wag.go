package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/remote"
)

// This file wires the Waggler layer into the node: the Router of each
// term reads the Waggler roles from the Raft control state (meshDirectory),
// and the node's wag.RoleFollower, through meshRoles, advertises the roles
// the node's Waggler host runs in gossip and has the node's pools follow
// the Waggler of their capability.

// meshDirectory is the Router's view of the mesh: the roles of the control
// state, and sessions with Waggler hosts — this node's in-process, another
// node's over its work stream.
type meshDirectory struct {
	n *Node
}

var _ wag.Directory = meshDirectory{}

func (d meshDirectory) Roles() map[string]wag.Role { return assignedRoles(d.n.mesh.State()) }

func (d meshDirectory) Quarantined() []string {
	return slices.Sorted(maps.Keys(d.n.mesh.State().Quarantine))
}

func (d meshDirectory) Changed() <-chan struct{} { return d.n.mesh.StateChanged() }

func (d meshDirectory) Open(ctx context.Context, node string, owner wag.Owner, up wag.Uplink) (wag.Link, error) {
	if f := d.n.cfg.Faults; f != nil && f.LoseWagglerStarts {
		up = startsLost{up}
	}
	if node == d.n.cfg.Name {
		return d.n.wagglers.OpenOwner(owner, up)
	}
	return d.n.openRemoteWaggler(ctx, node, owner, up)
}

// startsLost is an uplink that loses the starts (Faults.LoseWagglerStarts).
type startsLost struct{ wag.Uplink }

func (startsLost) Started([]wag.Started) {}

// termEngine is what runs while this node leads one term: the engine and
// the Router that is its Dispatcher.
type termEngine struct {
	*engine.Engine
	router *wag.Router // nil in tests that dispatch elsewhere
}

// Start starts the Router, then the engine (which dispatches through it).
func (t *termEngine) Start(ctx context.Context) error {
	if t.router != nil {
		if err := t.router.Start(ctx); err != nil {
			return err
		}
	}
	if err := t.Engine.Start(ctx); err != nil {
		if t.router != nil {
			_ = t.router.Stop(ctx)
		}
		return err
	}
	return nil
}

// Stop stops the engine gracefully (its cancels go out through the
// Router), then the Router.
func (t *termEngine) Stop(ctx context.Context) error {
	err := t.Engine.Stop(ctx)
	if t.router != nil {
		err = errors.Join(err, t.router.Stop(ctx))
	}
	return err
}

// Release hands the engine's instances over (engine.Release: written and
// released, nothing cancelled), then stops the Router; the hosts keep what
// they have not reported for the next owner's session.
func (t *termEngine) Release(ctx context.Context) error {
	err := t.Engine.Release(ctx)
	if t.router != nil {
		err = errors.Join(err, t.router.Stop(ctx))
	}
	return err
}

// SetLeader gives the engine and its Router the Raft leader's part in
// term, or takes it away (term 0).
func (t *termEngine) SetLeader(term uint64) {
	t.Engine.SetLeader(term != 0)
	if t.router != nil {
		t.router.SetLeader(term)
	}
}

// Abandon drops the engine and the Router without a word to anyone: a
// newer term may own everything already.
func (t *termEngine) Abandon() {
	t.Engine.Abandon()
	if t.router != nil {
		_ = t.router.Stop(context.Background())
	}
}

// engineOf is the engine of a term, or nil.
func engineOf(t *termEngine) *engine.Engine {
	if t == nil {
		return nil
	}
	return t.Engine
}

// newTerm builds the engine of a term with its Router (neither started).
// The engine dispatches through a Tally, which runs verified attempts as
// several runs and passes the rest to the Router; the Router reports to
// the Tally, which reports to the engine.
func (n *Node) newTerm(o ownership) (*termEngine, error) {
	term, parts := o.term, o.parts
	t := &termEngine{}
	tally := wag.NewTally(wag.TallyConfig{Sink: &lateSink{t: t}, Outcome: n.verifyOutcome, Logger: n.cfg.Logger})
	var err error
	t.router, err = wag.NewRouter(wag.RouterConfig{
		Term: term, Sink: tally, Directory: meshDirectory{n}, Logger: n.cfg.Logger, NodeName: n.cfg.Name,
		Follower: !o.leader, PartitionCount: parts.count, Partitions: parts.epochs,
		Holds:   func(id uuid.UUID) bool { return t.Engine != nil && t.Holds(id) },
		Metrics: n.metrics.wag,
		Slots:   n.slotsServing,
		Nodes:   n.nodesServing,
		OnDrain: func(c string) {
			if t.Engine != nil {
				t.CapacityFreed(c)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	tally.SetNext(t.router)
	ecfg := n.cfg.Engine
	ecfg.Store, ecfg.Dispatcher, ecfg.Logger, ecfg.NodeName, ecfg.Term = n.store, tally, n.cfg.Logger, n.cfg.Name, term
	ecfg.Admission = t.router
	ecfg.Query = n.reader
	ecfg.Metrics = n.metrics.engine
	ecfg.PartitionCount, ecfg.Partitions, ecfg.Follower = parts.count, parts.epochs, !o.leader
	ecfg.Owner = engineOwner(n.cfg.Name)
	if t.Engine, err = engine.New(ecfg); err != nil {
		return nil, err
	}
	return t, nil
}

// engineOwner is the owner id of every engine this node runs, in every
// process of it: derived from the node's name, so that a new engine life
// of the same assignment — the engine restarted when the node gained
// partitions, or the node restarted before its partitions moved — fences
// its partitions at the epoch they are assigned at (the store refuses
// that epoch to any other owner), and claims what an earlier life left
// leased. Two lives never run at once: the owner loop abandons one, and
// waits for it, before it starts the next, and a node's data directory is
// locked to one process.
func engineOwner(node string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("robonet/engine/"+node))
}

// lateSink is the Router's sink: the engine, built after the Router.
type lateSink struct{ t *termEngine }

func (s *lateSink) TaskResult(ctx context.Context, r port.TaskResult) {
	s.t.TaskResult(ctx, r)
}
func (s *lateSink) TaskProgress(ctx context.Context, p port.TaskProgress) {
	s.t.TaskProgress(ctx, p)
}

// meshRoles is the mesh as the Waggler roles see it (wag.RoleSource):
// the members and their advertised roles, the control state's roles on a
// server, a server's control state read over gRPC on a worker-only node,
// and this node's gossip metadata.
type meshRoles struct {
	n *Node
}

var _ wag.RoleSource = meshRoles{}

func (s meshRoles) Members() []wag.RoleMember {
	members := roleMembers(s.n.mesh.Members())
	if fl := s.n.cfg.Faults; fl != nil && fl.DeafToWagglerGossip {
		for i := range members {
			members[i].Roles = nil
		}
	}
	return members
}

func (s meshRoles) Assigned() (map[string]wag.Role, bool) {
	if !s.n.cfg.IsServer() {
		return nil, false
	}
	return assignedRoles(s.n.mesh.State()), true
}

func (s meshRoles) Changed() <-chan struct{} { return s.n.mesh.StateChanged() }

func (s meshRoles) Advertise(roles map[string]uint64) error {
	return s.n.updateMeta(func(m *mesh.NodeMeta) { m.Wagglers = roles })
}

// ReadAssigned reads the Waggler roles of the control state from a server:
// the leader if it is known, else any up server.
func (s meshRoles) ReadAssigned(ctx context.Context) (map[string]wag.Role, error) {
	l := s.n.mesh.Leader()
	name, addr := l.Leader, l.LeaderGRPC
	if addr == "" {
		for _, m := range s.n.mesh.Members() {
			if memberUp(m) && slices.Contains(m.Roles, mesh.RoleServer) && m.GRPCAddr != "" {
				name, addr = m.Name, m.GRPCAddr
				break
			}
		}
	}
	if addr == "" {
		return nil, errors.New("no server is up")
	}
	cc, err := s.n.conns.conn(name, addr)
	if err != nil {
		return nil, err
	}
	resp, err := robonetv1.NewMeshServiceClient(cc).ListWagglers(ctx, &robonetv1.ListWagglersRequest{RolesOnly: true})
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", addr, err)
	}
	if resp.GetSource() != rolesFromControlState {
		return nil, fmt.Errorf("%s answered from %s, not from the control state", resp.GetAnsweredBy(), resp.GetSource())
	}
	roles := make(map[string]wag.Role, len(resp.GetWagglers()))
	for _, w := range resp.GetWagglers() {
		if w.GetNode() != "" {
			roles[w.GetCapability()] = wag.Role{Node: w.GetNode(), Epoch: w.GetEpoch()}
		}
	}
	return roles, nil
}

// assignedRoles are the roles the control state assigns, unassigned
// capabilities left out.
func assignedRoles(st mesh.ControlState) map[string]wag.Role {
	out := make(map[string]wag.Role, len(st.Wagglers))
	for c, a := range st.Wagglers {
		if a.Node != "" {
			out[c] = wag.Role{Node: a.Node, Epoch: a.Epoch}
		}
	}
	return out
}

// roleMembers are members as the roles see them.
func roleMembers(members []mesh.Member) []wag.RoleMember {
	out := make([]wag.RoleMember, len(members))
	for i, m := range members {
		out[i] = wag.RoleMember{Name: m.Name, Up: memberUp(m), Roles: m.Wagglers}
	}
	return out
}

// newRoleFollower is the node's wag.RoleFollower: its pools follow the
// Waggler of their capability, its gossip metadata tells the roles its
// host runs.
func (n *Node) newRoleFollower() (*wag.RoleFollower, error) {
	return wag.NewRoleFollower(wag.RoleFollowerConfig{
		Self: n.cfg.Name, Source: meshRoles{n}, Host: n.wagglers, Pools: n.workers, Remote: n.remoteWorkTarget,
		Interval: n.cfg.Wag.WithDefaults().HeartbeatInterval, Logger: n.log.Named("follower"),
	})
}

// forwardMembership tells the Waggler host and the follower of membership
// events until ctx ends or events closes: a node memberlist declared dead
// has its workers' attempts fail over now, not after the heartbeat ladder.
func (n *Node) forwardMembership(ctx context.Context, events <-chan mesh.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			switch ev.Kind {
			case mesh.EventFailed:
				n.wagglers.WorkerNodeDead(ev.Member.Name)
			case mesh.EventJoin:
				n.wagglers.WorkerNodeAlive(ev.Member.Name)
			}
			n.follower.MembersChanged()
		}
	}
}

// servingNodes names the members up now whose gossip metadata lists a
// pool of capability (wag.Config.ServingNodes): a successor Waggler waits
// for their workers to register before it runs an attempt one of them may
// run already. Not known until the mesh runs.
func (n *Node) servingNodes(capability string) ([]string, bool) {
	m := n.mesh
	if m == nil {
		return nil, false
	}
	var nodes []string
	for _, mem := range m.Members() {
		if memberUp(mem) && mem.Capabilities[capability] > 0 {
			nodes = append(nodes, mem.Name)
		}
	}
	return nodes, true
}

// nodesServing names the members up now whose gossip metadata lists a pool
// of capability; before the mesh runs, this node if it serves it (the
// Router's answer to a task with on: every_node, wag.RouterConfig.Nodes).
func (n *Node) nodesServing(capability string) []string {
	if nodes, known := n.servingNodes(capability); known {
		return nodes
	}
	if n.cfg.Capabilities[capability] > 0 {
		return []string{n.cfg.Name}
	}
	return nil
}

// slotsServing is the pool slots of capability on the members up now (the
// Router's measure of a saturated capability; wag.RouterConfig.Slots).
func (n *Node) slotsServing(capability string) int {
	m := n.mesh
	if m == nil {
		return n.cfg.Capabilities[capability]
	}
	slots := 0
	for _, mem := range m.Members() {
		if memberUp(mem) {
			slots += mem.Capabilities[capability]
		}
	}
	return slots
}

// verifyOutcome is told, for each worker node or worker program (a trust
// subject, NODE/PROGRAM) that ran a verified attempt, whether its output
// agreed with the majority; an outvoted one is evidence against it.
func (n *Node) verifyOutcome(subject string, agreed bool) {
	if !agreed {
		n.log.Warn("a worker was outvoted on a verified attempt", zap.String("worker_subject", subject))
	}
	n.trust.VerifyOutcome(subject, agreed)
}

// peerViolation is told of a peer that sent, on a Waggler stream, what no
// honest node sends; the stream was closed and the peer's message
// dropped. The count is kept per peer, as evidence against it.
func (n *Node) peerViolation(peer, what string) {
	n.violMu.Lock()
	n.violations[peer]++
	count := n.violations[peer]
	n.violMu.Unlock()
	n.log.Warn("peer violation", zap.String("peer", peer), zap.String("what", what), zap.Int("count", count))
	n.trust.Observe(sentinel.Observation{Node: peer, Kind: sentinel.Violation, At: n.cfg.Clock.Now()})
}

// wagglerRank ranks node for a new Waggler role by this node's trust in
// it (the leader's).
func (n *Node) wagglerRank(node string) int { return n.trust.Rank(node) }

// memberGRPC returns the gRPC address node advertises, if it is alive.
func (n *Node) memberGRPC(node string) (string, error) {
	for _, m := range n.mesh.Members() {
		if m.Name != node {
			continue
		}
		if m.Status != mesh.StatusAlive && m.Status != mesh.StatusSuspect {
			return "", fmt.Errorf("node %s is %s", node, m.Status)
		}
		if m.GRPCAddr == "" {
			return "", fmt.Errorf("node %s advertises no gRPC address yet", node)
		}
		return m.GRPCAddr, nil
	}
	return "", fmt.Errorf("node %s is not a member of the mesh", node)
}

// openRemoteWaggler opens a Lead session with node's Waggler host.
func (n *Node) openRemoteWaggler(ctx context.Context, node string, owner wag.Owner, up wag.Uplink) (wag.Link, error) {
	addr, err := n.memberGRPC(node)
	if err != nil {
		return nil, err
	}
	cc, err := n.conns.conn(node, addr)
	if err != nil {
		return nil, err
	}
	return remote.OpenLead(ctx, robonetv1.NewWagServiceClient(cc), owner, n.cfg.Name, node, up, n.log,
		remote.LeadOptions{OnViolation: n.peerViolation, Trust: n.trust, OnObservations: n.trust.ObservedBy, MaxMessageBytes: n.cfg.MaxMessageBytes})
}

// remoteWorkTarget is the Waggler of capability on node, for this node's
// pools of it: a Work stream per pool.
func (n *Node) remoteWorkTarget(_ context.Context, node, capability string, epoch uint64) (wag.TargetSource, error) {
	addr, err := n.memberGRPC(node)
	if err != nil {
		return wag.TargetSource{}, err
	}
	cc, err := n.conns.conn(node, addr)
	if err != nil {
		return wag.TargetSource{}, err
	}
	client := robonetv1.NewWagServiceClient(cc)
	return wag.TargetSource{
		Key: wag.TargetKey(node, capability, epoch),
		New: func(running func() []wag.Running) wag.Target {
			return remote.NewWorkTarget(client, n.cfg.Name, capability, epoch, running, n.log, node,
				remote.WorkOptions{OnViolation: n.peerViolation, Trust: n.trust, MaxMessageBytes: n.cfg.MaxMessageBytes})
		},
	}, nil
}
