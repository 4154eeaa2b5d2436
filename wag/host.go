package wag

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/lifecycle"
)

// Handoff is an attempt the leader hands a Waggler: a dispatch, and — when
// it is passed on from a predecessor Waggler — the worker that runs it and
// under which generation, so the successor waits for that worker's
// heartbeats instead of running the attempt again.
type Handoff struct {
	engine.TaskDispatch
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
	Progress(ps []engine.TaskProgress)
	Started(ss []Started)
}

// SeqResult is a result numbered by the host that sends it.
type SeqResult struct {
	Seq uint64
	engine.TaskResult
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
	session     *Session    // of the newest leader; nil when none
	seq         uint64      // last result sequence number
	pending     []SeqResult // results not acknowledged yet, by Seq
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
		h.session = nil
		h.mu.Unlock()
		for _, w := range ws {
			w.close()
		}
		return nil
	})
}

// Session is one leader's connection to this host: its term fences what it
// says, and what the host reports goes to its uplink while it is the newest.
type Session struct {
	h    *WagglerHost
	term uint64
	up   Uplink
	sent uint64 // results up to this Seq were sent on this session
}

// Open starts a session of a leader of term, reporting to up. A session of
// an older term than the newest seen is refused (engine.ErrStaleTerm).
// Results not acknowledged by an earlier leader are sent to this one.
func (h *WagglerHost) Open(term uint64, up Uplink) (*Session, error) {
	if err := h.terms.admit(term); err != nil {
		return nil, err
	}
	s := &Session{h: h, term: term, up: up}
	h.mu.Lock()
	if h.life.State().Stopped() {
		h.mu.Unlock()
		return nil, ErrNotRunning
	}
	if h.session == nil || h.session.term <= term {
		h.session = s
	}
	h.mu.Unlock()
	h.flush()
	return s, nil
}

// Close ends a session; what the host reports waits for the next.
func (s *Session) Close() {
	s.h.mu.Lock()
	if s.h.session == s {
		s.h.session = nil
	}
	s.h.mu.Unlock()
}

// current reports whether s is the newest session, which may command.
func (s *Session) current() error {
	if err := s.h.terms.admit(s.term); err != nil {
		return err
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.h.life.State().Stopped() {
		return ErrNotRunning
	}
	if s.h.session != s {
		return fmt.Errorf("%w: a newer leader's session replaced this one", engine.ErrStaleTerm)
	}
	return nil
}

// SetRoles makes this node the Waggler of exactly the capabilities in
// roles, each at its epoch: new roles start a Waggler, a newer epoch
// replaces the Waggler of a capability (the old one's attempts are the
// leader's to hand over), roles no longer listed stop theirs.
func (s *Session) SetRoles(roles map[string]uint64, quarantined []string) error {
	if err := s.current(); err != nil {
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
	if err := s.current(); err != nil {
		return allErr(len(hs), err)
	}
	h := s.h
	var errs []error
	refuse := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(hs))
		}
		errs[i] = err
	}
	type group struct {
		fresh   []engine.TaskDispatch
		inherit []Handoff
	}
	groups := map[*Waggler]*group{}
	var order []*Waggler
	busy := map[*Waggler]error{}
	h.mu.Lock()
	for i, d := range hs {
		w := h.wagglers[d.Capability]
		if w == nil || w.epoch != d.Epoch {
			refuse(i, fmt.Errorf("%w: %s at epoch %d", ErrNotWaggler, d.Capability, d.Epoch))
			continue
		}
		g := groups[w]
		if g == nil {
			busy[w] = w.admit()
			// Most batches hold one capability: room for the rest of them.
			g = &group{fresh: make([]engine.TaskDispatch, 0, len(hs)-i)}
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

// Cancel cancels attempts wherever this node's Wagglers hold them.
func (s *Session) Cancel(keys []engine.AttemptKey) error {
	if err := s.current(); err != nil {
		return err
	}
	for _, w := range s.h.snapshot() {
		w.cancel(keys)
	}
	return nil
}

// Ack acknowledges the results up to seq: the leader has them.
func (s *Session) Ack(seq uint64) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for i < len(h.pending) && h.pending[i].Seq <= seq {
		i++
	}
	// Move what awaits an ack to the front, keeping the array: trimming
	// the front off instead made every append past it grow a new one.
	n := copy(h.pending, h.pending[i:])
	clear(h.pending[n:])
	h.pending = h.pending[:n]
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

func (u hostUplink) TaskResult(_ context.Context, r engine.TaskResult) {
	h := u.h
	h.mu.Lock()
	h.seq++
	h.pending = append(h.pending, SeqResult{Seq: h.seq, TaskResult: r})
	h.mu.Unlock()
	h.flush()
}

func (u hostUplink) TaskProgress(_ context.Context, p engine.TaskProgress) {
	if s := u.h.current(); s != nil {
		s.up.Progress([]engine.TaskProgress{p})
	}
}

func (u hostUplink) TaskStarted(ss []Started) {
	if s := u.h.current(); s != nil {
		s.up.Started(ss)
	}
}

// current returns the newest session, or nil.
func (h *WagglerHost) current() *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.session
}

// flush sends the results the current session has not been sent.
func (h *WagglerHost) flush() {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	h.mu.Lock()
	s := h.session
	if s == nil {
		h.mu.Unlock()
		return
	}
	// pending is in Seq order: what this session has not been sent starts
	// after s.sent (a search, not a scan: thousands may await an ack).
	i, _ := slices.BinarySearchFunc(h.pending, s.sent+1, func(r SeqResult, seq uint64) int { return cmp.Compare(r.Seq, seq) })
	batch := slices.Clone(h.pending[i:])
	if len(batch) > 0 {
		s.sent = batch[len(batch)-1].Seq
	}
	h.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := s.up.Results(batch); err != nil {
		// The leader's stream broke: the results wait for the next one.
		h.mu.Lock()
		if s.sent == batch[len(batch)-1].Seq {
			s.sent = batch[0].Seq - 1
		}
		h.mu.Unlock()
		h.log.Debug("results not delivered; kept for the next leader", zap.Int("results", len(batch)), zap.Error(err))
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
