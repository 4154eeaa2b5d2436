package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/remote"
)

// This file wires the Waggler layer into the node: the Router of each
// term reads the Waggler roles from the Raft control state (meshDirectory),
// the node's Waggler host advertises the roles it runs in gossip, and the
// node's pools follow the Waggler of their capability (wagFollower).

// meshDirectory is the Router's view of the mesh: the roles of the control
// state, and sessions with Waggler hosts — this node's in-process, another
// node's over its work stream.
type meshDirectory struct {
	n *Node
}

var _ wag.Directory = meshDirectory{}

func (d meshDirectory) Roles() map[string]wag.Role {
	st := d.n.mesh.State()
	out := make(map[string]wag.Role, len(st.Wagglers))
	for c, a := range st.Wagglers {
		if a.Node != "" {
			out[c] = wag.Role{Node: a.Node, Epoch: a.Epoch}
		}
	}
	return out
}

func (d meshDirectory) Quarantined() []string {
	return slices.Sorted(maps.Keys(d.n.mesh.State().Quarantine))
}

func (d meshDirectory) Changed() <-chan struct{} { return d.n.mesh.StateChanged() }

func (d meshDirectory) Open(ctx context.Context, node string, term uint64, up wag.Uplink) (wag.Link, error) {
	if f := d.n.cfg.Faults; f != nil && f.LoseWagglerStarts {
		up = startsLost{up}
	}
	if node == d.n.cfg.Name {
		return d.n.wagglers.Open(term, up)
	}
	return d.n.openRemoteWaggler(ctx, node, term, up)
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
// The engine dispatches through a Verifier, which runs verified attempts
// as several runs and passes the rest to the Router; the Router reports
// to the Verifier, which reports to the engine.
func (n *Node) newTerm(term uint64) (*termEngine, error) {
	t := &termEngine{}
	verifier := wag.NewVerifier(wag.VerifierConfig{Sink: &lateSink{t: t}, Outcome: n.verifyOutcome, Logger: n.cfg.Logger})
	var err error
	t.router, err = wag.NewRouter(wag.RouterConfig{
		Term: term, Sink: verifier, Directory: meshDirectory{n}, Logger: n.cfg.Logger, NodeName: n.cfg.Name,
		Holds:   func(id uuid.UUID) bool { return t.Engine != nil && t.Holds(id) },
		Metrics: n.metrics.wag,
		Slots:   n.slotsServing,
		OnDrain: func(c string) {
			if t.Engine != nil {
				t.CapacityFreed(c)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	verifier.SetNext(t.router)
	ecfg := n.cfg.Engine
	ecfg.Store, ecfg.Dispatcher, ecfg.Logger, ecfg.NodeName, ecfg.Term = n.store, verifier, n.cfg.Logger, n.cfg.Name, term
	ecfg.Admission = t.router
	ecfg.Query = n.reader
	ecfg.Metrics = n.metrics.engine
	if t.Engine, err = engine.New(ecfg); err != nil {
		return nil, err
	}
	return t, nil
}

// lateSink is the Router's sink: the engine, built after the Router.
type lateSink struct{ t *termEngine }

func (s *lateSink) TaskResult(ctx context.Context, r engine.TaskResult) {
	s.t.TaskResult(ctx, r)
}
func (s *lateSink) TaskProgress(ctx context.Context, p engine.TaskProgress) {
	s.t.TaskProgress(ctx, p)
}

// wagFollower keeps the node's pools working for the Waggler of their
// capability, and the node's gossip metadata telling which roles its
// Waggler host runs.
//
// The Waggler of a capability is the up member holding the role at the
// highest epoch, as two sources tell it: what members advertise in gossip
// (this node's own host counts at once, before gossip carries it) and the
// control state, which assigns the roles. A server has the control state
// itself. A worker-only node reads it from a server (ListWagglers, roles
// only) every heartbeat interval while one of its pools is in doubt —
// its Waggler's node is no longer up, or it has none — and every
// controlRefreshTicks intervals otherwise. Gossip alone is not enough:
// a successor's advertisement that misses this node would reach it only
// with memberlist's next push/pull (30 s by default), after the successor
// gave up waiting for this node's pools and ran their attempts again.
type wagFollower struct {
	n        *Node
	log      *zap.Logger
	interval time.Duration // the heartbeat interval: the pace of re-reading the control state

	wake    chan struct{}
	fetched chan map[string]wagHolder // a control-state read, from fetchControl
	wg      sync.WaitGroup            // fetchControl, while it runs

	control   map[string]wagHolder // roles last read from a server's control state (worker-only nodes)
	following map[string]wagHolder // capability → the Waggler its pools follow now
	fetching  bool                 // a fetchControl runs
	sinceRead int                  // ticks since the control state was last asked for
}

// wagHolder is the holder of a Waggler role: a node at an epoch.
type wagHolder struct {
	node  string
	epoch uint64
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

// controlRefreshTicks is how many heartbeat intervals a worker-only node
// whose pools follow an up Waggler waits between reads of the control
// state: fewer than the six a successor waits for the workers of
// inherited attempts (wag.Config.InheritGrace), so that a role that moved
// while its old holder stays up is followed in time too.
const controlRefreshTicks = 5

// controlReadTimeout bounds one read of a server's control state.
const controlReadTimeout = 2 * time.Second

func newWagFollower(n *Node) *wagFollower {
	return &wagFollower{
		n: n, log: n.log.Named("follower"), interval: n.cfg.Wag.WithDefaults().HeartbeatInterval,
		wake: make(chan struct{}, 1), fetched: make(chan map[string]wagHolder, 1),
		following: map[string]wagHolder{},
	}
}

func (f *wagFollower) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run follows roles until ctx ends: on every change of this node's roles,
// every membership event, every change of the control state (on a server)
// and every heartbeat interval.
func (f *wagFollower) run(ctx context.Context, events <-chan mesh.Event) {
	defer f.wg.Wait()
	f.n.wagglers.OnRoles(f.signal)
	f.signal()
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for {
		changed := f.n.mesh.StateChanged()
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			switch ev.Kind {
			case mesh.EventFailed:
				// Memberlist declared the node dead: its workers' attempts
				// fail over now, not after the heartbeat ladder.
				f.n.wagglers.WorkerNodeDead(ev.Member.Name)
			case mesh.EventJoin:
				f.n.wagglers.WorkerNodeAlive(ev.Member.Name)
			}
		case <-f.wake:
			f.advertise()
		case <-changed:
		case roles := <-f.fetched:
			f.fetching = false
			if roles != nil {
				f.control = roles
			}
		case <-tick.C:
			f.sinceRead++
			if !f.n.cfg.IsServer() && !f.fetching && (f.sinceRead >= controlRefreshTicks || f.inDoubt()) {
				f.sinceRead, f.fetching = 0, true
				f.wg.Go(func() { f.fetchControl(ctx) })
			}
		}
		f.follow(ctx)
	}
}

// advertise puts this node's current roles in its gossip metadata.
func (f *wagFollower) advertise() {
	roles := f.n.wagglers.Roles()
	if err := f.n.updateMeta(func(m *mesh.NodeMeta) { m.Wagglers = roles }); err != nil {
		f.log.Warn("advertising the waggler roles failed", zap.Error(err))
	}
}

// inDoubt reports whether a pool of this node follows no Waggler, or one
// whose node is not up.
func (f *wagFollower) inDoubt() bool {
	up := map[string]bool{}
	for _, m := range f.n.mesh.Members() {
		up[m.Name] = memberUp(m)
	}
	for c := range f.n.workers.Capabilities() {
		if h, ok := f.following[c]; !ok || !up[h.node] {
			return true
		}
	}
	return false
}

// fetchControl reads the Waggler roles of the control state from a server
// — the leader if it is known, else any up server — and hands them to the
// loop (nil when no server answered).
func (f *wagFollower) fetchControl(ctx context.Context) {
	roles, err := f.readControl(ctx)
	if err != nil {
		f.log.Debug("reading the waggler roles from a server failed", zap.Error(err))
	}
	select {
	case f.fetched <- roles:
	case <-ctx.Done():
	}
}

func (f *wagFollower) readControl(ctx context.Context) (map[string]wagHolder, error) {
	l := f.n.mesh.Leader()
	name, addr := l.Leader, l.LeaderGRPC
	if addr == "" {
		for _, m := range f.n.mesh.Members() {
			if memberUp(m) && slices.Contains(m.Roles, mesh.RoleServer) && m.GRPCAddr != "" {
				name, addr = m.Name, m.GRPCAddr
				break
			}
		}
	}
	if addr == "" {
		return nil, errors.New("no server is up")
	}
	cc, err := f.n.conns.conn(name, addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(max(f.interval, 500*time.Millisecond), controlReadTimeout))
	defer cancel()
	resp, err := robonetv1.NewMeshServiceClient(cc).ListWagglers(ctx, &robonetv1.ListWagglersRequest{RolesOnly: true})
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", addr, err)
	}
	if resp.GetSource() != rolesFromControlState {
		return nil, fmt.Errorf("%s answered from %s, not from the control state", resp.GetAnsweredBy(), resp.GetSource())
	}
	roles := make(map[string]wagHolder, len(resp.GetWagglers()))
	for _, w := range resp.GetWagglers() {
		if w.GetNode() != "" {
			roles[w.GetCapability()] = wagHolder{w.GetNode(), w.GetEpoch()}
		}
	}
	return roles, nil
}

// follow attaches every pool to the Waggler of its capability.
func (f *wagFollower) follow(ctx context.Context) {
	control := f.control
	if f.n.cfg.IsServer() {
		control = map[string]wagHolder{}
		for c, a := range f.n.mesh.State().Wagglers {
			if a.Node != "" {
				control[c] = wagHolder{a.Node, a.Epoch}
			}
		}
	}
	members := f.n.mesh.Members()
	if fl := f.n.cfg.Faults; fl != nil && fl.DeafToWagglerGossip {
		for i := range members {
			members[i].Wagglers = nil
		}
	}
	holders := wagHolders(members, f.n.cfg.Name, f.n.wagglers.Roles(), control)
	for c := range maps.Keys(f.n.workers.Capabilities()) {
		h, ok := holders[c]
		if !ok {
			continue // no Waggler yet: the pool keeps its reports
		}
		if f.n.workers.AttachedTo(c) == wag.TargetKey(h.node, c, h.epoch) {
			f.following[c] = h
			continue
		}
		var src wag.TargetSource
		if h.node == f.n.cfg.Name {
			w := f.n.wagglers.Waggler(c)
			if w == nil || w.Epoch() != h.epoch {
				continue // assigned here, not taken yet: this host advertises it when it does
			}
			src = wag.LocalTarget(w)
		} else {
			s, err := f.n.remoteWorkTarget(ctx, h.node, c, h.epoch)
			if err != nil {
				f.log.Debug("waggler not reachable yet", zap.String("capability", c), zap.String("waggler_node", h.node), zap.Error(err))
				continue
			}
			src = s
		}
		f.n.workers.Attach(c, src)
		f.following[c] = h
		f.log.Info("pool follows its waggler", zap.String("capability", c), zap.String("waggler_node", h.node), zap.Uint64("epoch", h.epoch))
	}
}

// wagHolders returns the Waggler of each capability: per capability, the
// up member holding the role at the highest epoch, by what members
// advertise (self's own roles taken from own, not from gossip) and by the
// control state's assignments (control, possibly older than gossip).
func wagHolders(members []mesh.Member, self string, own map[string]uint64, control map[string]wagHolder) map[string]wagHolder {
	out := map[string]wagHolder{}
	offer := func(c string, h wagHolder) {
		if cur, ok := out[c]; !ok || h.epoch > cur.epoch {
			out[c] = h
		}
	}
	up := make(map[string]bool, len(members))
	for _, m := range members {
		if !memberUp(m) {
			continue
		}
		up[m.Name] = true
		roles := m.Wagglers
		if m.Name == self {
			roles = own
		}
		for c, e := range roles {
			offer(c, wagHolder{m.Name, e})
		}
	}
	for c, h := range control {
		if up[h.node] {
			offer(c, h)
		}
	}
	return out
}

// verifyOutcome is told, for each worker node that ran a verified
// attempt, whether its output agreed with the majority; an outvoted node
// is evidence against it.
func (n *Node) verifyOutcome(node string, agreed bool) {
	if !agreed {
		n.log.Warn("a worker node was outvoted on a verified attempt", zap.String("worker_node", node))
	}
	n.trust.verifyOutcome(node, agreed)
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
	n.trust.Observe(sentinel.Observation{Node: peer, Kind: sentinel.Violation, At: time.Now()})
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
func (n *Node) openRemoteWaggler(ctx context.Context, node string, term uint64, up wag.Uplink) (wag.Link, error) {
	addr, err := n.memberGRPC(node)
	if err != nil {
		return nil, err
	}
	cc, err := n.conns.conn(node, addr)
	if err != nil {
		return nil, err
	}
	return remote.OpenLead(ctx, robonetv1.NewWagServiceClient(cc), term, n.cfg.Name, node, up, n.log,
		remote.LeadOptions{OnViolation: n.peerViolation, Trust: n.trust, OnObservations: n.trust.observedBy, MaxMessageBytes: n.cfg.MaxMessageBytes})
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
