package sentinel

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/robonet/robonet/trust"
)

// Proposal is one observer's finding that a node should be quarantined.
type Proposal struct {
	Node     string
	Observer string
	Score    float64
	Reasons  []Reason
	At       time.Time
}

// Quarantine is a node's quarantine as the control state holds it.
type Quarantine struct {
	Since  time.Time
	Reason string
	Manual bool // an operator's: never released by the Sentinel
}

// Action is what a Decision does.
type Action int

// Actions.
const (
	// Quarantine a node.
	QuarantineNode Action = iota + 1
	// Release a node from the Sentinel's quarantine.
	ReleaseNode
)

// Decision is a quarantine or release the leader commits.
type Decision struct {
	Node      string
	Action    Action
	Reason    string
	Observers []string
	Evidence  []Reason
}

// Ballot collects proposals from the observers and decides quarantines
// and releases. It is not safe for concurrent use.
type Ballot struct {
	p     Params
	props map[string]map[string]Proposal // node → observer → latest proposal
}

// NewBallot returns an empty ballot.
func NewBallot(p Params) (*Ballot, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.ProposalTTL <= 0 {
		p.ProposalTTL = p.Window
	}
	return &Ballot{p: p, props: map[string]map[string]Proposal{}}, nil
}

// Add records pr, replacing the observer's earlier proposal about the
// same node (one observer counts once).
func (b *Ballot) Add(pr Proposal) {
	if b.props[pr.Node] == nil {
		b.props[pr.Node] = map[string]Proposal{}
	}
	b.props[pr.Node][pr.Observer] = pr
}

// isProof reports whether a finding is proof rather than statistics: a
// forged hash-chain token, or outvoted on two or more verified attempts —
// each decided by a majority of other, distinct nodes, which are its
// confirmations.
func isProof(r Reason) bool {
	return r.Detector == DetectChain || (r.Detector == DetectMismatch && r.Score >= 1)
}

// Forget drops the proposals about node (it was released, or left).
func (b *Ballot) Forget(node string) { delete(b.props, node) }

// Decide returns the quarantines and releases due at now, given how many
// observers exist now, how many nodes the mesh has, and the quarantines
// in force. A node is quarantined once live proposals (younger than the
// TTL) from min(Confirmations, observers) distinct observers agree — from
// one when a proposal names proof rather than statistics (isProof) —
// unless that would quarantine more than MaxQuarantined of
// the nodes (the most anomalous go first). The Sentinel's quarantines
// older than CoolDown are released; an operator's never are.
//
// A worker program (NODE/PROGRAM) is quarantined on one observer's
// proposal: only the Waggler of its capability sees what it does, and
// that Waggler could withhold its work anyway. Programs do not count
// against the nodes' share, nor take its room: quarantining a program
// leaves its node, and every other node, serving.
func (b *Ballot) Decide(now time.Time, observers, nodes int, quarantined map[string]Quarantine) []Decision {
	var out []Decision
	for _, n := range slices.Sorted(maps.Keys(quarantined)) {
		q := quarantined[n]
		if !q.Manual && now.Sub(q.Since) >= b.p.CoolDown {
			out = append(out, Decision{Node: n, Action: ReleaseNode,
				Reason: fmt.Sprintf("the cool-down of %v after %q ended", b.p.CoolDown, q.Reason)})
		}
	}
	type candidate struct {
		d     Decision
		score float64
	}
	var cands []candidate
	need := min(b.p.Confirmations, max(observers, 1))
	for node, byObs := range b.props {
		if _, in := quarantined[node]; in {
			continue
		}
		var obs []string
		var evidence []Reason
		score, proof := 0.0, false
		for o, pr := range byObs {
			if now.Sub(pr.At) >= b.p.ProposalTTL {
				delete(byObs, o)
				continue
			}
			obs = append(obs, o)
			evidence = append(evidence, pr.Reasons...)
			score = max(score, pr.Score)
			for _, r := range pr.Reasons {
				proof = proof || isProof(r)
			}
		}
		if len(byObs) == 0 {
			delete(b.props, node)
			continue
		}
		if len(obs) < need && !proof && !trust.IsProgram(node) {
			continue
		}
		slices.Sort(obs)
		reason := "anomalous behaviour confirmed by " + strings.Join(obs, ", ")
		if proof {
			reason = "proof seen by " + strings.Join(obs, ", ")
		}
		if i := slices.IndexFunc(evidence, isProof); proof && i >= 0 {
			reason += ": " + evidence[i].Detail
		} else if len(evidence) > 0 {
			reason += ": " + evidence[0].Detail
		}
		cands = append(cands, candidate{d: Decision{Node: node, Action: QuarantineNode, Reason: reason, Observers: obs, Evidence: evidence}, score: score})
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		if x.score != y.score {
			if x.score > y.score {
				return -1
			}
			return 1
		}
		return strings.Compare(x.d.Node, y.d.Node)
	})
	held := 0 // nodes quarantined and staying so
	for n := range quarantined {
		if !trust.IsProgram(n) {
			held++
		}
	}
	for _, d := range out {
		if d.Action == ReleaseNode && !trust.IsProgram(d.Node) {
			held--
		}
	}
	room := int(math.Floor(b.p.MaxQuarantined*float64(nodes))) - held
	for _, c := range cands {
		if trust.IsProgram(c.d.Node) {
			out = append(out, c.d)
			continue
		}
		if room <= 0 {
			continue
		}
		out = append(out, c.d)
		room--
	}
	return out
}
