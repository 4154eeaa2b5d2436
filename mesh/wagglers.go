package mesh

import (
	"cmp"
	"maps"
	"slices"
)

// Waggler roles. The leader gives every capability that an alive node
// serves one Waggler, through the control state: planWagglers decides,
// the reconciler applies its commands through Raft. A role stays where it
// is while its node is alive, not leaving and not quarantined (and, for a
// server, while the leader's Raft heartbeats reach it: a killed server's
// roles move as soon as the new leader's first heartbeat to it fails,
// without waiting for gossip to declare it dead), so a role moves only
// when it must; a new holder is the eligible node that serves the
// capability with the highest trust rank (Config.WagglerRank), then not
// the leader (so that losing the leader does not also cost a Waggler),
// then the fewest roles, then the smallest name, so Wagglers go to trusted
// nodes and spread over them; a node ranked below zero (it forged a
// hash-chain token) gets none. Every move bumps the epoch: the Router
// hands the old holder's attempts to the new one, and workers follow the
// highest epoch they see. A capability no alive node serves loses its
// role, so that its attempts wait visibly at the leader instead of at a
// node that is gone.

// wagglerCandidate is a node as planWagglers sees it.
type wagglerCandidate struct {
	Name         string
	Capabilities map[string]int
	Rank         int  // trust: higher first; below zero never a holder
	Leader       bool // the engine leader: a holder only if no other node of its rank serves the capability
}

// planWagglers returns the commands that bring the roles in line with the
// eligible nodes (alive, not leaving, not quarantined).
func planWagglers(state ControlState, eligible []wagglerCandidate) []Command {
	serving := map[string][]string{} // capability → eligible nodes serving it
	rank := map[string]int{}
	leader := map[string]int{} // 1 for the leader: ordered after the others
	for _, n := range eligible {
		if _, q := state.Quarantine[n.Name]; q || n.Rank < 0 {
			continue
		}
		rank[n.Name] = n.Rank
		if n.Leader {
			leader[n.Name] = 1
		}
		for c, size := range n.Capabilities {
			if size > 0 {
				serving[c] = append(serving[c], n.Name)
			}
		}
	}
	load := map[string]int{} // roles held by each node, as the plan goes
	for _, a := range state.Wagglers {
		if a.Node != "" {
			load[a.Node]++
		}
	}
	var cmds []Command
	for _, c := range slices.Sorted(maps.Keys(state.Wagglers)) {
		if len(serving[c]) == 0 && state.Wagglers[c].Node != "" {
			cmds = append(cmds, UnassignWaggler(c, state.Wagglers[c].Epoch))
			load[state.Wagglers[c].Node]--
		}
	}
	for _, c := range slices.Sorted(maps.Keys(serving)) {
		nodes := serving[c]
		cur := state.Wagglers[c]
		assigned := cur.Node != ""
		holder := cur.Node
		if !assigned || !slices.Contains(nodes, holder) {
			if assigned {
				load[holder]--
			}
			holder = slices.MinFunc(nodes, func(a, b string) int {
				return cmp.Or(cmp.Compare(rank[b], rank[a]), cmp.Compare(leader[a], leader[b]), cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
			})
			load[holder]++
		}
		if !assigned || holder != cur.Node {
			cmds = append(cmds, AssignWaggler(c, holder, cur.Epoch+1))
		}
	}
	return cmds
}
