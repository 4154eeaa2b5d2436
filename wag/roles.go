package wag

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
)

// Waggler roles on a node. The Raft leader places the roles in the control
// state (package mesh); from there a role travels one way, through the
// RoleSource port that this package declares and node adapts:
//
//	control state, gossip ──RoleSource──▶ RoleFollower ──Attach──▶ WorkerHost (this node's pools)
//	WagglerHost ──OnRoles──▶ RoleFollower ──Advertise──▶ gossip
//	control state ──Directory──▶ Router ──Session.SetRoles──▶ WagglerHost (on the leader)
//
// Holders is the one rule that resolves who holds a role; the follower and
// the MeshService's listing both use it.
//
// A role is an assignment with an epoch placed by the Raft leader and
// followed by every node; Holders keys roles by name and knows nothing
// else of Wagglers, so other assignments of that shape can use it.

// RoleMember is a member of the mesh as the roles see it.
type RoleMember struct {
	Name string
	// Up: alive or suspect (not declared dead, not left).
	Up bool
	// Roles are the roles the member advertises in gossip: capability →
	// epoch.
	Roles map[string]uint64
}

// Holders returns the holder of each role among the up members, by what
// they advertise and by what the control state assigns (assigned, which
// may be older than gossip, or nil): per capability, the holder at the
// highest epoch; at an equal epoch an advertised role beats an assigned
// one, then the smaller node name wins. A holder that is not up never
// counts. The answer does not depend on the order of members.
func Holders(members []RoleMember, assigned map[string]Role) map[string]Role {
	type offer struct {
		Role
		advertised bool
	}
	beats := func(a, b offer) bool {
		return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), compareBool(a.advertised, b.advertised), cmp.Compare(b.Node, a.Node)) > 0
	}
	best := map[string]offer{}
	consider := func(c string, o offer) {
		if cur, ok := best[c]; !ok || beats(o, cur) {
			best[c] = o
		}
	}
	up := make(map[string]bool, len(members))
	for _, m := range members {
		if !m.Up {
			continue
		}
		up[m.Name] = true
		for c, e := range m.Roles {
			consider(c, offer{Role{m.Name, e}, true})
		}
	}
	for c, r := range assigned {
		if up[r.Node] {
			consider(c, offer{r, false})
		}
	}
	out := make(map[string]Role, len(best))
	for c, o := range best {
		out[c] = o.Role
	}
	return out
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// RoleSource is the mesh as the roles see it; node adapts *mesh.Mesh to
// it.
type RoleSource interface {
	// Members returns the members of the mesh with the roles they
	// advertise.
	Members() []RoleMember
	// Assigned returns the roles the control state assigns (capability →
	// holder, unassigned capabilities left out), and false on a node that
	// keeps no control state (worker-only).
	Assigned() (map[string]Role, bool)
	// ReadAssigned reads the roles the control state assigns from a
	// server (on a worker-only node).
	ReadAssigned(ctx context.Context) (map[string]Role, error)
	// Changed returns a channel closed at the next change of the control
	// state on this node.
	Changed() <-chan struct{}
	// Advertise puts the roles this node's Waggler host runs in its gossip
	// metadata.
	Advertise(roles map[string]uint64) error
}

// RoleHost is what RoleFollower needs of this node's Waggler host;
// *WagglerHost implements it.
type RoleHost interface {
	Roles() map[string]uint64
	OnRoles(f func())
	Target(capability string, epoch uint64) (TargetSource, bool)
}

// RolePools is what RoleFollower needs of this node's pools; *WorkerHost
// implements it.
type RolePools interface {
	Capabilities() map[string]int
	AttachedTo(capability string) string
	Attach(capability string, src TargetSource)
}

var (
	_ RoleHost  = (*WagglerHost)(nil)
	_ RolePools = (*WorkerHost)(nil)
)

// RoleFollowerConfig configures a RoleFollower.
type RoleFollowerConfig struct {
	// Self is this node's name.
	Self   string
	Source RoleSource
	Host   RoleHost
	Pools  RolePools
	// Remote is the Waggler of capability at epoch on another node, as a
	// target for this node's pools.
	Remote func(ctx context.Context, node, capability string, epoch uint64) (TargetSource, error)
	// Interval is the pace of re-reading the control state on a
	// worker-only node: the heartbeat interval.
	Interval time.Duration
	Clock    clock.Clock // default: the system clock
	Logger   *zap.Logger
}

// refreshTicks is how many Intervals a worker-only node whose pools
// follow an up Waggler waits between reads of the control state: fewer
// than the six a successor waits for the workers of inherited attempts
// (Config.InheritGrace), so that a role that moved while its old holder
// stays up is followed in time too.
const refreshTicks = 5

// readTimeout bounds one read of a server's control state.
const readTimeout = 2 * time.Second

// RoleFollower keeps a node's pools working for the Waggler of their
// capability, and the node's gossip metadata telling which roles its
// Waggler host runs.
//
// The Waggler of a capability is the holder Holders resolves from two
// sources: what members advertise in gossip (this node's own host counts
// at once, before gossip carries it) and the control state, which assigns
// the roles. A server has the control state itself. A worker-only node
// reads it from a server (RoleSource.ReadAssigned) every Interval while
// one of its pools is in doubt — its Waggler's node is no longer up, or it
// has none — and every refreshTicks Intervals otherwise. Gossip alone is
// not enough: a successor's advertisement that misses this node would
// reach it only with memberlist's next push/pull (30 s by default), after
// the successor gave up waiting for this node's pools and ran their
// attempts again.
type RoleFollower struct {
	cfg RoleFollowerConfig
	log *zap.Logger

	wake    chan struct{}        // this node's roles changed: advertise, then follow
	poke    chan struct{}        // membership or pools changed: follow
	fetched chan map[string]Role // a control-state read, from fetch
	wg      sync.WaitGroup       // fetch, while it runs

	// Owned by Run.
	control   map[string]Role // roles last read from a server (worker-only nodes)
	following map[string]Role // capability → the Waggler its pools follow now
	fetching  bool            // a fetch runs
	sinceRead int             // Intervals since the control state was last read
}

// NewRoleFollower returns a follower; Run runs it.
func NewRoleFollower(cfg RoleFollowerConfig) (*RoleFollower, error) {
	if cfg.Source == nil || cfg.Host == nil || cfg.Pools == nil || cfg.Remote == nil {
		return nil, errors.New("wag: a role follower needs a Source, a Host, Pools and Remote")
	}
	if cfg.Interval <= 0 {
		return nil, errors.New("wag: a role follower needs a positive Interval")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &RoleFollower{
		cfg: cfg, log: cfg.Logger,
		wake: make(chan struct{}, 1), poke: make(chan struct{}, 1), fetched: make(chan map[string]Role, 1),
		following: map[string]Role{},
	}, nil
}

// RolesChanged tells the follower that this node's roles may have changed
// (or that what it advertises must be said again): it advertises them and
// follows.
func (f *RoleFollower) RolesChanged() { signal(f.wake) }

// MembersChanged tells the follower that the members or this node's pools
// changed: it follows.
func (f *RoleFollower) MembersChanged() { signal(f.poke) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run follows the roles until ctx ends: on every change of this node's
// roles, of the members, of the control state (on a server) and every
// Interval.
func (f *RoleFollower) Run(ctx context.Context) {
	defer f.wg.Wait()
	f.cfg.Host.OnRoles(f.RolesChanged)
	f.RolesChanged()
	tick := f.cfg.Clock.NewTimer(f.cfg.Interval)
	defer tick.Stop()
	for {
		// The channel before the state: a change that lands while follow
		// reads is then seen at once, not at the next tick.
		changed := f.cfg.Source.Changed()
		f.follow(ctx)
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
			f.advertise()
		case <-f.poke:
		case <-changed:
		case roles := <-f.fetched:
			f.fetching = false
			if roles != nil {
				f.control = roles
			}
		case <-tick.C():
			if f.readDue() {
				f.fetching = true
				f.wg.Go(func() { f.fetch(ctx) })
			}
			tick.Reset(f.cfg.Interval)
		}
	}
}

// readDue counts an Interval and reports whether to read the control
// state from a server now: never on a server or while a read runs, every
// Interval while a pool is in doubt, every refreshTicks otherwise.
func (f *RoleFollower) readDue() bool {
	f.sinceRead++
	if _, server := f.cfg.Source.Assigned(); server || f.fetching || (f.sinceRead < refreshTicks && !f.inDoubt()) {
		return false
	}
	f.sinceRead = 0
	return true
}

// advertise puts this node's current roles in its gossip metadata.
func (f *RoleFollower) advertise() {
	if err := f.cfg.Source.Advertise(f.cfg.Host.Roles()); err != nil {
		f.log.Warn("advertising the waggler roles failed", zap.Error(err))
	}
}

// inDoubt reports whether a pool of this node follows no Waggler, or one
// whose node is not up.
func (f *RoleFollower) inDoubt() bool {
	up := map[string]bool{}
	for _, m := range f.cfg.Source.Members() {
		up[m.Name] = m.Up
	}
	for c := range f.cfg.Pools.Capabilities() {
		if h, ok := f.following[c]; !ok || !up[h.Node] {
			return true
		}
	}
	return false
}

// fetch reads the roles of the control state from a server and hands them
// to the loop (nil when no server answered).
func (f *RoleFollower) fetch(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, min(max(f.cfg.Interval, 500*time.Millisecond), readTimeout))
	roles, err := f.cfg.Source.ReadAssigned(rctx)
	cancel()
	if err != nil {
		f.log.Debug("reading the waggler roles from a server failed", zap.Error(err))
		roles = nil
	}
	select {
	case f.fetched <- roles:
	case <-ctx.Done():
	}
}

// holders resolves the Waggler of each capability as this node sees it:
// this node's own roles from its host, not from gossip.
func (f *RoleFollower) holders() map[string]Role {
	control, server := f.cfg.Source.Assigned()
	if !server {
		control = f.control
	}
	members := f.cfg.Source.Members()
	for i := range members {
		if members[i].Name == f.cfg.Self {
			members[i].Roles = f.cfg.Host.Roles()
		}
	}
	return Holders(members, control)
}

// follow attaches every pool to the Waggler of its capability.
func (f *RoleFollower) follow(ctx context.Context) {
	holders := f.holders()
	for c := range f.cfg.Pools.Capabilities() {
		h, ok := holders[c]
		if !ok {
			continue // no Waggler yet: the pool keeps its reports
		}
		if f.cfg.Pools.AttachedTo(c) == TargetKey(h.Node, c, h.Epoch) {
			f.following[c] = h
			continue
		}
		var src TargetSource
		if h.Node == f.cfg.Self {
			if src, ok = f.cfg.Host.Target(c, h.Epoch); !ok {
				continue // assigned here, not taken yet: this host advertises it when it does
			}
		} else {
			s, err := f.cfg.Remote(ctx, h.Node, c, h.Epoch)
			if err != nil {
				f.log.Debug("waggler not reachable yet", zap.String("capability", c), zap.String("waggler_node", h.Node), zap.Error(err))
				continue
			}
			src = s
		}
		f.cfg.Pools.Attach(c, src)
		f.following[c] = h
		f.log.Info("pool follows its waggler", zap.String("capability", c), zap.String("waggler_node", h.Node), zap.Uint64("epoch", h.Epoch))
	}
}
