package wag

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// routeCore is the Router's routing state and every decision it makes, with
// no I/O: no clock (time comes in with the events), no lock, no goroutine,
// no Link. Each event method (on…) changes the state and returns the
// effects — what to send to the engine, which node links to start and
// wake, which to close — and the Router (router.go) feeds it events under
// its lock and applies the effects after releasing it, as the Waggler does
// (waggler.go) and as etcd's raft RawNode does.
//
// A node's link asks nextSend what to send on its session, sends it, and
// reports how that went with onSent.
type routeCore struct {
	term uint64
	// setsRoles: the Router is the Raft leader's, which tells the hosts
	// their roles; a follower owner's Router only follows them.
	setsRoles  bool
	atts       map[port.AttemptKey]*att
	waiting    map[string][]*att // capability → attempts no Waggler takes yet
	queues     map[string]*nodeQueue
	roles      map[string]Role
	quar       []string // quarantined nodes, sorted
	seq        uint64   // of the last attempt accepted
	resultHold time.Duration
	// parked are results for instances the engine does not hold yet.
	parked []parkedResult
	// cancelled remembers recent cancels: a Waggler that takes a role
	// (or a session opened again) is told them, so that a worker
	// registering a copy of a cancelled attempt with it is told to stop
	// instead of having it adopted — the cancel may have reached only the
	// predecessor, or no Waggler at all.
	cancelled  map[port.AttemptKey]cancelledAtt
	cancelledQ []port.AttemptKey // in the order cancelled
	// bl counts the attempts in flight per capability (backlog.go).
	bl backlog

	fx routeFx // of the event being handled
}

func newRouteCore(term uint64, setsRoles bool, resultHold time.Duration) routeCore {
	return routeCore{
		term:       term,
		setsRoles:  setsRoles,
		resultHold: resultHold,
		atts:       make(map[port.AttemptKey]*att),
		waiting:    make(map[string][]*att),
		queues:     make(map[string]*nodeQueue),
		roles:      map[string]Role{},
		bl:         newBacklog(),
	}
}

// routeFx are the effects of one event, applied by the Router once its
// lock is released (but start and failovers, applied under it).
type routeFx struct {
	errs      []error             // Dispatch's answer; nil: every attempt taken
	start     []string            // nodes routed to for the first time: their link starts
	failovers []string            // capabilities whose Waggler moved to another node
	wake      []string            // nodes with something (maybe) new to send
	progress  []port.TaskProgress // "waiting" progress for the engine
	drained   []string            // capabilities drained (OnDrain)
	expired   []port.TaskResult   // parked results given up on (logged)
	failed    []port.TaskResult   // attempts that fail here (logged, then to the engine)
	results   []port.TaskResult   // to the engine
	// Of onSent: the session is broken (close it), and what went wrong
	// (the link retries after a backoff).
	close bool
	err   error
}

// take returns the effects collected since the last take.
func (c *routeCore) take() routeFx {
	fx := c.fx
	c.fx = routeFx{}
	fx.drained, c.bl.drained = c.bl.drained, nil
	return fx
}

// nodeQueue is what the Router has to send one node: the attempts to hand
// it (again), the cancels, and whether its role set changed.
type nodeQueue struct {
	queued  map[port.AttemptKey]*att
	cancels []port.AttemptKey
	// rolesGen counts changes of the node's role set (and quarantine
	// list); rolesSent is the count its host was last told. A generation,
	// not a flag: a change that lands while SetRoles is on the wire must
	// not be cleared by that call's success.
	rolesGen, rolesSent uint64
}

// att is one attempt the Router accepted and has no result for.
type att struct {
	seq   uint64 // order of acceptance: attempts are handed over in it
	d     port.TaskDispatch
	node  string // the node it is queued for or was handed to; "" while waiting
	epoch uint64
	sent  bool // the node's Waggler accepted it
	// wire counts the handoffs of it on their way (nextSend to onSent):
	// cancelled meanwhile, it may be on a Waggler already.
	wire int
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

// parkedResult is a result kept until the engine holds its instance.
type parkedResult struct {
	res   port.TaskResult
	since time.Time
}

// onDispatch accepts attempts of the core's term (the others get
// port.ErrStaleTerm in fx.errs) and routes each to its capability's
// Waggler, or keeps it waiting.
func (c *routeCore) onDispatch(tasks []port.TaskDispatch, now time.Time) routeFx {
	for i, d := range tasks {
		if d.Term != c.term {
			if c.fx.errs == nil {
				c.fx.errs = make([]error, len(tasks))
			}
			c.fx.errs[i] = fmt.Errorf("%w: this router serves term %d, the attempt is of term %d", port.ErrStaleTerm, c.term, d.Term)
			continue
		}
		if _, dup := c.atts[d.AttemptKey]; dup {
			continue
		}
		c.seq++
		// An attempt an earlier term had in flight may run on a worker
		// already: as if this Router had handed it out (Handoff.MayRun).
		a := &att{seq: c.seq, d: d, handed: d.Resumed}
		c.add(a, now)
		if ro, ok := c.roles[d.Capability]; ok {
			c.route(a, ro)
		} else {
			c.wait(a, now)
		}
	}
	c.wakeAll()
	return c.take()
}

// onCancel forgets attempts; those a node was sent (or may have been) are
// cancelled there.
func (c *routeCore) onCancel(keys []port.AttemptKey, now time.Time) routeFx {
	c.pruneCancelled(now)
	for _, k := range keys {
		a, ok := c.atts[k]
		if !ok {
			continue
		}
		c.drop(a, false)
		if c.cancelled == nil {
			c.cancelled = map[port.AttemptKey]cancelledAtt{}
		}
		if _, dup := c.cancelled[k]; !dup && len(c.cancelled) < maxRememberCancels {
			c.cancelled[k] = cancelledAtt{capability: a.d.Capability, at: now}
			c.cancelledQ = append(c.cancelledQ, k)
		}
		if a.node == "" {
			c.removeWaiting(a)
			continue
		}
		q := c.queues[a.node]
		if _, queued := q.queued[k]; !queued || a.sent || a.wire > 0 {
			q.cancels = append(q.cancels, k)
		}
		delete(q.queued, k)
		if !slices.Contains(c.fx.wake, a.node) {
			c.fx.wake = append(c.fx.wake, a.node)
		}
	}
	return c.take()
}

// onQuarantine records the quarantined nodes (sorted); when they changed,
// every node is told them again (with its roles).
func (c *routeCore) onQuarantine(q []string) routeFx {
	if slices.Equal(q, c.quar) {
		return c.take()
	}
	c.quar = q
	for _, n := range c.queues {
		n.rolesGen++
	}
	c.wakeAll()
	return c.take()
}

// onRoles routes every attempt to its capability's current Waggler and has
// every node whose role set changed told its new set; a new Waggler is
// told the recent cancels of its capability.
func (c *routeCore) onRoles(roles map[string]Role, now time.Time) routeFx {
	old := c.roles
	c.roles = roles
	// Every node that holds or held a role gets its (new) set.
	touched := map[string]bool{}
	for cp, ro := range roles {
		if o, ok := old[cp]; !ok || o != ro {
			touched[ro.Node] = true
			if ok {
				touched[o.Node] = true
			}
			if ok && o.Node != ro.Node {
				c.fx.failovers = append(c.fx.failovers, cp)
			}
		}
	}
	slices.Sort(c.fx.failovers)
	for cp, o := range old {
		if _, ok := roles[cp]; !ok {
			touched[o.Node] = true
		}
	}
	for _, node := range slices.Sorted(maps.Keys(touched)) {
		c.queue(node).rolesGen++
	}
	c.pruneCancelled(now)
	for _, k := range c.cancelledQ {
		cp := c.cancelled[k].capability
		if ro, ok := roles[cp]; ok && old[cp] != ro {
			q := c.queue(ro.Node)
			q.cancels = append(q.cancels, k)
		}
	}
	// Attempts whose Waggler moved are handed to the new one.
	for _, a := range c.atts {
		ro, ok := roles[a.d.Capability]
		switch {
		case a.node == "" && ok:
			c.removeWaiting(a)
			c.route(a, ro)
		case a.node != "" && (!ok || ro.Node != a.node || ro.Epoch != a.epoch):
			delete(c.queues[a.node].queued, a.d.AttemptKey)
			if ok {
				c.route(a, ro)
			} else {
				c.wait(a, now)
			}
		}
	}
	c.wakeAll()
	return c.take()
}

// onOpened: a new session with node. Its host may have lost what it held
// (a restart), so everything of this node is handed over again (Wagglers
// ignore what they hold), its roles are set again, and it learns the
// recent cancels of its capabilities.
func (c *routeCore) onOpened(node string) {
	q := c.queue(node)
	q.rolesGen++
	mine := c.rolesOf(node)
	for _, k := range c.cancelledQ {
		if _, ok := mine[c.cancelled[k].capability]; ok {
			q.cancels = append(q.cancels, k)
		}
	}
	for _, a := range c.atts {
		if a.node == node {
			a.sent = false
			q.queued[a.d.AttemptKey] = a
		}
	}
}

// routeSend is what a node's link sends in one step, in this order: its
// role set (when it changed), the cancels, then the handoffs.
type routeSend struct {
	rolesGen uint64
	roles    map[string]uint64 // nil: unchanged
	quar     []string
	cancels  []port.AttemptKey
	hs       []Handoff
	batch    []*att // the attempts of hs
	handed   []bool // batch's handed before this send
}

func (s *routeSend) empty() bool { return s.roles == nil && len(s.cancels) == 0 && len(s.hs) == 0 }

// sendOutcome is how a routeSend went: the error of the call that failed
// (the calls after it are not made), or Dispatch's answer.
type sendOutcome struct {
	rolesErr, cancelErr error
	errs                []error // of Dispatch; nil: every handoff taken
}

// nextSend takes what node's link is to send now. The handoffs are marked
// handed from now on, unless the Waggler refuses them (onSent).
func (c *routeCore) nextSend(node string) routeSend {
	q := c.queue(node)
	s := routeSend{rolesGen: q.rolesGen, cancels: q.cancels}
	if q.rolesSent != q.rolesGen && c.setsRoles {
		s.roles, s.quar = c.rolesOf(node), c.quar
	}
	q.cancels = nil
	for _, a := range q.queued {
		if !a.sent {
			s.batch = append(s.batch, a)
		}
	}
	slices.SortFunc(s.batch, func(x, y *att) int { return cmp.Compare(x.seq, y.seq) })
	s.hs = make([]Handoff, len(s.batch))
	s.handed = make([]bool, len(s.batch))
	for i, a := range s.batch {
		s.hs[i] = Handoff{TaskDispatch: a.d, Epoch: a.epoch, WorkerID: a.worker, Generation: a.gen, MayRun: a.handed && a.worker == ""}
		s.handed[i], a.handed = a.handed, true
		a.wire++
	}
	return s
}

// onSent takes the outcome of s, sent on node's session: what was taken
// is sent, what was refused is sent again at the next step (after a
// backoff: fx.err), what is too large fails, and a session that broke is
// closed (fx.close).
func (c *routeCore) onSent(node string, s routeSend, out sendOutcome, now time.Time) routeFx {
	q := c.queue(node)
	for _, a := range s.batch {
		a.wire--
	}
	if out.rolesErr != nil || out.cancelErr != nil {
		// The session broke before the handoffs went out.
		for i, a := range s.batch {
			a.handed = s.handed[i]
		}
	}
	if out.rolesErr != nil {
		c.fx.close, c.fx.err = true, out.rolesErr
		return c.take()
	}
	if s.roles != nil {
		q.rolesSent = s.rolesGen // a change since is sent at the next step
	}
	if out.cancelErr != nil {
		q.cancels = append(s.cancels, q.cancels...)
		c.fx.close, c.fx.err = true, out.cancelErr
		return c.take()
	}
	var first error
	for i, a := range s.batch {
		var err error
		if out.errs != nil {
			err = out.errs[i]
		}
		if errors.Is(err, ErrNotWaggler) || errors.Is(err, ErrBusy) {
			a.handed = s.handed[i] // it did not take it
		}
		if c.atts[a.d.AttemptKey] != a || a.node != node {
			continue // cancelled or moved meanwhile
		}
		switch {
		case err == nil:
			a.sent = true
			delete(q.queued, a.d.AttemptKey)
		case errors.Is(err, port.ErrStaleTerm):
			// A newer leader spoke to this host: this router is deposed.
			delete(q.queued, a.d.AttemptKey)
		case errors.Is(err, ErrTooLarge):
			// It would fail the same way every time: the attempt fails.
			c.drop(a, true)
			delete(q.queued, a.d.AttemptKey)
			c.fx.failed = append(c.fx.failed, port.TaskResult{AttemptKey: a.d.AttemptKey, Error: err.Error(), StartedAt: now, FinishedAt: now})
		default: // not the Waggler (yet), busy, or the stream broke
			if first == nil {
				first = err
			}
		}
	}
	c.fx.err, c.fx.close = first, isBroken(first)
	return c.take()
}

// isBroken reports whether a dispatch error means the session is gone.
func isBroken(err error) bool {
	return err != nil && !errors.Is(err, ErrNotWaggler) && !errors.Is(err, ErrBusy)
}

// onResult takes an attempt's result: the attempt is done, and the result
// goes to the engine — or is parked, when holds (nil: the engine holds
// every instance) says the engine does not hold its instance (yet).
func (c *routeCore) onResult(res port.TaskResult, now time.Time, holds func(uuid.UUID) bool) routeFx {
	if a := c.atts[res.AttemptKey]; a != nil {
		c.drop(a, true)
		if a.node != "" {
			if q := c.queues[a.node]; q != nil {
				delete(q.queued, a.d.AttemptKey)
			}
		} else {
			c.removeWaiting(a)
		}
	}
	if holds != nil && !holds(res.InstanceID) {
		c.parked = append(c.parked, parkedResult{res: res, since: now})
	} else {
		c.fx.results = append(c.fx.results, res)
	}
	return c.take()
}

// onStarted records the workers that run attempts, as a Waggler said.
func (c *routeCore) onStarted(ss []Started) {
	for _, s := range ss {
		if a := c.atts[s.Key]; a != nil {
			a.worker, a.gen = s.WorkerID, s.Generation
		}
	}
}

// onTick offers the parked results again: those whose instance the engine
// holds now go to it, in the order they came; those parked for resultHold
// are given up (fx.expired). holds is not nil.
func (c *routeCore) onTick(now time.Time, holds func(uuid.UUID) bool) routeFx {
	keep := c.parked[:0]
	for _, p := range c.parked {
		switch {
		case holds(p.res.InstanceID):
			c.fx.results = append(c.fx.results, p.res)
		case now.Sub(p.since) >= c.resultHold:
			c.fx.expired = append(c.fx.expired, p.res)
		default:
			keep = append(keep, p)
		}
	}
	clear(c.parked[len(keep):])
	c.parked = keep
	return c.take()
}

// add records a accepted: in c.atts, and counted.
func (c *routeCore) add(a *att, now time.Time) {
	c.atts[a.d.AttemptKey] = a
	cp := a.d.Capability
	if c.bl.inflight[cp] == 0 {
		c.bl.seen[cp] = progress{at: now}
	}
	c.bl.inflight[cp]++
}

// drop forgets a, recorded by add: out of c.atts, uncounted. done: its
// result came (the capability makes progress).
func (c *routeCore) drop(a *att, done bool) {
	delete(c.atts, a.d.AttemptKey)
	cp := a.d.Capability
	n := c.bl.inflight[cp] - 1
	if n <= 0 {
		delete(c.bl.inflight, cp)
		delete(c.bl.done, cp)
		delete(c.bl.seen, cp)
	} else {
		c.bl.inflight[cp] = n
		if done {
			c.bl.done[cp]++
		}
	}
	if limit, gated := c.bl.gated[cp]; gated && n <= limit/2 {
		delete(c.bl.gated, cp)
		c.bl.drained = append(c.bl.drained, cp)
	}
}

// route queues a for the node of its capability's Waggler.
func (c *routeCore) route(a *att, ro Role) {
	a.node, a.epoch, a.sent = ro.Node, ro.Epoch, false
	c.queue(ro.Node).queued[a.d.AttemptKey] = a
}

// wait keeps a until a node serves its capability, and tells the engine
// so, once.
func (c *routeCore) wait(a *att, now time.Time) {
	a.node, a.sent = "", false
	c.waiting[a.d.Capability] = append(c.waiting[a.d.Capability], a)
	if !a.announce {
		a.announce = true
		c.fx.progress = append(c.fx.progress, port.TaskProgress{AttemptKey: a.d.AttemptKey,
			Message: "waiting: no node serves " + a.d.Capability, At: now})
	}
}

func (c *routeCore) removeWaiting(a *att) {
	ws := c.waiting[a.d.Capability]
	if i := slices.Index(ws, a); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(c.waiting, a.d.Capability)
	} else {
		c.waiting[a.d.Capability] = ws
	}
}

// queue returns the queue of node, created (and its link started: fx.start)
// on first use.
func (c *routeCore) queue(node string) *nodeQueue {
	q := c.queues[node]
	if q == nil {
		q = &nodeQueue{queued: map[port.AttemptKey]*att{}}
		c.queues[node] = q
		c.fx.start = append(c.fx.start, node)
	}
	return q
}

// wakeAll has every node's link look for something to send.
func (c *routeCore) wakeAll() {
	c.fx.wake = slices.Sorted(maps.Keys(c.queues))
}

// rolesOf is the role set of node.
func (c *routeCore) rolesOf(node string) map[string]uint64 {
	out := map[string]uint64{}
	for cp, ro := range c.roles {
		if ro.Node == node {
			out[cp] = ro.Epoch
		}
	}
	return out
}

// pruneCancelled forgets cancels older than rememberCancels.
func (c *routeCore) pruneCancelled(now time.Time) {
	i := 0
	for ; i < len(c.cancelledQ); i++ {
		k := c.cancelledQ[i]
		if now.Sub(c.cancelled[k].at) < rememberCancels {
			break
		}
		delete(c.cancelled, k)
	}
	if i > 0 {
		c.cancelledQ = slices.Delete(c.cancelledQ, 0, i)
	}
}
