package node

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/remote"
)

// Faults inject misbehaviour into a node, for tests and chaos drills that
// need a node that lies. Never set in production.
type Faults struct {
	// Stamp, when set, may change each stamp this node puts on what it
	// sends its Wagglers and its leader (a forged or replayed token).
	Stamp func(*trust.Stamp)
	// DeafToWagglerGossip makes the node's pools ignore the Waggler roles
	// other nodes advertise in gossip, as if every such broadcast were
	// lost: they follow the control state alone.
	DeafToWagglerGossip bool
	// LoseWagglerStarts, on a leader, drops every Waggler's report of
	// which worker runs an attempt, as if each were lost with the
	// Waggler's node: the Router hands attempts to a successor without
	// their workers.
	LoseWagglerStarts bool
}

// Trust timing.
const (
	// sentinelEvery is how often the leader runs the Sentinel over what
	// its observers saw, and decides quarantines and releases.
	sentinelEvery = time.Second
	// maxPendingObservations bounds what a node keeps for its leader
	// while it has no session with one; beyond it the oldest go.
	maxPendingObservations = 50_000
)

// trustCenter is a node's hash-chain trust (HCTH) and its trust in the
// other nodes: it stamps what the node sends (a Signer, re-anchoring
// before it runs out and re-advertising its anchor), verifies what peers
// send (positions shared by the node's streams, remote.Trust), keeps a
// trust.Book of its peers from what its streams and Wagglers observe (the
// allowance of each worker node, wag.Trust), and keeps those observations
// for the leader (remote.Evidence). On the leader it also holds one
// Sentinel per observer and the ballot that turns their findings into
// quarantines through Raft (sentinelTick).
type trustCenter struct {
	self    string
	log     *zap.Logger
	clock   clock.Clock
	minTier trust.Tier
	faults  *Faults
	// anchorOf reads a peer's anchor from its gossip metadata; leading
	// reports whether this node leads the engine.
	anchorOf func(peer string) (trust.Anchor, bool)
	leading  func() bool

	mu        sync.Mutex
	signer    *trust.Signer
	advertise trust.Anchor // the anchor the metadata should carry
	positions map[string]trust.Position
	book      *trust.Book
	quar      map[string]bool // the quarantined nodes, as last told
	pending   []sentinel.Observation
	dropped   uint64 // observations dropped from pending
	ready     chan struct{}
	changed   chan struct{} // the anchor to advertise changed
	// On the leader: a Sentinel per observer, and the ballot.
	sentinels map[string]*sentinel.Sentinel
	ballot    *sentinel.Ballot
	sparams   sentinel.Params
}

var (
	_ remote.Trust    = (*trustCenter)(nil)
	_ remote.Evidence = (*trustCenter)(nil)
	_ wag.Trust       = (*trustCenter)(nil)
)

// newTrustCenter makes the node's chain and book. preTrust names the peers
// an operator trusts from the start ("*": every peer).
func newTrustCenter(self string, log *zap.Logger, clk clock.Clock, minTier trust.Tier, preTrust []string, faults *Faults) (*trustCenter, error) {
	signer, err := trust.NewSigner(rand.Reader, trust.Options{})
	if err != nil {
		return nil, err
	}
	book, err := trust.NewBook(trust.DefaultParams(), self)
	if err != nil {
		return nil, err
	}
	for _, p := range preTrust {
		book.PreTrust(p)
	}
	sp := sentinel.DefaultParams()
	ballot, err := sentinel.NewBallot(sp)
	if err != nil {
		return nil, err
	}
	return &trustCenter{
		self: self, log: log.Named("trust"), clock: clk, minTier: minTier, faults: faults,
		anchorOf: func(string) (trust.Anchor, bool) { return trust.Anchor{}, false },
		leading:  func() bool { return false },
		signer:   signer, advertise: signer.Anchor(), positions: map[string]trust.Position{}, book: book,
		quar: map[string]bool{}, ready: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		sentinels: map[string]*sentinel.Sentinel{}, ballot: ballot, sparams: sp,
	}, nil
}

// anchor returns the anchor this node advertises now.
func (t *trustCenter) anchor() trust.Anchor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advertise
}

// Stamp implements remote.Trust.
func (t *trustCenter) Stamp() (trust.Stamp, error) {
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
	if err == nil && t.faults != nil && t.faults.Stamp != nil {
		t.faults.Stamp(&st)
	}
	return st, err
}

// Verifier implements remote.Trust.
func (t *trustCenter) Verifier(peer string) (*trust.Verifier, bool) {
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

// CatchUp implements remote.Trust.
func (t *trustCenter) CatchUp(peer string, v *trust.Verifier) {
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

// Accepted implements remote.Trust.
func (t *trustCenter) Accepted(peer string, v *trust.Verifier) {
	p := v.Position()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.positions[peer]
	if !ok || p.Later(old) || (p.Anchor.ChainID != old.Anchor.ChainID && !old.Later(p)) {
		t.positions[peer] = p
	}
}

// Betrayed implements remote.Trust.
func (t *trustCenter) Betrayed(peer, reason string) {
	t.mu.Lock()
	t.book.Betray(peer, reason, t.clock.Now())
	t.mu.Unlock()
	t.log.Error("a peer forged a hash-chain token: its trust is zero and its streams are cut", zap.String("peer", peer), zap.String("reason", reason))
}

// Distrusted implements remote.Trust.
func (t *trustCenter) Distrusted(peer string) bool {
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

// Observe implements remote.Trust and wag.Trust: o counts in this node's
// book, and goes to the leader's Sentinel — at once on the leader, else
// with the next batch its session takes.
func (t *trustCenter) Observe(o sentinel.Observation) {
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

// Ready implements remote.Evidence.
func (t *trustCenter) Ready() <-chan struct{} { return t.ready }

// Drain implements remote.Evidence: what waits, summed by node, kind and
// capability (CPU and memory as the mean of their readings), so a busy
// node sends a few observations per batch, not one per attempt.
func (t *trustCenter) Drain() []sentinel.Observation {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(len(t.pending), remote.MaxBatchItems)
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

// observedBy takes what the Waggler host observer saw (the leader's side
// of a Lead session): the observer's Sentinel and the leader's book count
// it, at the time it arrived (an observer's clock is not trusted).
func (t *trustCenter) observedBy(observer string, obs []sentinel.Observation) {
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
func (t *trustCenter) observeAsLeader(observer string, o sentinel.Observation) {
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

// Allowance implements wag.Trust: a node at the dispatch tier runs what
// its slots take, a betrayed one nothing, one on probation what it earned.
func (t *trustCenter) Allowance(node string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.book.Allowance(node, t.minTier, math.MaxInt, t.clock.Now())
}

// Rank implements wag.Trust: node's tier as a number, and -1 once it
// betrayed.
func (t *trustCenter) Rank(node string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, b := t.book.Betrayed(node); b {
		return -1
	}
	return int(t.book.Tier(node, t.clock.Now()))
}

// Quarantined implements wag.Trust: a node released from quarantine
// starts again from zero trust, on a chain verified from its anchor.
func (t *trustCenter) Quarantined(nodes map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n := range t.quar {
		if !nodes[n] {
			t.resetLocked(n)
		}
	}
	t.quar = maps.Clone(nodes)
}

// released starts node again from zero trust: it was released from
// quarantine (by the leader that applied the release).
func (t *trustCenter) released(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.quar, node)
	t.resetLocked(node)
}

// resetLocked forgets everything about node; t.mu held.
func (t *trustCenter) resetLocked(node string) {
	t.book.Reset(node)
	delete(t.positions, node)
	for _, s := range t.sentinels {
		s.Reset(node)
	}
	t.ballot.Forget(node)
	t.log.Info("a node left quarantine: its trust starts again from zero", zap.String("peer", node))
}

// verifyOutcome counts a verified attempt's vote (the leader's Verifier)
// for the subject that ran it: a node, or a worker program.
func (t *trustCenter) verifyOutcome(subject string, agreed bool) {
	k := sentinel.VerifyAgree
	if !agreed {
		k = sentinel.VerifyMismatch
	}
	t.Observe(sentinel.Observation{Node: subject, Kind: k, At: t.clock.Now()})
}

// view returns the book as this node sees it.
func (t *trustCenter) view() []trust.PeerView {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.book.View(t.clock.Now())
}

// sentinelTick runs the Sentinel on the leader: each observer's findings
// become proposals, and the ballot's decisions are committed through Raft
// (apply). quarantined is the control state's quarantine; nodes counts the
// members. Off the leader it forgets what it held: the next leader starts
// from its own observers.
func (t *trustCenter) sentinelTick(ctx context.Context, leading bool, quarantined map[string]mesh.QuarantineEntry, nodes int,
	apply func(context.Context, mesh.Command) error) {
	now := t.clock.Now()
	t.mu.Lock()
	if !leading {
		clear(t.sentinels)
		t.ballot, _ = sentinel.NewBallot(t.sparams)
		t.mu.Unlock()
		return
	}
	for observer, s := range t.sentinels {
		for _, f := range s.Evaluate(now) {
			if f.Anomalous {
				t.ballot.Add(sentinel.Proposal{Node: f.Node, Observer: observer, Score: f.Score, Reasons: f.Reasons, At: now})
			}
		}
	}
	q := make(map[string]sentinel.Quarantine, len(quarantined))
	for n, e := range quarantined {
		q[n] = sentinel.Quarantine{Since: e.Since, Reason: e.Reason, Manual: e.Manual}
	}
	decisions := t.ballot.Decide(now, len(t.sentinels), nodes, q)
	t.mu.Unlock()
	for _, d := range decisions {
		var cmd mesh.Command
		switch d.Action {
		case sentinel.QuarantineNode:
			cmd = mesh.Quarantine(d.Node, quarantineReason(d), now, false)
		case sentinel.ReleaseNode:
			cmd = mesh.Release(d.Node)
		default:
			continue
		}
		if err := apply(ctx, cmd); err != nil {
			t.log.Warn("committing the Sentinel's decision failed; it is decided again", zap.String("peer", d.Node), zap.Error(err))
			continue
		}
		if d.Action == sentinel.QuarantineNode {
			t.mu.Lock()
			t.quar[d.Node] = true // a release before the next tick still resets it
			t.mu.Unlock()
			t.log.Warn("the Sentinel quarantined a node", zap.String("peer", d.Node), zap.String("reason", d.Reason),
				zap.Strings("observers", d.Observers))
		} else {
			t.released(d.Node)
			t.log.Info("the Sentinel released a node after its cool-down", zap.String("peer", d.Node))
		}
	}
}

// quarantineReason is a decision's reason with its evidence, within the
// limit of a quarantine's reason.
func quarantineReason(d sentinel.Decision) string {
	var b strings.Builder
	b.WriteString("sentinel: " + d.Reason)
	seen := map[string]bool{}
	for _, r := range d.Evidence {
		line := fmt.Sprintf("%s %.2f: %s", r.Detector, r.Score, r.Detail)
		if seen[line] {
			continue
		}
		seen[line] = true
		if b.Len()+len(line)+2 > maxQuarantineReason {
			break
		}
		b.WriteString("; " + line)
	}
	return b.String()
}

// runTrust advertises the node's anchor when its chain changes and, on a
// server, runs the Sentinel while it leads and resets released nodes.
func (n *Node) runTrust(ctx context.Context) {
	tick := n.cfg.Clock.NewTimer(sentinelEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.trust.changed:
			a := n.trust.anchor()
			if err := n.updateMeta(func(m *mesh.NodeMeta) { m.TrustAnchor = a.Encode() }); err != nil {
				n.log.Warn("advertising the new hash-chain anchor failed", zap.Error(err))
			}
		case <-tick.C():
			tick.Reset(sentinelEvery)
			if !n.cfg.IsServer() {
				continue
			}
			st := n.mesh.State()
			q := make(map[string]bool, len(st.Quarantine))
			for name := range st.Quarantine {
				q[name] = true
			}
			n.trust.Quarantined(q)
			leading := n.mesh.Leader().IsLeader
			alive := 0
			for _, m := range n.mesh.Members() {
				if m.Status == mesh.StatusAlive || m.Status == mesh.StatusSuspect {
					alive++
				}
			}
			n.trust.sentinelTick(ctx, leading, st.Quarantine, alive, n.mesh.Apply)
		}
	}
}

// memberAnchor reads peer's anchor: the one it advertises in gossip, or
// on a server the one the control state registered (a view that lost the
// peer's metadata).
func (n *Node) memberAnchor(peer string) (trust.Anchor, bool) {
	for _, m := range n.mesh.Members() {
		if m.Name == peer && len(m.TrustAnchor) > 0 {
			a, err := trust.DecodeAnchor(m.TrustAnchor)
			return a, err == nil
		}
	}
	if n.cfg.IsServer() {
		if b, ok := n.mesh.State().Anchors[peer]; ok {
			a, err := trust.DecodeAnchor(b)
			return a, err == nil
		}
	}
	return trust.Anchor{}, false
}
