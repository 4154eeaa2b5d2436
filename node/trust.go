package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/trust/center"
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

// sentinelEvery is how often the leader runs the Sentinel over what its
// observers saw, and decides quarantines and releases.
const sentinelEvery = time.Second

// The node's trust centre (package trust/center) is what its streams and
// Wagglers ask of trust.
var (
	_ remote.Trust    = (*center.Center)(nil)
	_ remote.Evidence = (*center.Center)(nil)
	_ wag.Trust       = (*center.Center)(nil)
)

// newTrustCenter makes the node's trust centre: gossip gives the peers'
// anchors, the mesh whether this node leads.
func (n *Node) newTrustCenter(tier trust.Tier) (*center.Center, error) {
	cfg := center.Config{
		Self: n.cfg.Name, Logger: n.log, Clock: n.cfg.Clock, MinTier: tier, PreTrust: n.cfg.TrustPeers,
		AnchorOf: n.memberAnchor,
		Leading:  func() bool { return n.mesh != nil && n.mesh.Leader().IsLeader },
		MaxBatch: remote.MaxBatchItems,
	}
	if n.cfg.Faults != nil {
		cfg.StampFault = n.cfg.Faults.Stamp
	}
	return center.New(cfg)
}

// sentinelTick runs the Sentinel on the leader and commits its decisions
// through Raft; a decision that fails to commit is decided again at the
// next tick.
func (n *Node) sentinelTick(ctx context.Context, leading bool, quarantined map[string]mesh.QuarantineEntry, nodes int) {
	q := make(map[string]sentinel.Quarantine, len(quarantined))
	for name, e := range quarantined {
		q[name] = sentinel.Quarantine{Since: e.Since, Reason: e.Reason, Manual: e.Manual}
	}
	for _, d := range n.trust.Decide(leading, q, nodes) {
		var cmd mesh.Command
		switch d.Action {
		case sentinel.QuarantineNode:
			cmd = mesh.Quarantine(d.Node, quarantineReason(d), n.cfg.Clock.Now(), false)
		case sentinel.ReleaseNode:
			cmd = mesh.Release(d.Node)
		default:
			continue
		}
		if err := n.mesh.Apply(ctx, cmd); err != nil {
			n.log.Warn("committing the Sentinel's decision failed; it is decided again", zap.String("peer", d.Node), zap.Error(err))
			continue
		}
		n.trust.Committed(d)
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
		case <-n.trust.Changed():
			a := n.trust.Anchor()
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
			n.sentinelTick(ctx, leading, st.Quarantine, alive)
		}
	}
}

// memberAnchor reads peer's anchor: the one it advertises in gossip, or
// on a server the one the control state registered (a view that lost the
// peer's metadata).
func (n *Node) memberAnchor(peer string) (trust.Anchor, bool) {
	if n.mesh == nil {
		return trust.Anchor{}, false // before the mesh is made: streams wait for gossip
	}
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
