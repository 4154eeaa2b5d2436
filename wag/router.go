package wag

import (
	"cmp"
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
	// Open opens a session of term with node's Waggler host; what the host
	// reports arrives on up.
	Open(ctx context.Context, node string, term uint64, up Uplink) (Link, error)
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
	Cancel(keys []engine.AttemptKey) error
	Ack(seq uint64)
	Close()
}

var _ Link = (*Session)(nil)

// RouterConfig configures a Router.
type RouterConfig struct {
	// Term is the leadership term of the engine the Router serves; it
	// fences every session it opens. Required.
	Term uint64
	// Sink is the engine: results and progress go there. Required.
	Sink engine.ResultSink
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

	mu      sync.Mutex
	state   lifecycle.State
	atts    map[engine.AttemptKey]*att
	waiting map[string][]*att // capability → attempts no Waggler takes yet
	nodes   map[string]*nodeLink
	roles   map[string]Role
	quar    []string // quarantined nodes, sorted
	seq     uint64   // of the last attempt accepted
	// parked are results for instances the engine does not hold yet.
	parked []parkedResult
	// cancelled remembers recent cancels: a Waggler that takes a role
	// (or a session opened again) is told them, so that a worker
	// registering a copy of a cancelled attempt with it is told to stop
	// instead of having it adopted — the cancel may have reached only the
	// predecessor, or no Waggler at all.
	cancelled  map[engine.AttemptKey]cancelledAtt
	cancelledQ []engine.AttemptKey // in the order cancelled
	// announce is "waiting" progress to send once the lock is released.
	announce []engine.TaskProgress
	// bl counts the attempts in flight per capability (backlog.go).
	bl backlog

	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// cancelledAtt is a cancel the Router remembers for rememberCancels.
type cancelledAtt struct {
	capability string
	at         time.Time
}

// How long, and how many, cancels the Router remembers.
const (
	rememberCancels    = 2 * time.Minute
	maxRememberCancels = 100_000
)

// att is one attempt the Router accepted and has no result for.
type att struct {
	seq   uint64 // order of acceptance: attempts are handed over in it
	d     engine.TaskDispatch
	node  string // the node it is queued for or was handed to; "" while waiting
	epoch uint64
	sent  bool // the node's Waggler accepted it
	// handed: it went out to a Waggler at least once. Whether that one
	// took it may be unknown (the answer lost with a broken stream, or the
	// attempt moved while the handoff was on its way), so handed to
	// another one without a known worker, it may run already
	// (Handoff.MayRun).
	handed   bool
	worker   string // the worker that runs it, when a Waggler said so
	gen      uint64
	announce bool // "waiting" progress sent
}

var _ engine.Dispatcher = (*Router)(nil)

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
	return &Router{
		cfg:     cfg,
		log:     cfg.Logger.Named("router").With(zap.String("node", cfg.NodeName), zap.Uint64("term", cfg.Term)),
		atts:    make(map[engine.AttemptKey]*att),
		waiting: make(map[string][]*att),
		nodes:   make(map[string]*nodeLink),
		roles:   map[string]Role{},
		bl:      newBacklog(),
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
	if err := r.state.Start("wag: router"); err != nil {
		return err
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	changed := r.cfg.Directory.Changed()
	roles := r.cfg.Directory.Roles()
	r.quar = r.cfg.Directory.Quarantined()
	r.mu.Unlock()
	r.applyRoles(roles) // before Start returns: a dispatch right after finds the roles
	r.mu.Lock()
	r.wg.Go(func() { r.followRoles(changed) })
	if r.cfg.Holds != nil {
		r.wg.Go(r.deliverParked)
	}
	return nil
}

// parkedResult is a result kept until the engine holds its instance.
type parkedResult struct {
	res   engine.TaskResult
	since time.Time
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
		var deliver []engine.TaskResult
		r.mu.Lock()
		keep := r.parked[:0]
		for _, p := range r.parked {
			switch {
			case r.cfg.Holds(p.res.InstanceID):
				deliver = append(deliver, p.res)
			case now.Sub(p.since) >= r.cfg.ResultHold:
				r.log.Debug("result for an instance the engine never held: dropped", zap.Stringer("instance", p.res.InstanceID),
					zap.String("task", p.res.ExecutionID))
			default:
				keep = append(keep, p)
			}
		}
		clear(r.parked[len(keep):])
		r.parked = keep
		r.mu.Unlock()
		for _, res := range deliver {
			r.cfg.Sink.TaskResult(context.Background(), res)
		}
	}
}

// Stop closes every session and waits for the Router's goroutines. It is
// idempotent.
func (r *Router) Stop(context.Context) error {
	r.mu.Lock()
	if r.state.Stop() == lifecycle.Stopped {
		r.mu.Unlock()
		return nil
	}
	cancel := r.cancel
	nodes := slices.Collect(maps.Values(r.nodes))
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, n := range nodes {
		n.wake()
	}
	r.wg.Wait()
	return nil
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
	defer r.mu.Unlock()
	if slices.Equal(q, r.quar) {
		return
	}
	r.quar = q
	for _, n := range r.nodes {
		n.rolesChanged()
		n.wake()
	}
}

// applyRoles routes every attempt to its capability's current Waggler and
// tells every node its role set.
func (r *Router) applyRoles(roles map[string]Role) {
	r.mu.Lock()
	defer r.unlock()
	if r.state.Stopped() {
		return
	}
	old := r.roles
	r.roles = roles
	// Every node that holds or held a role gets its (new) set.
	touched := map[string]bool{}
	for c, ro := range roles {
		if o, ok := old[c]; !ok || o != ro {
			touched[ro.Node] = true
			if ok {
				touched[o.Node] = true
			}
			if ok && o.Node != ro.Node {
				r.cfg.Metrics.Capability(c).WagglerFailovers.Inc()
			}
		}
	}
	for c, o := range old {
		if _, ok := roles[c]; !ok {
			touched[o.Node] = true
		}
	}
	for node := range touched {
		r.nodeLocked(node).rolesChanged()
	}
	// A new Waggler learns the recent cancels of its capability.
	r.pruneCancelledLocked(r.cfg.Clock.Now())
	for k, c := range r.cancelled {
		if ro, ok := roles[c.capability]; ok && old[c.capability] != ro {
			n := r.nodeLocked(ro.Node)
			n.cancels = append(n.cancels, k)
		}
	}
	// Attempts whose Waggler moved are handed to the new one.
	for _, a := range r.atts {
		ro, ok := roles[a.d.Capability]
		switch {
		case a.node == "" && ok:
			r.removeWaitingLocked(a)
			r.routeLocked(a, ro)
		case a.node != "" && (!ok || ro.Node != a.node || ro.Epoch != a.epoch):
			r.nodes[a.node].forget(a)
			if ok {
				r.routeLocked(a, ro)
			} else {
				r.waitLocked(a)
			}
		}
	}
	for _, n := range r.nodes {
		n.wake()
	}
}

// Dispatch accepts attempts of the Router's term (older terms are refused
// with engine.ErrStaleTerm) and routes each to its capability's Waggler.
func (r *Router) Dispatch(_ context.Context, tasks []engine.TaskDispatch) []error {
	var errs []error
	r.mu.Lock()
	defer r.unlock()
	if !r.state.Running() {
		return allErr(len(tasks), ErrNotRunning)
	}
	for i, d := range tasks {
		if d.Term != r.cfg.Term {
			if errs == nil {
				errs = make([]error, len(tasks))
			}
			errs[i] = fmt.Errorf("%w: this router serves term %d, the attempt is of term %d", engine.ErrStaleTerm, r.cfg.Term, d.Term)
			continue
		}
		if _, dup := r.atts[d.AttemptKey]; dup {
			continue
		}
		r.seq++
		// An attempt an earlier term had in flight may run on a worker
		// already: as if this Router had handed it out (Handoff.MayRun).
		a := &att{seq: r.seq, d: d, handed: d.Resumed}
		r.addLocked(a)
		if ro, ok := r.roles[d.Capability]; ok {
			r.routeLocked(a, ro)
		} else {
			r.waitLocked(a)
		}
	}
	for _, n := range r.nodes {
		n.wake()
	}
	return errs
}

// Cancel forgets attempts; those a Waggler holds are cancelled there.
func (r *Router) Cancel(_ context.Context, term uint64, keys []engine.AttemptKey) error {
	if term < r.cfg.Term {
		return fmt.Errorf("%w: term %d, this router serves %d", engine.ErrStaleTerm, term, r.cfg.Term)
	}
	r.mu.Lock()
	defer r.unlock() // reports what the cancels drained
	now := r.cfg.Clock.Now()
	r.pruneCancelledLocked(now)
	for _, k := range keys {
		a, ok := r.atts[k]
		if !ok {
			continue
		}
		r.dropLocked(a, false)
		if r.cancelled == nil {
			r.cancelled = map[engine.AttemptKey]cancelledAtt{}
		}
		if _, dup := r.cancelled[k]; !dup && len(r.cancelled) < maxRememberCancels {
			r.cancelled[k] = cancelledAtt{capability: a.d.Capability, at: now}
			r.cancelledQ = append(r.cancelledQ, k)
		}
		if a.node == "" {
			r.removeWaitingLocked(a)
			continue
		}
		n := r.nodes[a.node]
		n.cancel(a)
		n.wake()
	}
	return nil
}

// routeLocked queues a for the node of its capability's Waggler.
func (r *Router) routeLocked(a *att, ro Role) {
	a.node, a.epoch, a.sent = ro.Node, ro.Epoch, false
	r.nodeLocked(ro.Node).queue(a)
}

// waitLocked parks a until a node serves its capability.
func (r *Router) waitLocked(a *att) {
	a.node, a.sent = "", false
	r.waiting[a.d.Capability] = append(r.waiting[a.d.Capability], a)
	if !a.announce {
		a.announce = true
		r.announce = append(r.announce, engine.TaskProgress{AttemptKey: a.d.AttemptKey,
			Message: "waiting: no node serves " + a.d.Capability, At: r.cfg.Clock.Now()})
	}
}

// unlock releases r.mu and then sends the "waiting" progress queued under
// it and reports the capabilities drained under it (OnDrain): the engine
// is never called with the lock held.
func (r *Router) unlock() {
	ps := r.announce
	r.announce = nil
	drained := r.bl.drained
	r.bl.drained = nil
	r.mu.Unlock()
	for _, p := range ps {
		r.cfg.Sink.TaskProgress(context.Background(), p)
	}
	if r.cfg.OnDrain != nil {
		for _, c := range drained {
			r.cfg.OnDrain(c)
		}
	}
}

func (r *Router) removeWaitingLocked(a *att) {
	ws := r.waiting[a.d.Capability]
	if i := slices.Index(ws, a); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(r.waiting, a.d.Capability)
	} else {
		r.waiting[a.d.Capability] = ws
	}
}

// nodeLocked returns the link of node, starting its goroutine on first use.
func (r *Router) nodeLocked(node string) *nodeLink {
	n := r.nodes[node]
	if n == nil {
		n = &nodeLink{r: r, name: node, wakeCh: make(chan struct{}, 1), queued: map[engine.AttemptKey]*att{}}
		r.nodes[node] = n
		if r.state.Running() {
			r.wg.Go(n.run)
		}
	}
	return n
}

// rolesOfLocked is the role set of node.
func (r *Router) rolesOfLocked(node string) map[string]uint64 {
	out := map[string]uint64{}
	for c, ro := range r.roles {
		if ro.Node == node {
			out[c] = ro.Epoch
		}
	}
	return out
}

// nodeLink is the Router's side of one node: its session (opened, and
// opened again after it breaks), the attempts to hand it, and the cancels
// to send. One goroutine per node, so a slow or unreachable node holds up
// only its own capabilities.
type nodeLink struct {
	r      *Router
	name   string
	wakeCh chan struct{}

	// guarded by r.mu
	link    Link
	queued  map[engine.AttemptKey]*att // to hand over (again)
	cancels []engine.AttemptKey
	// rolesGen counts changes of the node's role set (and quarantine
	// list); rolesSent is the count its host was last told. A generation,
	// not a flag: a change that lands while SetRoles is on the wire must
	// not be cleared by that call's success.
	rolesGen, rolesSent uint64
}

func (n *nodeLink) wake() {
	select {
	case n.wakeCh <- struct{}{}:
	default:
	}
}

func (n *nodeLink) queue(a *att)  { n.queued[a.d.AttemptKey] = a }
func (n *nodeLink) forget(a *att) { delete(n.queued, a.d.AttemptKey) }
func (n *nodeLink) rolesChanged() { n.rolesGen++ }

func (n *nodeLink) cancel(a *att) {
	if _, ok := n.queued[a.d.AttemptKey]; ok && !a.sent {
		delete(n.queued, a.d.AttemptKey)
		return
	}
	delete(n.queued, a.d.AttemptKey)
	n.cancels = append(n.cancels, a.d.AttemptKey)
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

// step opens the session if needed, then sends roles, cancels and queued
// attempts. An error means: try again after a backoff.
func (n *nodeLink) step() error {
	r := n.r
	r.mu.Lock()
	l := n.link
	r.mu.Unlock()
	if l == nil {
		up := &routerUplink{n: n}
		opened, err := r.cfg.Directory.Open(r.ctx, n.name, r.cfg.Term, up)
		if err != nil {
			return fmt.Errorf("opening a session with %s: %w", n.name, err)
		}
		r.mu.Lock()
		n.link, l = opened, opened
		// A new session: the host may have lost what it held (a restart),
		// so everything of this node is handed over again (Wagglers ignore
		// what they hold), its roles are set again, and it learns the
		// recent cancels of its capabilities.
		n.rolesChanged()
		mine := r.rolesOfLocked(n.name)
		for k, c := range r.cancelled {
			if _, ok := mine[c.capability]; ok {
				n.cancels = append(n.cancels, k)
			}
		}
		for _, a := range r.atts {
			if a.node == n.name {
				a.sent = false
				n.queued[a.d.AttemptKey] = a
			}
		}
		r.mu.Unlock()
		r.log.Debug("waggler session opened", zap.String("waggler_node", n.name))
	}

	r.mu.Lock()
	var (
		roles    map[string]uint64
		quar     []string
		rolesGen = n.rolesGen
	)
	if n.rolesSent != rolesGen {
		roles, quar = r.rolesOfLocked(n.name), r.quar
	}
	cancels := n.cancels
	n.cancels = nil
	var batch []*att
	for _, a := range n.queued {
		if !a.sent {
			batch = append(batch, a)
		}
	}
	slices.SortFunc(batch, func(x, y *att) int { return cmp.Compare(x.seq, y.seq) })
	hs := make([]Handoff, len(batch))
	handed := make([]bool, len(batch)) // before this step
	for i, a := range batch {
		hs[i] = Handoff{TaskDispatch: a.d, Epoch: a.epoch, WorkerID: a.worker, Generation: a.gen, MayRun: a.handed && a.worker == ""}
		handed[i], a.handed = a.handed, true // from now on, unless the Waggler refuses it
	}
	r.mu.Unlock()

	if roles != nil {
		if err := l.SetRoles(roles, quar); err != nil {
			return n.broken(err)
		}
		r.mu.Lock()
		n.rolesSent = rolesGen // a change since is sent at the next step
		r.mu.Unlock()
	}
	if len(cancels) > 0 {
		if err := l.Cancel(cancels); err != nil {
			r.mu.Lock()
			n.cancels = append(cancels, n.cancels...)
			r.mu.Unlock()
			return n.broken(err)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	errs := l.Dispatch(hs)
	var (
		retry  bool
		first  error
		failed []engine.TaskResult
	)
	r.mu.Lock()
	for i, a := range batch {
		var err error
		if errs != nil {
			err = errs[i]
		}
		if errors.Is(err, ErrNotWaggler) || errors.Is(err, ErrBusy) {
			a.handed = handed[i] // it did not take it
		}
		if r.atts[a.d.AttemptKey] != a || a.node != n.name {
			continue // cancelled or moved meanwhile
		}
		switch {
		case err == nil:
			a.sent = true
			delete(n.queued, a.d.AttemptKey)
		case errors.Is(err, engine.ErrStaleTerm):
			// A newer leader spoke to this host: this router is deposed.
			delete(n.queued, a.d.AttemptKey)
		case errors.Is(err, ErrTooLarge):
			// It would fail the same way every time: the attempt fails.
			r.dropLocked(a, true)
			n.forget(a)
			now := r.cfg.Clock.Now()
			failed = append(failed, engine.TaskResult{AttemptKey: a.d.AttemptKey, Error: err.Error(), StartedAt: now, FinishedAt: now})
		default: // not the Waggler (yet), busy, or the stream broke
			retry = true
			if first == nil {
				first = err
			}
		}
	}
	r.unlock()
	for _, res := range failed {
		r.log.Warn("an attempt cannot be handed to its waggler's node: it fails", zap.String("waggler_node", n.name),
			zap.String("instance", res.InstanceID.String()), zap.String("execution", res.ExecutionID), zap.String("error", res.Error))
		r.cfg.Sink.TaskResult(context.Background(), res)
	}
	if retry {
		if isBroken(first) {
			return n.broken(first)
		}
		return first
	}
	return nil
}

// broken drops a session that failed; the next step opens a new one.
func (n *nodeLink) broken(err error) error {
	n.close()
	return err
}

// isBroken reports whether a dispatch error means the session is gone.
func isBroken(err error) bool {
	return err != nil && !errors.Is(err, ErrNotWaggler) && !errors.Is(err, ErrBusy)
}

// routerUplink receives what one node's Wagglers report.
type routerUplink struct{ n *nodeLink }

func (u *routerUplink) Results(rs []SeqResult) error {
	r := u.n.r
	ctx := context.Background()
	var last uint64
	for _, res := range rs {
		r.mu.Lock()
		if a := r.atts[res.AttemptKey]; a != nil {
			r.dropLocked(a, true)
			if a.node != "" {
				if n := r.nodes[a.node]; n != nil {
					n.forget(a)
				}
			} else {
				r.removeWaitingLocked(a)
			}
		}
		park := r.cfg.Holds != nil && !r.cfg.Holds(res.InstanceID)
		if park {
			r.parked = append(r.parked, parkedResult{res: res.TaskResult, since: r.cfg.Clock.Now()})
		}
		r.unlock()
		if !park {
			r.cfg.Sink.TaskResult(ctx, res.TaskResult)
		}
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

func (u *routerUplink) Progress(ps []engine.TaskProgress) {
	ctx := context.Background()
	for _, p := range ps {
		u.n.r.cfg.Sink.TaskProgress(ctx, p)
	}
}

func (u *routerUplink) Started(ss []Started) {
	r := u.n.r
	r.mu.Lock()
	for _, s := range ss {
		if a := r.atts[s.Key]; a != nil {
			a.worker, a.gen = s.WorkerID, s.Generation
		}
	}
	r.mu.Unlock()
}

// pruneCancelledLocked forgets cancels older than rememberCancels; r.mu
// held.
func (r *Router) pruneCancelledLocked(now time.Time) {
	i := 0
	for ; i < len(r.cancelledQ); i++ {
		k := r.cancelledQ[i]
		if now.Sub(r.cancelled[k].at) < rememberCancels {
			break
		}
		delete(r.cancelled, k)
	}
	if i > 0 {
		r.cancelledQ = slices.Delete(r.cancelledQ, 0, i)
	}
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
