package wag

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/lifecycle"
)

// Handoff is an attempt the leader hands a Waggler: a dispatch, and — when
// it is passed on from a predecessor Waggler — the worker that runs it and
// under which generation, so the successor waits for that worker's
// heartbeats instead of running the attempt again.
type Handoff struct {
	port.TaskDispatch
	// Epoch is the Waggler epoch the leader means the attempt for; a host
	// whose Waggler of the capability has another epoch refuses it
	// (ErrNotWaggler) and the leader routes it again.
	Epoch      uint64
	WorkerID   string // "" unless the attempt runs on a worker already
	Generation uint64
	// MayRun, on a handoff without a worker, says that a predecessor
	// Waggler held the attempt and the leader did not hear which worker,
	// if any, it gave it to. The successor holds it back until every node
	// serving the capability has registered its workers (a worker that
	// runs it keeps it) or InheritGrace has passed, instead of running it
	// a second time at once.
	MayRun bool
}

// Uplink is where a node's Wagglers report, through their host: the
// leader's Router, in-process or across the leader's stream. Results carry
// a sequence number; the host keeps each until the leader acknowledges it
// (Session.Ack), and sends what is unacknowledged again to the next
// leader. Calls must not block for long.
type Uplink interface {
	Results(rs []SeqResult) error
	Progress(ps []port.TaskProgress)
	Started(ss []Started)
}

// SeqResult is a result numbered by the host that sends it.
type SeqResult struct {
	Seq uint64
	port.TaskResult
}

// Errors of the Waggler host.
var (
	// ErrNotWaggler: this node is not the Waggler of the attempt's
	// capability at the attempt's epoch (it never was, or a newer epoch
	// moved the role). The leader routes the attempt again.
	ErrNotWaggler = errors.New("wag: not the waggler of this capability at this epoch")
)

// WagglerHost runs the Wagglers this node is assigned, one per capability
// at the epoch of its assignment. The leader tells it its roles (SetRoles)
// and hands it attempts (Dispatch, Cancel) through a session of its term;
// workers of every node register their slots with it (Attach); it reports
// results, progress and starts to the newest leader's session, keeping
// results until they are acknowledged.
type WagglerHost struct {
	cfg Config
	log *zap.Logger

	terms termFence

	flushMu sync.Mutex // serialises flush, so results go out in order

	// dead are the nodes memberlist declared failed and that have not
	// come back: a Waggler inheriting an attempt that ran there queues it
	// at once instead of waiting for its worker to register. Its own lock:
	// Wagglers read it holding theirs.
	deadMu sync.Mutex
	dead   map[string]bool

	life lifecycle.Base

	mu       sync.Mutex
	wagglers map[string]*Waggler // capability → the Waggler of its current epoch
	// quarantined are the nodes the leader says are quarantined: the
	// Wagglers give their workers nothing.
	quarantined map[string]bool
	// leader is the session of the newest Raft leader (it sets the roles);
	// nil when none.
	leader *Session
	// count is the mesh's partition count, told by the first partitioned
	// session (0 until then: every result is of partition 0); epochs the
	// newest epoch a session named per partition, and owners the session
	// that owns each partition now.
	count  int
	epochs map[int]uint64
	owners map[int]*Session
	seq    uint64 // last result sequence number
	// pending are the results not acknowledged yet, per partition, by
	// Seq; dirty the partitions with results their owner was not sent.
	pending map[int][]SeqResult
	dirty   map[int]struct{}
	// attachers are called whenever the roles change, so that this node's
	// own workers can follow the Waggler of their capability.
	watchers []func()
}

// NewWagglerHost builds the host; no Waggler runs until SetRoles.
func NewWagglerHost(cfg Config) (*WagglerHost, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &WagglerHost{
		cfg:      cfg,
		log:      cfg.Logger.Named("waggler").With(zap.String("node", cfg.NodeName)),
		wagglers: make(map[string]*Waggler),
		epochs:   map[int]uint64{},
		owners:   map[int]*Session{},
		pending:  map[int][]SeqResult{},
		dirty:    map[int]struct{}{},
	}, nil
}

// Start lets the host run Wagglers.
func (h *WagglerHost) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.life.Start("wag: waggler host"); err != nil {
		return err
	}
	for _, w := range h.wagglers {
		w.start()
	}
	return nil
}

// Stop closes every Waggler (what they held is the engine's to dispatch
// again) and drops the session. Every call waits for the first.
func (h *WagglerHost) Stop(ctx context.Context) error {
	return h.life.Stop(ctx, func(lifecycle.State) error {
		h.mu.Lock()
		ws := slices.Collect(maps.Values(h.wagglers))
		clear(h.wagglers)
		h.leader = nil
		clear(h.owners)
		h.mu.Unlock()
		for _, w := range ws {
			w.close()
		}
		return nil
	})
}

// Owner is who opens a session with a host, and what the session may
// command: a runloop (an engine) of a leadership term, and the partitions
// it owns.
type Owner struct {
	// Term is, for the Raft leader's session, the term it leads in: the
	// host refuses a leader's session of an older term than the newest it
	// saw. A follower's session says the term its engine started in, for
	// the logs: its partitions' epochs fence it, not the term.
	Term uint64
	// Follower: the owner is not the Raft leader. Its session dispatches
	// and cancels the attempts of its partitions and receives their
	// results, but does not set the host's roles, and the host's
	// observations (the Sentinel's evidence) go to the leader.
	Follower bool
	// Count is the mesh's partition count and Partitions the partitions
	// the owner's engine owns, at their epochs. A session takes each
	// partition from any session of an older epoch, and is refused when
	// one of them has a newer owner already: the epoch fences, per
	// partition, as the term fences the roles. Count 0: the session owns
	// every instance, fenced by Term alone (one engine for the mesh).
	Count      int
	Partitions map[int]uint64
}

// Session is one owner's connection to this host: what it may command is
// fenced by its term (the roles) and its partitions' epochs (attempts),
// and the results, progress and starts of its partitions' instances go to
// its uplink while it owns them.
type Session struct {
	h     *WagglerHost
	owner Owner
	up    Uplink
	// sent: per partition, the results up to this Seq were sent on this
	// session. Guarded by h.mu.
	sent map[int]uint64
}

// Open starts a session of a leader of term that owns every instance
// (Owner.Count 0), reporting to up.
func (h *WagglerHost) Open(term uint64, up Uplink) (*Session, error) {
	return h.OpenOwner(Owner{Term: term}, up)
}

// OpenOwner starts a session of o, reporting to up. A leader's session of
// an older term than the newest seen is refused (port.ErrStaleTerm), and
// so is a session that names a partition at an older epoch than one seen.
// Results not acknowledged by an earlier owner of a partition are sent to
// this one.
func (h *WagglerHost) OpenOwner(o Owner, up Uplink) (*Session, error) {
	if !o.Follower {
		if err := h.terms.admit(o.Term); err != nil {
			return nil, err
		}
	}
	s := &Session{h: h, owner: o, up: up, sent: map[int]uint64{}}
	h.mu.Lock()
	if h.life.State().Stopped() {
		h.mu.Unlock()
		return nil, ErrNotRunning
	}
	if o.Count > 0 {
		if h.count != 0 && h.count != o.Count {
			h.mu.Unlock()
			return nil, fmt.Errorf("wag: a session of %d partitions, but this host serves a mesh of %d", o.Count, h.count)
		}
		for p, e := range o.Partitions {
			if e < h.epochs[p] {
				h.mu.Unlock()
				return nil, fmt.Errorf("%w: partition %d at epoch %d, but epoch %d owns it", port.ErrStaleTerm, p, e, h.epochs[p])
			}
		}
		if h.count == 0 {
			h.setCount(o.Count)
		}
		for p, e := range o.Partitions {
			h.epochs[p] = e
			h.owners[p] = s
			h.dirty[p] = struct{}{}
		}
	}
	if !o.Follower && (h.leader == nil || h.leader.owner.Term <= o.Term) {
		h.leader = s
		if o.Count == 0 {
			for p := range h.pending {
				h.dirty[p] = struct{}{}
			}
		}
	}
	h.mu.Unlock()
	h.flush()
	return s, nil
}

// setCount fixes the host's partition count and files the results kept
// so far under their partitions. Called with h.mu held.
func (h *WagglerHost) setCount(count int) {
	h.count = count
	old := h.pending[0]
	delete(h.pending, 0)
	for _, r := range old {
		p := port.PartitionOf(r.InstanceID, count)
		h.pending[p] = append(h.pending[p], r)
		h.dirty[p] = struct{}{}
	}
}

// partition is the partition of instance id on this host (0 until a
// partitioned session told the count). Called with h.mu held.
func (h *WagglerHost) partition(id uuid.UUID) int {
	if h.count == 0 {
		return 0
	}
	return port.PartitionOf(id, h.count)
}

// ownerOf is the session that receives partition p's reports: its owner's,
// or the leader's session when that one owns every instance. Called with
// h.mu held.
func (h *WagglerHost) ownerOf(p int) *Session {
	if s := h.owners[p]; s != nil {
		return s
	}
	if h.leader != nil && h.leader.owner.Count == 0 {
		return h.leader
	}
	return nil
}

// Close ends a session; what the host reports for its partitions waits for
// the next owner.
func (s *Session) Close() {
	h := s.h
	h.mu.Lock()
	for p, o := range h.owners {
		if o == s {
			delete(h.owners, p)
		}
	}
	if h.leader == s {
		h.leader = nil
	}
	h.mu.Unlock()
}

// mayCommand says whether s may dispatch and cancel the attempts of
// partition p: it owns p (or, owning every instance, is the newest
// leader's session). Called with h.mu held.
func (s *Session) mayCommand(p int) error {
	h := s.h
	if h.life.State().Stopped() {
		return ErrNotRunning
	}
	if s.owner.Count == 0 {
		if err := h.terms.admit(s.owner.Term); err != nil {
			return err
		}
		if h.leader != s {
			return fmt.Errorf("%w: a newer leader's session replaced this one", port.ErrStaleTerm)
		}
		return nil
	}
	if h.owners[p] != s {
		if _, ok := s.owner.Partitions[p]; !ok {
			return fmt.Errorf("%w: this session does not own partition %d", port.ErrStaleTerm, p)
		}
		return fmt.Errorf("%w: partition %d has a newer owner (epoch %d)", port.ErrStaleTerm, p, h.epochs[p])
	}
	return nil
}

// leads reports whether s is the newest leader's session, which sets the
// roles.
func (s *Session) leads() error {
	if s.owner.Follower {
		return errors.New("wag: only the raft leader's session sets roles")
	}
	if err := s.h.terms.admit(s.owner.Term); err != nil {
		return err
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.h.life.State().Stopped() {
		return ErrNotRunning
	}
	if s.h.leader != s {
		return fmt.Errorf("%w: a newer leader's session replaced this one", port.ErrStaleTerm)
	}
	return nil
}

// SetRoles makes this node the Waggler of exactly the capabilities in
// roles, each at its epoch: new roles start a Waggler, a newer epoch
// replaces the Waggler of a capability (the old one's attempts are the
// leader's to hand over), roles no longer listed stop theirs.
func (s *Session) SetRoles(roles map[string]uint64, quarantined []string) error {
	if err := s.leads(); err != nil {
		return err
	}
	h := s.h
	var stop []*Waggler
	h.mu.Lock()
	h.quarantined = map[string]bool{}
	for _, n := range quarantined {
		h.quarantined[n] = true
	}
	keep := make([]*Waggler, 0, len(h.wagglers))
	for capability, w := range h.wagglers {
		if epoch, ok := roles[capability]; !ok || epoch != w.epoch {
			stop = append(stop, w)
			delete(h.wagglers, capability)
		} else {
			keep = append(keep, w)
		}
	}
	started := false
	for capability, epoch := range roles {
		if _, ok := h.wagglers[capability]; ok {
			continue
		}
		w := newWaggler(h.cfg, capability, epoch, hostUplink{h}, h.log)
		w.nodeDead = h.nodeDead
		w.servingNodes = h.cfg.ServingNodes
		w.quarantined = maps.Clone(h.quarantined)
		h.wagglers[capability] = w
		if h.life.Running() {
			w.start()
		}
		started = true
		h.log.Info("waggler role taken", zap.String("capability", capability), zap.Uint64("epoch", epoch))
	}
	watchers := slices.Clone(h.watchers)
	quar := maps.Clone(h.quarantined)
	h.mu.Unlock()
	if h.cfg.Trust != nil {
		h.cfg.Trust.Quarantined(quar)
	}
	for _, w := range keep {
		w.Quarantine(quar)
	}
	for _, w := range stop {
		w.close()
		h.log.Info("waggler role given up", zap.String("capability", w.capability), zap.Uint64("epoch", w.epoch))
	}
	if started || len(stop) > 0 {
		for _, f := range watchers {
			f()
		}
	}
	return nil
}

// Dispatch hands attempts to the Wagglers of their capabilities, answering
// per attempt: ErrNotWaggler when this node does not hold the role at the
// attempt's epoch, ErrBusy when the capability's queue is full. Handoffs
// that name a worker or may run on one are inherited (see
// Waggler.Inherit).
func (s *Session) Dispatch(hs []Handoff) []error {
	h := s.h
	var errs []error
	refuse := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(hs))
		}
		errs[i] = err
	}
	type group struct {
		fresh   []port.TaskDispatch
		inherit []Handoff
	}
	groups := map[*Waggler]*group{}
	var order []*Waggler
	busy := map[*Waggler]error{}
	h.mu.Lock()
	if s.owner.Count == 0 {
		// One fence for the whole batch: the session owns every instance.
		if err := s.mayCommand(0); err != nil {
			h.mu.Unlock()
			return allErr(len(hs), err)
		}
	}
	for i, d := range hs {
		if s.owner.Count > 0 {
			if err := s.mayCommand(h.partition(d.InstanceID)); err != nil {
				refuse(i, err)
				continue
			}
		}
		w := h.wagglers[d.Capability]
		if w == nil || w.epoch != d.Epoch {
			refuse(i, fmt.Errorf("%w: %s at epoch %d", ErrNotWaggler, d.Capability, d.Epoch))
			continue
		}
		g := groups[w]
		if g == nil {
			busy[w] = w.admit()
			// Most batches hold one capability: room for the rest of them.
			g = &group{fresh: make([]port.TaskDispatch, 0, len(hs)-i)}
			groups[w] = g
			order = append(order, w)
		}
		if d.WorkerID != "" || d.MayRun {
			g.inherit = append(g.inherit, d)
			continue
		}
		if err := busy[w]; err != nil {
			refuse(i, err)
			continue
		}
		g.fresh = append(g.fresh, d.TaskDispatch)
	}
	h.mu.Unlock()
	for _, w := range order {
		g := groups[w]
		if len(g.inherit) > 0 {
			w.Inherit(g.inherit)
		}
		if len(g.fresh) > 0 {
			w.enqueue(g.fresh)
		}
	}
	return errs
}

// Cancel cancels attempts wherever this node's Wagglers hold them; a
// session cancels only the attempts of the partitions it owns (the others'
// are left alone: their owner moved on).
func (s *Session) Cancel(keys []port.AttemptKey) error {
	h := s.h
	h.mu.Lock()
	if s.owner.Count == 0 {
		if err := s.mayCommand(0); err != nil {
			h.mu.Unlock()
			return err
		}
	} else {
		mine := keys[:0:0]
		for _, k := range keys {
			if s.mayCommand(h.partition(k.InstanceID)) == nil {
				mine = append(mine, k)
			}
		}
		if len(mine) == 0 && len(keys) > 0 {
			h.mu.Unlock()
			return fmt.Errorf("%w: this session owns none of the attempts' partitions now", port.ErrStaleTerm)
		}
		keys = mine
	}
	h.mu.Unlock()
	for _, w := range h.snapshot() {
		w.cancel(keys)
	}
	return nil
}

// Ack acknowledges the results up to seq that were sent on this session
// for the partitions it owns: their owner has them.
func (s *Session) Ack(seq uint64) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, sent := range s.sent {
		if h.ownerOf(p) != s {
			continue
		}
		upTo := min(seq, sent)
		rs := h.pending[p]
		i := 0
		for i < len(rs) && rs[i].Seq <= upTo {
			i++
		}
		// Move what awaits an ack to the front, keeping the array:
		// trimming the front off instead made every append past it grow
		// a new one.
		n := copy(rs, rs[i:])
		clear(rs[n:])
		h.pending[p] = rs[:n]
	}
}

// snapshot returns the running Wagglers.
func (h *WagglerHost) snapshot() []*Waggler {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Collect(maps.Values(h.wagglers))
}

// Waggler returns the Waggler of capability on this node, or nil.
func (h *WagglerHost) Waggler(capability string) *Waggler {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wagglers[capability]
}

// Roles returns the capabilities this node is the Waggler of, with epochs.
func (h *WagglerHost) Roles() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]uint64, len(h.wagglers))
	for c, w := range h.wagglers {
		out[c] = w.epoch
	}
	return out
}

// Status returns a snapshot of every Waggler here, by capability.
func (h *WagglerHost) Status() []WagglerStatus {
	ws := h.snapshot()
	slices.SortFunc(ws, func(a, b *Waggler) int {
		if a.capability < b.capability {
			return -1
		}
		if a.capability > b.capability {
			return 1
		}
		return 0
	})
	out := make([]WagglerStatus, len(ws))
	for i, w := range ws {
		out[i] = w.Status()
	}
	return out
}

// OnRoles registers f, called (outside any lock) whenever this node's
// roles change.
func (h *WagglerHost) OnRoles(f func()) {
	h.mu.Lock()
	h.watchers = append(h.watchers, f)
	h.mu.Unlock()
}

// WorkerNodeDead declares every worker of node dead at once (memberlist
// says the node failed), short-cutting the heartbeat ladder: what they ran
// fails over.
func (h *WagglerHost) WorkerNodeDead(node string) {
	h.deadMu.Lock()
	if h.dead == nil {
		h.dead = map[string]bool{}
	}
	h.dead[node] = true
	h.deadMu.Unlock()
	for _, w := range h.snapshot() {
		w.workersOfNodeDead(node)
	}
}

// WorkerNodeAlive says node is a member again (it joined, or came back):
// its workers declared dead while idle take work again.
func (h *WagglerHost) WorkerNodeAlive(node string) {
	h.deadMu.Lock()
	delete(h.dead, node)
	h.deadMu.Unlock()
	for _, w := range h.snapshot() {
		w.workersOfNodeAlive(node)
	}
}

func (h *WagglerHost) nodeDead(node string) bool {
	h.deadMu.Lock()
	defer h.deadMu.Unlock()
	return h.dead[node]
}

// hostUplink is the uplink of the host's Wagglers: results are numbered
// and kept until acknowledged; progress and starts go to the current
// session as they come (a later heartbeat supersedes a lost one).
type hostUplink struct{ h *WagglerHost }

func (u hostUplink) TaskResult(_ context.Context, r port.TaskResult) {
	h := u.h
	h.mu.Lock()
	h.seq++
	p := h.partition(r.InstanceID)
	h.pending[p] = append(h.pending[p], SeqResult{Seq: h.seq, TaskResult: r})
	h.dirty[p] = struct{}{}
	h.mu.Unlock()
	h.flush()
}

func (u hostUplink) TaskProgress(_ context.Context, p port.TaskProgress) {
	h := u.h
	h.mu.Lock()
	s := h.ownerOf(h.partition(p.InstanceID))
	h.mu.Unlock()
	if s != nil {
		s.up.Progress([]port.TaskProgress{p})
	}
}

func (u hostUplink) TaskStarted(ss []Started) {
	h := u.h
	h.mu.Lock()
	to := map[*Session][]Started{}
	for _, st := range ss {
		if s := h.ownerOf(h.partition(st.Key.InstanceID)); s != nil {
			to[s] = append(to[s], st)
		}
	}
	h.mu.Unlock()
	for s, ss := range to {
		s.up.Started(ss)
	}
}

// flush sends each partition's owner the results it has not been sent.
func (h *WagglerHost) flush() {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	type out struct {
		batch []SeqResult
		parts map[int][2]uint64 // partition → the first and last Seq sent of it
	}
	var outs map[*Session]*out
	h.mu.Lock()
	for p := range h.dirty {
		s := h.ownerOf(p)
		if s == nil {
			continue // kept until an owner opens a session
		}
		delete(h.dirty, p)
		rs := h.pending[p]
		// In Seq order: what this session has not been sent starts after
		// s.sent[p] (a search, not a scan: thousands may await an ack).
		i, _ := slices.BinarySearchFunc(rs, s.sent[p]+1, func(r SeqResult, seq uint64) int { return cmp.Compare(r.Seq, seq) })
		if i == len(rs) {
			continue
		}
		if outs == nil {
			outs = map[*Session]*out{}
		}
		o := outs[s]
		if o == nil {
			o = &out{parts: map[int][2]uint64{}}
			outs[s] = o
		}
		o.batch = append(o.batch, rs[i:]...)
		o.parts[p] = [2]uint64{rs[i].Seq, rs[len(rs)-1].Seq}
		s.sent[p] = rs[len(rs)-1].Seq
	}
	h.mu.Unlock()
	for s, o := range outs {
		if len(o.parts) > 1 {
			slices.SortFunc(o.batch, func(a, b SeqResult) int { return cmp.Compare(a.Seq, b.Seq) })
		}
		if err := s.up.Results(o.batch); err != nil {
			// The owner's stream broke: the results wait for its next
			// session, or the partition's next owner.
			h.mu.Lock()
			for p, r := range o.parts {
				if s.sent[p] == r[1] {
					s.sent[p] = r[0] - 1
				}
				h.dirty[p] = struct{}{}
			}
			h.mu.Unlock()
			h.log.Debug("results not delivered; kept for the next session", zap.Int("results", len(o.batch)), zap.Error(err))
		}
	}
}

// allErr answers every one of n attempts with err.
func allErr(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Target is this host's Waggler of capability as a target for this
// node's pools, if the host runs it at epoch.
func (h *WagglerHost) Target(capability string, epoch uint64) (TargetSource, bool) {
	w := h.Waggler(capability)
	if w == nil || w.Epoch() != epoch {
		return TargetSource{}, false
	}
	return LocalTarget(w), true
}
