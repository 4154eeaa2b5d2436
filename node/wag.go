package node

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
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

func (d meshDirectory) Changed() <-chan struct{} { return d.n.mesh.StateChanged() }

func (d meshDirectory) Open(ctx context.Context, node string, term uint64, up wag.Uplink) (wag.Link, error) {
	if node == d.n.cfg.Name {
		return d.n.wagglers.Open(term, up)
	}
	return d.n.openRemoteWaggler(ctx, node, term, up)
}

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
func (n *Node) newTerm(term uint64) (*termEngine, error) {
	t := &termEngine{}
	var err error
	t.router, err = wag.NewRouter(wag.RouterConfig{
		Term: term, Sink: &lateSink{t: t}, Directory: meshDirectory{n}, Logger: n.cfg.Logger, NodeName: n.cfg.Name,
		Holds: func(id uuid.UUID) bool { return t.Engine != nil && t.Holds(id) },
	})
	if err != nil {
		return nil, err
	}
	ecfg := n.cfg.Engine
	ecfg.Store, ecfg.Dispatcher, ecfg.Logger, ecfg.NodeName, ecfg.Term = n.store, t.router, n.cfg.Logger, n.cfg.Name, term
	ecfg.Query = n.reader
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
// Waggler host runs. The Waggler of a capability is the alive member that
// advertises the role at the highest epoch; this node's own host counts
// at once, before gossip carries it.
type wagFollower struct {
	n   *Node
	log *zap.Logger

	wake chan struct{}
}

func newWagFollower(n *Node) *wagFollower {
	return &wagFollower{n: n, log: n.log.Named("follower"), wake: make(chan struct{}, 1)}
}

func (f *wagFollower) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run follows roles until ctx ends: on every change of this node's roles
// and every membership event.
func (f *wagFollower) run(ctx context.Context, events <-chan mesh.Event) {
	f.n.wagglers.OnRoles(f.signal)
	f.signal()
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
				// Memberlist declared the node dead: its workers' attempts
				// fail over now, not after the heartbeat ladder.
				f.n.wagglers.WorkerNodeDead(ev.Member.Name)
			case mesh.EventJoin:
				f.n.wagglers.WorkerNodeAlive(ev.Member.Name)
			}
		case <-f.wake:
			f.advertise()
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

// follow attaches every pool to the Waggler of its capability.
func (f *wagFollower) follow(ctx context.Context) {
	holders := map[string]struct {
		node  string
		epoch uint64
	}{}
	for _, m := range f.n.mesh.Members() {
		if m.Status != mesh.StatusAlive && m.Status != mesh.StatusSuspect {
			continue
		}
		roles := m.Wagglers
		if m.Name == f.n.cfg.Name {
			roles = f.n.wagglers.Roles()
		}
		for c, e := range roles {
			if h, ok := holders[c]; !ok || e > h.epoch {
				holders[c] = struct {
					node  string
					epoch uint64
				}{m.Name, e}
			}
		}
	}
	for c := range maps.Keys(f.n.workers.Capabilities()) {
		h, ok := holders[c]
		if !ok {
			continue // no Waggler yet: the pool keeps its reports
		}
		if f.n.workers.AttachedTo(c) == wag.TargetKey(h.node, c, h.epoch) {
			continue
		}
		var src wag.TargetSource
		if h.node == f.n.cfg.Name {
			w := f.n.wagglers.Waggler(c)
			if w == nil || w.Epoch() != h.epoch {
				continue
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
		f.log.Info("pool follows its waggler", zap.String("capability", c), zap.String("waggler_node", h.node), zap.Uint64("epoch", h.epoch))
	}
}

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
	cc, err := n.conns.conn(addr)
	if err != nil {
		return nil, err
	}
	return remote.OpenLead(ctx, robonetv1.NewWagServiceClient(cc), term, n.cfg.Name, up, n.log)
}

// remoteWorkTarget is the Waggler of capability on node, for this node's
// pools of it: a Work stream per pool.
func (n *Node) remoteWorkTarget(_ context.Context, node, capability string, epoch uint64) (wag.TargetSource, error) {
	addr, err := n.memberGRPC(node)
	if err != nil {
		return wag.TargetSource{}, err
	}
	cc, err := n.conns.conn(addr)
	if err != nil {
		return wag.TargetSource{}, err
	}
	client := robonetv1.NewWagServiceClient(cc)
	return wag.TargetSource{
		Key: wag.TargetKey(node, capability, epoch),
		New: func(running func() []wag.Running) wag.Target {
			return remote.NewWorkTarget(client, n.cfg.Name, capability, epoch, running, n.log)
		},
	}, nil
}
