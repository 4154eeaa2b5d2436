package wag

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

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/internal/metrics"
)

// Directory is what the Router knows of the mesh: which node holds the
// Waggler role of each capability at which epoch (the Raft control state),
// and how to open a session with a node's Waggler host (in-process for
// this node, a stream for another).
type Directory interface {
	// Roles returns every Waggler role: capability → (node, epoch).
	Roles() map[string]Role
	// Quarantined returns the quarantined nodes (sorted).
	Quarantined() []string
	// Changed returns a channel closed at the next change of the roles or
	// the quarantine.
	Changed() <-chan struct{}
	// Open opens a session of owner with node's Waggler host; what the
	// host reports arrives on up.
	Open(ctx context.Context, node string, owner Owner, up Uplink) (Link, error)
}

// Role is one capability's Waggler: the node and the epoch of the
// assignment.
type Role struct {
	Node  string
	Epoch uint64
}

// Link is a leader's session with one node's Waggler host: *Session
// in-process, a stream across nodes.
type Link interface {
	// SetRoles tells the host the roles it holds and the quarantined
	// nodes, whose workers get no work.
	SetRoles(roles map[string]uint64, quarantined []string) error
	Dispatch(hs []Handoff) []error
	Cancel(keys []port.AttemptKey) error
	Ack(seq uint64)
	Close()
}

var _ Link = (*Session)(nil)

// RouterConfig configures a Router.
type RouterConfig struct {
	// Term is the leadership term of the engine the Router serves; it
	// fences every session it opens. Required.
	Term uint64
	// Follower, PartitionCount and Partitions say what the engine owns
	// (see Owner): a follower's Router dispatches the attempts of its
	// partitions and never sets the hosts' roles, which are the Raft
	// leader's to set. PartitionCount 0: the engine owns every instance.
	Follower       bool
	PartitionCount int
	Partitions     map[int]uint64
	// Sink is the engine: results and progress go there. Required.
	Sink port.ResultSink
	// Directory is the mesh as the Router sees it. Required.
	Directory Directory
	Logger    *zap.Logger
	Clock     clock.Clock
	// NodeName is logged with every line.
	NodeName string
	// Holds, when set, tells whether the engine holds an instance. A result
	// for an instance the engine does not hold (yet: a new leader claims
	// its instances over the first moments of its term) is kept and
	// delivered once it does, for up to ResultHold, instead of being
	// ignored — which would make the engine run the attempt again.
	Holds func(uuid.UUID) bool
	// ResultHold bounds how long such a result is kept. Default 60 s.
	ResultHold time.Duration
	// Metrics count the Waggler roles that move; nil: series registered
	// nowhere.
	Metrics *metrics.Wag

	// Slots, when set, returns the slots of the nodes serving a
	// capability: with BacklogPerSlot, the backlog that saturates it
	// (Saturated). Nil: MinBacklog alone.
	Slots func(capability string) int
	// Nodes, when set, names the nodes up now that serve a capability
	// (Router.Nodes leaves out the quarantined ones). Nil: none, and a
	// task with on: every_node fails ("no node serves X").
	Nodes func(capability string) []string
	// BacklogPerSlot, MinBacklog and BacklogStall set when a capability
	// is saturated (see Saturated). Defaults DefaultBacklogPerSlot,
	// DefaultMinBacklog, DefaultBacklogStall.
	BacklogPerSlot int
	MinBacklog     int
	BacklogStall   time.Duration
	// OnDrain, when set, is called (without the Router's lock) when a
	// capability Saturated said was saturated has drained to half its
	// limit: the engine starts the instances it kept waiting for it.
	OnDrain func(capability string)
}

// DefaultResultHold is the default of RouterConfig.ResultHold.
const DefaultResultHold = 60 * time.Second

// Router is the engine's Dispatcher on the leader, for one term: it routes
// each attempt to the Waggler of its capability — on this node or another —
// never by node name, and keeps every attempt it accepted until its result
// arrives. When a capability's Waggler changes (a new epoch) or a session
// with a node is opened again, the Router hands the attempts over again,
// with the worker each runs on when it knows it, so the successor watches
// that worker instead of running the attempt twice. Attempts of a
// capability no node serves wait here, visibly ("waiting: no node serves
// X"), until one does.
//
// The Router holds no durable state: a new leader's engine dispatches
// again whatever is in flight, and the Wagglers ignore what they already
// hold.
type Router struct {
	cfg RouterConfig
	log *zap.Logger

	// life's group holds the Router's goroutines: the role follower, the
	// parked results' deliverer and a link per node.
	life lifecycle.Base

	mu    sync.Mutex
	nodes map[string]*nodeLink
	// routeCore is the routing state and its decisions (routecore.go),
	// guarded by mu: the Router feeds it events and applies the effects
	// it returns (unlock).
	routeCore

	// leadTerm is the Raft term the Router's sessions lead in while it
	// sets roles (routeCore.setsRoles); ownerGen counts SetLeader's
	// changes, so a session opened across one is opened again. Guarded by
	// mu.
	leadTerm uint64
	ownerGen uint64

	ctx    context.Context
	cancel context.CancelFunc
}

var _ port.Dispatcher = (*Router)(nil)

// NewRouter builds a Router; Start runs it.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Term == 0 || cfg.Sink == nil || cfg.Directory == nil {
		return nil, errors.New("wag: a Router needs a term, a sink and a directory")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.ResultHold <= 0 {
		cfg.ResultHold = DefaultResultHold
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewWag(nil)
	}
	if cfg.BacklogPerSlot <= 0 {
		cfg.BacklogPerSlot = DefaultBacklogPerSlot
	}
	if cfg.MinBacklog <= 0 {
		cfg.MinBacklog = DefaultMinBacklog
	}
	if cfg.BacklogStall <= 0 {
		cfg.BacklogStall = DefaultBacklogStall
	}
	var leadTerm uint64
	if !cfg.Follower {
		leadTerm = cfg.Term
	}
	return &Router{
		cfg:       cfg,
		log:       cfg.Logger.Named("router").With(zap.String("node", cfg.NodeName), zap.Uint64("term", cfg.Term)),
		nodes:     make(map[string]*nodeLink),
		routeCore: newRouteCore(cfg.Term, !cfg.Follower, cfg.ResultHold),
		leadTerm:  leadTerm,
	}, nil
}

// Start opens sessions with the nodes that hold Waggler roles (collecting
// the results their Wagglers kept for a leader) and follows the roles.
func (r *Router) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.life.Start("wag: router"); err != nil {
		return err
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	changed := r.cfg.Directory.Changed()
	roles := r.cfg.Directory.Roles()
	r.quar = r.cfg.Directory.Quarantined()
	r.mu.Unlock()
	r.applyRoles(roles) // before Start returns: a dispatch right after finds the roles
	r.mu.Lock()
	r.life.Go(func() { r.followRoles(changed) })
	if r.cfg.Holds != nil {
		r.life.Go(r.deliverParked)
	}
	return nil
}

// parkedRetry is how often parked results are offered again.
const parkedRetry = 100 * time.Millisecond

// deliverParked offers parked results to the engine as it claims their
// instances, and gives up on those kept for ResultHold.
func (r *Router) deliverParked() {
	t := clock.Idle(r.cfg.Clock)
	defer t.Stop()
	for {
		t.Reset(parkedRetry)
		select {
		case <-r.ctx.Done():
			return
		case <-t.C():
		}
		now := r.cfg.Clock.Now()
		r.mu.Lock()
		r.unlock(r.onTick(now, r.cfg.Holds))
	}
}

// Stop closes every session and waits, until ctx ends, for the Router's
// goroutines. Every call waits for the first.
func (r *Router) Stop(ctx context.Context) error {
	return r.life.Stop(ctx, func(lifecycle.State) error {
		r.mu.Lock()
		cancel := r.cancel
		nodes := slices.Collect(maps.Values(r.nodes))
		r.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		for _, n := range nodes {
			n.wake()
		}
		return nil
	})
}

// owner is who the Router's sessions are of now, and the generation of
// that (SetLeader changes it). Called with r.mu held.
func (r *Router) owner() (Owner, uint64) {
	o := Owner{Term: r.cfg.Term, Follower: !r.setsRoles, Count: r.cfg.PartitionCount, Partitions: r.cfg.Partitions}
	if r.setsRoles {
		o.Term = r.leadTerm
	}
	return o, r.ownerGen
}

// SetLeader makes the Router's sessions those of the Raft leader of term
// — they set the hosts' roles and carry their observations — or, with
// term 0, those of a follower owner, when the leadership moves while the
// engine's partitions stay. Every session is opened again under the new
// owner and everything in flight handed over again (Wagglers ignore what
// they hold).
func (r *Router) SetLeader(term uint64) {
	r.mu.Lock()
	if (term != 0) == r.setsRoles && term == r.leadTerm {
		r.mu.Unlock()
		return
	}
	r.setsRoles, r.leadTerm = term != 0, term
	r.ownerGen++
	links := slices.Collect(maps.Values(r.nodes))
	r.mu.Unlock()
	r.log.Info("router sessions opened again", zap.Bool("leader", term != 0), zap.Uint64("leader_term", term))
	for _, n := range links {
		n.close()
		n.wake()
	}
}

// followRoles applies every change of the Waggler roles after the one
// whose channel is changed.
func (r *Router) followRoles(changed <-chan struct{}) {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-changed:
		}
		changed = r.cfg.Directory.Changed()
		r.applyQuarantine(r.cfg.Directory.Quarantined())
		r.applyRoles(r.cfg.Directory.Roles())
	}
}

// applyQuarantine records the quarantined nodes; when they changed, every
// node with a session is told (with its roles).
func (r *Router) applyQuarantine(q []string) {
	r.mu.Lock()
	r.unlock(r.onQuarantine(q))
}

// applyRoles routes every attempt to its capability's current Waggler and
// tells every node its role set.
func (r *Router) applyRoles(roles map[string]Role) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if r.life.State().Stopped() {
		r.mu.Unlock()
		return
	}
	r.unlock(r.onRoles(roles, now))
}

// Dispatch accepts attempts of the Router's term (older terms are refused
// with port.ErrStaleTerm) and routes each to its capability's Waggler.
func (r *Router) Dispatch(_ context.Context, tasks []port.TaskDispatch) []error {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if !r.life.Running() {
		r.mu.Unlock()
		return allErr(len(tasks), ErrNotRunning)
	}
	fx := r.onDispatch(tasks, now)
	r.unlock(fx)
	return fx.errs
}

// Nodes implements port.Dispatcher: the nodes up now that serve
// capability (RouterConfig.Nodes), without the quarantined ones, sorted.
func (r *Router) Nodes(capability string) []string {
	if r.cfg.Nodes == nil {
		return nil
	}
	nodes := slices.Clone(r.cfg.Nodes(capability))
	r.mu.Lock()
	quar := r.quar
	r.mu.Unlock()
	nodes = slices.DeleteFunc(nodes, func(n string) bool {
		_, found := slices.BinarySearch(quar, n)
		return found
	})
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// Cancel forgets attempts; those a Waggler holds are cancelled there.
func (r *Router) Cancel(_ context.Context, term uint64, keys []port.AttemptKey) error {
	if term < r.cfg.Term {
		return fmt.Errorf("%w: term %d, this router serves %d", port.ErrStaleTerm, term, r.cfg.Term)
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	r.unlock(r.onCancel(keys, now))
	return nil
}

// unlock applies fx, the effects of an event the core took under r.mu:
// it starts the links of new nodes and counts the Wagglers that moved,
// releases r.mu, and then wakes the links and calls the engine — which is
// never called with the lock held.
func (r *Router) unlock(fx routeFx) {
	for _, name := range fx.start {
		n := &nodeLink{r: r, name: name, wakeCh: make(chan struct{}, 1)}
		r.nodes[name] = n
		if r.life.Running() {
			r.life.Go(n.run)
		}
	}
	for _, c := range fx.failovers {
		r.cfg.Metrics.Capability(c).WagglerFailovers.Inc()
	}
	wake := make([]*nodeLink, 0, len(fx.wake))
	for _, name := range fx.wake {
		wake = append(wake, r.nodes[name])
	}
	r.mu.Unlock()
	for _, n := range wake {
		n.wake()
	}
	ctx := context.Background()
	for _, p := range fx.progress {
		r.cfg.Sink.TaskProgress(ctx, p)
	}
	if r.cfg.OnDrain != nil {
		for _, c := range fx.drained {
			r.cfg.OnDrain(c)
		}
	}
	for _, res := range fx.expired {
		r.log.Debug("result for an instance the engine never held: dropped", zap.Stringer("instance", res.InstanceID),
			zap.String("task", res.ExecutionID))
	}
	for _, res := range slices.Concat(fx.failed, fx.results) {
		r.cfg.Sink.TaskResult(ctx, res)
	}
}

// nodeLink is the Router's side of one node: its session (opened, and
// opened again after it breaks), on which it sends what the core queued
// for the node (nextSend). One goroutine per node, so a slow or
// unreachable node holds up only its own capabilities.
type nodeLink struct {
	r      *Router
	name   string
	wakeCh chan struct{}

	link Link // guarded by r.mu; what to send on it is in r.queues[name]
}

func (n *nodeLink) wake() {
	select {
	case n.wakeCh <- struct{}{}:
	default:
	}
}

const (
	linkBackoffMin = 20 * time.Millisecond
	linkBackoffMax = 2 * time.Second
)

// run keeps the node's session open and sends what is queued.
func (n *nodeLink) run() {
	r := n.r
	backoff := linkBackoffMin
	timer := clock.Idle(r.cfg.Clock)
	defer timer.Stop()
	for {
		err := n.step()
		if r.ctx.Err() != nil {
			n.close()
			return
		}
		if err != nil {
			r.log.Debug("waggler host not reachable; retrying", zap.String("waggler_node", n.name), zap.Duration("backoff", backoff), zap.Error(err))
			timer.Reset(backoff)
			backoff = min(2*backoff, linkBackoffMax)
			select {
			case <-r.ctx.Done():
			case <-timer.C():
			}
			continue
		}
		backoff = linkBackoffMin
		select {
		case <-r.ctx.Done():
		case <-n.wakeCh:
		case <-n.ended():
			// The session's stream ended with nothing to send on it: open
			// it again now, not at the next send (there may be none: a
			// node that lost its roles), for the host to send its results
			// not acknowledged yet.
			r.log.Debug("waggler session ended; opening it again", zap.String("waggler_node", n.name))
			n.close()
			timer.Reset(linkReopenDelay)
			select {
			case <-r.ctx.Done():
			case <-timer.C():
			}
		}
	}
}

// linkReopenDelay is the pause before a session whose stream ended is
// opened again, so that a host that ends every stream is not hammered.
const linkReopenDelay = 100 * time.Millisecond

// ended returns a channel closed when the current session's stream ends,
// for links that tell (LeadLink); nil otherwise.
func (n *nodeLink) ended() <-chan struct{} {
	n.r.mu.Lock()
	defer n.r.mu.Unlock()
	if d, ok := n.link.(interface{ Done() <-chan struct{} }); ok {
		return d.Done()
	}
	return nil
}

// close ends the session.
func (n *nodeLink) close() {
	n.r.mu.Lock()
	l := n.link
	n.link = nil
	n.r.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// step opens the session if needed, then sends what the core has for the
// node (roles, cancels, attempts) and reports how it went. An error means:
// try again after a backoff.
func (n *nodeLink) step() error {
	r := n.r
	l, err := n.open()
	if err != nil {
		return err
	}
	r.mu.Lock()
	s := r.nextSend(n.name)
	r.mu.Unlock()
	if s.empty() {
		return nil
	}
	out := send(l, s)
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	fx := r.onSent(n.name, s, out, now)
	r.unlock(fx)
	for _, res := range fx.failed {
		r.log.Warn("an attempt cannot be handed to its waggler's node: it fails", zap.String("waggler_node", n.name),
			zap.String("instance", res.InstanceID.String()), zap.String("execution", res.ExecutionID), zap.String("error", res.Error))
	}
	if fx.close {
		n.close() // the next step opens a new session
	}
	return fx.err
}

// open returns the node's session, opening one if there is none.
func (n *nodeLink) open() (Link, error) {
	r := n.r
	r.mu.Lock()
	l := n.link
	r.mu.Unlock()
	if l != nil {
		return l, nil
	}
	r.mu.Lock()
	owner, gen := r.owner()
	r.mu.Unlock()
	l, err := r.cfg.Directory.Open(r.ctx, n.name, owner, &routerUplink{n: n})
	if err != nil {
		return nil, fmt.Errorf("opening a session with %s: %w", n.name, err)
	}
	r.mu.Lock()
	if gen != r.ownerGen { // SetLeader meanwhile: open it again as the new owner
		r.mu.Unlock()
		l.Close()
		return nil, errors.New("the router's owner changed while its session opened")
	}
	n.link = l
	r.onOpened(n.name)
	r.mu.Unlock()
	r.log.Debug("waggler session opened", zap.String("waggler_node", n.name))
	return l, nil
}

// send makes the calls of s on l, up to the first that fails.
func send(l Link, s routeSend) (out sendOutcome) {
	if s.roles != nil {
		if out.rolesErr = l.SetRoles(s.roles, s.quar); out.rolesErr != nil {
			return out
		}
	}
	if len(s.cancels) > 0 {
		if out.cancelErr = l.Cancel(s.cancels); out.cancelErr != nil {
			return out
		}
	}
	if len(s.hs) > 0 {
		out.errs = l.Dispatch(s.hs)
	}
	return out
}

// routerUplink receives what one node's Wagglers report.
type routerUplink struct{ n *nodeLink }

func (u *routerUplink) Results(rs []SeqResult) error {
	r := u.n.r
	var now time.Time
	if r.cfg.Holds != nil {
		now = r.cfg.Clock.Now() // for the results it parks
	}
	var last uint64
	for _, res := range rs {
		r.mu.Lock()
		r.unlock(r.onResult(res.TaskResult, now, r.cfg.Holds))
		last = res.Seq
	}
	r.mu.Lock()
	l := u.n.link
	r.mu.Unlock()
	if l != nil {
		l.Ack(last)
	}
	return nil
}

func (u *routerUplink) Progress(ps []port.TaskProgress) {
	ctx := context.Background()
	for _, p := range ps {
		u.n.r.cfg.Sink.TaskProgress(ctx, p)
	}
}

func (u *routerUplink) Started(ss []Started) {
	r := u.n.r
	r.mu.Lock()
	r.onStarted(ss)
	r.mu.Unlock()
}

// Waiting returns how many attempts wait for a node to serve their
// capability, by capability.
func (r *Router) Waiting() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.waiting))
	for c, ws := range r.waiting {
		out[c] = len(ws)
	}
	return out
}
