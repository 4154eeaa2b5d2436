// Package center is a node's trust centre: its hash-chain trust (HCTH)
// and its trust in the other nodes and worker programs. It stamps what the
// node sends (a Signer, re-anchoring before it runs out and asking for its
// anchor to be advertised), verifies what peers send (positions shared by
// the node's streams), keeps a trust.Book of its peers from what its
// streams and Wagglers observe (the allowance of each worker, the rank of
// each node), and keeps those observations for the leader. On the leader
// it also holds one Sentinel per observer and the ballot that turns their
// findings into decisions to quarantine or release.
//
// It does no I/O and starts no goroutine: time comes from the clock it is
// given, gossip and leadership through functions of its Config, and the
// node commits its decisions through Raft (Decide, then Committed). Node
// wires it (remote.Trust, remote.Evidence and wag.Trust are its faces).
package center

import (
	"crypto/rand"
	"errors"
	"maps"
	"math"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
)

// maxPendingObservations bounds what a node keeps for its leader while it
// has no session with one; beyond it the oldest go.
const maxPendingObservations = 50_000

// Config is what a Center needs.
type Config struct {
	// Self is the node's name: it judges neither itself nor, on the
	// leader, itself through others.
	Self   string
	Logger *zap.Logger
	Clock  clock.Clock
	// MinTier is the dispatch tier: a worker below it runs what it earned
	// (probation).
	MinTier trust.Tier
	// PreTrust names the peers an operator trusts from the start (see
	// trust.Book.PreTrust).
	PreTrust []string
	// AnchorOf reads a peer's anchor as the mesh advertises it; nil: none
	// is known (every stream verifies from what it learnt).
	AnchorOf func(peer string) (trust.Anchor, bool)
	// Leading reports whether this node leads the engine; nil: never.
	Leading func() bool
	// MaxBatch bounds the observations one Drain returns (the Lead
	// stream's batch); 0: 1,000.
	MaxBatch int
	// StampFault, when set, may change each stamp the node puts on what it
	// sends (a forged or replayed token): for tests and chaos drills.
	StampFault func(*trust.Stamp)
}

// Center is a node's trust centre (see the package doc). Its methods are
// safe for concurrent use.
type Center struct {
	self       string
	log        *zap.Logger
	clock      clock.Clock
	minTier    trust.Tier
	anchorOf   func(peer string) (trust.Anchor, bool)
	leading    func() bool
	maxBatch   int
	stampFault func(*trust.Stamp)

	mu        sync.Mutex
	signer    *trust.Signer
	advertise trust.Anchor // the anchor the metadata should carry
	positions map[string]trust.Position
	book      *trust.Book
	quar      map[string]bool // the quarantined subjects, as last told
	pending   []sentinel.Observation
	dropped   uint64 // observations dropped from pending
	ready     chan struct{}
	changed   chan struct{} // the anchor to advertise changed
	// On the leader: a Sentinel per observer, and the ballot.
	sentinels map[string]*sentinel.Sentinel
	ballot    *sentinel.Ballot
	sparams   sentinel.Params
}

// New makes the node's chain and book.
func New(cfg Config) (*Center, error) {
	if cfg.Self == "" || cfg.Clock == nil {
		return nil, errors.New("trust center: Self and Clock are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.AnchorOf == nil {
		cfg.AnchorOf = func(string) (trust.Anchor, bool) { return trust.Anchor{}, false }
	}
	if cfg.Leading == nil {
		cfg.Leading = func() bool { return false }
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1000
	}
	signer, err := trust.NewSigner(rand.Reader, trust.Options{})
	if err != nil {
		return nil, err
	}
	book, err := trust.NewBook(trust.DefaultParams(), cfg.Self)
	if err != nil {
		return nil, err
	}
	for _, p := range cfg.PreTrust {
		book.PreTrust(p)
	}
	sp := sentinel.DefaultParams()
	ballot, err := sentinel.NewBallot(sp)
	if err != nil {
		return nil, err
	}
	return &Center{
		self: cfg.Self, log: cfg.Logger.Named("trust"), clock: cfg.Clock, minTier: cfg.MinTier,
		anchorOf: cfg.AnchorOf, leading: cfg.Leading, maxBatch: cfg.MaxBatch, stampFault: cfg.StampFault,
		signer: signer, advertise: signer.Anchor(), positions: map[string]trust.Position{}, book: book,
		quar: map[string]bool{}, ready: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		sentinels: map[string]*sentinel.Sentinel{}, ballot: ballot, sparams: sp,
	}, nil
}

// MinTier is the dispatch tier: a worker below it is on probation.
func (t *Center) MinTier() trust.Tier { return t.minTier }

// Changed signals that the anchor to advertise changed (Anchor).
func (t *Center) Changed() <-chan struct{} { return t.changed }

// Anchor returns the anchor this node advertises now.
func (t *Center) Anchor() trust.Anchor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advertise
}

// Stamp is the next stamp of the node's chain (remote.Trust).
func (t *Center) Stamp() (trust.Stamp, error) {
	t.mu.Lock()
	st, err := t.signer.Next()
	if a := t.signer.Anchor(); err == nil && a != t.advertise {
		t.advertise = a // switched chains: advertise the new anchor
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
	if err == nil && t.stampFault != nil {
		t.stampFault(&st)
	}
	return st, err
}

// Verifier is a verifier of peer's chain, where the node's streams stand
// (remote.Trust).
func (t *Center) Verifier(peer string) (*trust.Verifier, bool) {
	t.mu.Lock()
	p, ok := t.positions[peer]
	t.mu.Unlock()
	if ok {
		return trust.NewVerifierAt(p, 0), true
	}
	a, ok := t.anchorOf(peer)
	if !ok {
		return nil, false
	}
	return trust.NewVerifier(a, 0), true
}

// CatchUp moves v to where the node's streams stand on peer's chain
// (remote.Trust).
func (t *Center) CatchUp(peer string, v *trust.Verifier) {
	if a, ok := t.anchorOf(peer); ok && a.ChainID != v.Position().Anchor.ChainID && !v.Position().Later(trust.Position{Anchor: a}) {
		v.Learn(a) // peer restarted: its new chain
	}
	t.mu.Lock()
	p, ok := t.positions[peer]
	t.mu.Unlock()
	if ok {
		v.Advance(p)
	}
}

// Accepted records where v stands on peer's chain (remote.Trust).
func (t *Center) Accepted(peer string, v *trust.Verifier) {
	p := v.Position()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.positions[peer]
	if !ok || p.Later(old) || (p.Anchor.ChainID != old.Anchor.ChainID && !old.Later(p)) {
		t.positions[peer] = p
	}
}

// Betrayed records a forgery by peer (remote.Trust).
func (t *Center) Betrayed(peer, reason string) {
	t.mu.Lock()
	t.book.Betray(peer, reason, t.clock.Now())
	t.mu.Unlock()
	t.log.Error("a peer forged a hash-chain token: its trust is zero and its streams are cut", zap.String("peer", peer), zap.String("reason", reason))
}

// Distrusted reports whether peer betrayed (remote.Trust).
func (t *Center) Distrusted(peer string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, b := t.book.Betrayed(peer)
	return b
}

// evidenceOf maps the Sentinel's kinds to the trust scores' evidence.
var evidenceOf = map[sentinel.Kind]trust.Evidence{
	sentinel.Heartbeat: trust.HeartbeatOK, sentinel.Completed: trust.TaskCompleted, sentinel.Lost: trust.TaskFailed,
	sentinel.Failed: trust.TaskFailed, sentinel.Replay: trust.Replay, sentinel.VerifyAgree: trust.VerifyAgree,
	sentinel.VerifyMismatch: trust.VerifyMismatch, sentinel.Violation: trust.Violation, sentinel.Misbehaved: trust.Misbehaviour,
}

// Observe counts o (remote.Trust, wag.Trust): o counts in this node's
// book, and goes to the leader's Sentinel — at once on the leader, else
// with the next batch its session takes.
func (t *Center) Observe(o sentinel.Observation) {
	if o.Node == "" || o.Node == t.self {
		return
	}
	leading := t.leading()
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := evidenceOf[o.Kind]; ok {
		t.book.Observe(o.Node, e, float64(max(o.Count, 1)), o.At)
	}
	if leading {
		t.observeAsLeader(t.self, o)
		return
	}
	if len(t.pending) >= maxPendingObservations {
		t.pending = t.pending[1:]
		t.dropped++
	}
	t.pending = append(t.pending, o)
	select {
	case t.ready <- struct{}{}:
	default:
	}
}

// Ready signals observations waiting for the leader (remote.Evidence).
func (t *Center) Ready() <-chan struct{} { return t.ready }

// Drain returns observations waiting for the leader (remote.Evidence): what waits, summed by node, kind and
// capability (CPU and memory as the mean of their readings), so a busy
// node sends a few observations per batch, not one per attempt.
func (t *Center) Drain() []sentinel.Observation {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(len(t.pending), t.maxBatch)
	out := summarize(t.pending[:n])
	t.pending = slices.Delete(t.pending, 0, n)
	if len(t.pending) > 0 {
		select {
		case t.ready <- struct{}{}:
		default:
		}
	}
	return out
}

// summarize sums obs by node, kind and capability, keeping the first
// one's time; values become the mean of their readings.
func summarize(obs []sentinel.Observation) []sentinel.Observation {
	type key struct {
		node, capability string
		kind             sentinel.Kind
	}
	idx := map[key]int{}
	var out []sentinel.Observation
	for _, o := range obs {
		c := max(o.Count, 1)
		k := key{o.Node, o.Capability, o.Kind}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			o.Count = c
			out = append(out, o)
			continue
		}
		a := &out[i]
		a.Value = (a.Value*float64(a.Count) + o.Value*float64(c)) / float64(a.Count+c)
		a.Count += c
	}
	return out
}

// ObservedBy takes what the Waggler host observer saw (the leader's side
// of a Lead session): the observer's Sentinel and the leader's book count
// it, at the time it arrived (an observer's clock is not trusted).
func (t *Center) ObservedBy(observer string, obs []sentinel.Observation) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range obs {
		if o.Node == "" || o.Node == observer || o.Node == t.self {
			continue // nobody judges itself, nor judges the leader to it
		}
		o.At = now
		if o.Kind == sentinel.ChainBreak {
			t.book.Betray(o.Node, "a forged hash-chain token seen by "+observer, now)
		} else if e, ok := evidenceOf[o.Kind]; ok {
			t.book.Observe(o.Node, e, float64(max(o.Count, 1)), now)
		}
		t.observeAsLeader(observer, o)
	}
}

// observeAsLeader feeds observer's Sentinel; t.mu held.
func (t *Center) observeAsLeader(observer string, o sentinel.Observation) {
	s := t.sentinels[observer]
	if s == nil {
		var err error
		if s, err = sentinel.New(observer, t.sparams); err != nil {
			return // DefaultParams validate
		}
		t.sentinels[observer] = s
	}
	s.Observe(o)
}

// Allowance (wag.Trust): a node at the dispatch tier runs what
// its slots take, a betrayed one nothing, one on probation what it earned.
func (t *Center) Allowance(node string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.book.Allowance(node, t.minTier, math.MaxInt, t.clock.Now())
}

// Rank (wag.Trust): node's tier as a number, and -1 once it
// betrayed.
func (t *Center) Rank(node string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, b := t.book.Betrayed(node); b {
		return -1
	}
	return int(t.book.Tier(node, t.clock.Now()))
}

// Quarantined (wag.Trust): a node released from quarantine
// starts again from zero trust, on a chain verified from its anchor.
func (t *Center) Quarantined(nodes map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n := range t.quar {
		if !nodes[n] {
			t.resetLocked(n)
		}
	}
	t.quar = maps.Clone(nodes)
}

// Released starts node again from zero trust: it was released from
// quarantine (by the leader that applied the release).
func (t *Center) Released(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.quar, node)
	t.resetLocked(node)
}

// resetLocked forgets everything about node; t.mu held.
func (t *Center) resetLocked(node string) {
	t.book.Reset(node)
	delete(t.positions, node)
	for _, s := range t.sentinels {
		s.Reset(node)
	}
	t.ballot.Forget(node)
	t.log.Info("a node left quarantine: its trust starts again from zero", zap.String("peer", node))
}

// VerifyOutcome counts a verified attempt's vote (the leader's Verifier)
// for the subject that ran it: a node, or a worker program.
func (t *Center) VerifyOutcome(subject string, agreed bool) {
	k := sentinel.VerifyAgree
	if !agreed {
		k = sentinel.VerifyMismatch
	}
	t.Observe(sentinel.Observation{Node: subject, Kind: k, At: t.clock.Now()})
}

// View returns the book as this node sees it.
func (t *Center) View() []trust.PeerView {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.book.View(t.clock.Now())
}

// Decide runs the Sentinel on the leader: each observer's findings become
// proposals, and the ballot decides. quarantined is the control state's
// quarantine; nodes counts the members. The node commits each decision
// through Raft and then tells Committed. Off the leader it forgets what
// it held and decides nothing: the next leader starts from its own
// observers.
func (t *Center) Decide(leading bool, quarantined map[string]sentinel.Quarantine, nodes int) []sentinel.Decision {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !leading {
		clear(t.sentinels)
		t.ballot, _ = sentinel.NewBallot(t.sparams)
		return nil
	}
	for observer, s := range t.sentinels {
		for _, f := range s.Evaluate(now) {
			if f.Anomalous {
				t.ballot.Add(sentinel.Proposal{Node: f.Node, Observer: observer, Score: f.Score, Reasons: f.Reasons, At: now})
			}
		}
	}
	return t.ballot.Decide(now, len(t.sentinels), nodes, quarantined)
}

// Committed records a decision the node committed: a quarantined subject
// is held as such until the control state says otherwise (a release
// before then still resets it); a released one starts again from zero.
func (t *Center) Committed(d sentinel.Decision) {
	switch d.Action {
	case sentinel.QuarantineNode:
		t.mu.Lock()
		t.quar[d.Node] = true
		t.mu.Unlock()
		t.log.Warn("the Sentinel quarantined a node", zap.String("peer", d.Node), zap.String("reason", d.Reason),
			zap.Strings("observers", d.Observers))
	case sentinel.ReleaseNode:
		t.Released(d.Node)
		t.log.Info("the Sentinel released a node after its cool-down", zap.String("peer", d.Node))
	}
}
