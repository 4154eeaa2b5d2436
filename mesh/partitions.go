package mesh

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Partitions. The engine's work is split into a fixed number of
// partitions, chosen when the mesh is created (Config.Partitions) and kept
// in the control state (ControlState.PartitionCount); it never changes.
// Every partition has one owner server, whose engine runs it, and an epoch
// that only grows: each assignment's epoch is above the partition's
// previous epoch and above the term of the leader that makes it
// (max(previous epoch, term) + 1), so it is above every epoch and every
// Raft term the partition was ever fenced with, and an owner's engine
// fences the partition's writes with it.
//
// The leader places the partitions: planPartitions decides, the
// reconciler applies its moves as one AssignPartitions. Under
// PlaceOnLeader every partition goes to the leader and is re-assigned in
// each new term (every engine life gets fresh epochs); under
// PlaceBalanced they spread over the eligible servers, move at once off an
// owner that is not eligible any more, and move to a server that joins
// only as many as balance needs.

// MaxPartitions bounds the partition count (the engine's bound too).
const MaxPartitions = 1024

// DefaultPartitions is the partition count of a new mesh when
// Config.Partitions is 0.
const DefaultPartitions = 16

// PartitionPlacement says where the leader places partitions.
type PartitionPlacement int

const (
	// PlaceOnLeader puts every partition on the Raft leader, re-assigned
	// with fresh epochs in every term: the engine runs on the leader only.
	PlaceOnLeader PartitionPlacement = iota
	// PlaceBalanced spreads the partitions over the eligible servers
	// (alive, not leaving, not quarantined, voters the leader reaches),
	// sizes differing by at most one.
	PlaceBalanced
)

func (p PartitionPlacement) String() string {
	switch p {
	case PlaceOnLeader:
		return "leader"
	case PlaceBalanced:
		return "balanced"
	}
	return fmt.Sprintf("placement-%d", int(p))
}

// partitionInput is what planPartitions decides from.
type partitionInput struct {
	State ControlState
	// Eligible are the servers that may own partitions, in any order.
	Eligible []string
	// Why says, when known, why a server is not eligible ("failed",
	// "quarantined", …); the moves' reasons name it.
	Why map[string]string
	// Term is the leader's Raft term, Now its clock.
	Term uint64
	Now  time.Time
	// EveryTerm re-assigns every partition assigned in an earlier term,
	// to the same owner if it stays (leader placement: each engine life
	// needs fresh epochs).
	EveryTerm bool
	// Leader, when eligible, is given at least one partition: its engine
	// runs the schedules and sweeps, and mints the ids of the instances
	// schedules start in a partition it owns.
	Leader string
}

// planPartitions returns the moves that place every partition on an
// eligible server, in partition order (nil: nothing to change):
//
//   - a partition without an owner, or whose owner is not eligible, goes
//     to the least loaded eligible server (ties: the smallest name);
//   - then, while the most loaded server owns two more than the least
//     loaded, the most loaded (ties: the smallest name) gives its highest
//     partition to the least loaded: a server that joins gets only as many
//     as balance needs, and nothing else moves;
//   - if the leader is eligible and owns none (more servers than
//     partitions), the most loaded server gives it its highest partition;
//   - with EveryTerm, a partition assigned in an earlier term is assigned
//     again, to the same server.
//
// A partition moves at most once: one that went to the least loaded is
// never taken from it again (it stays within one of the least). No count
// or no eligible server: no moves.
func planPartitions(in partitionInput) []PartitionMove {
	count := in.State.PartitionCount
	var servers []string // eligible, sorted, unique
	for _, s := range in.Eligible {
		if s != "" {
			servers = append(servers, s)
		}
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	if count <= 0 || len(servers) == 0 {
		return nil
	}
	load := make(map[string]int, len(servers))
	for _, s := range servers {
		load[s] = 0
	}
	owner := make([]string, count)
	reason := make([]string, count)
	var orphans []int
	for p := range count {
		a := in.State.Partitions[p]
		_, ok := load[a.Node]
		switch {
		case a.Node == "":
			reason[p] = "first placement"
		case !ok:
			reason[p] = fmt.Sprintf("owner %s is not an eligible server", a.Node)
			if why := in.Why[a.Node]; why != "" {
				reason[p] += " (" + why + ")"
			}
		default:
			owner[p] = a.Node
			load[a.Node]++
			continue
		}
		orphans = append(orphans, p)
	}
	// least and most pick by load, ties by name (servers is sorted).
	least := func() string {
		return slices.MinFunc(servers, func(a, b string) int { return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b)) })
	}
	most := func() string {
		return slices.MinFunc(servers, func(a, b string) int { return cmp.Or(cmp.Compare(load[b], load[a]), cmp.Compare(a, b)) })
	}
	for _, p := range orphans {
		s := least()
		owner[p] = s
		load[s]++
	}
	for {
		lo, hi := least(), most()
		if load[hi]-load[lo] <= 1 {
			break
		}
		p := count - 1
		for owner[p] != hi {
			p--
		}
		owner[p] = lo
		load[hi]--
		load[lo]++
		reason[p] = fmt.Sprintf("rebalance: %s joined", lo)
	}
	if _, ok := load[in.Leader]; ok && load[in.Leader] == 0 {
		hi := most()
		p := count - 1
		for owner[p] != hi {
			p--
		}
		owner[p] = in.Leader
		load[hi]--
		load[in.Leader]++
		reason[p] = fmt.Sprintf("the leader %s runs the schedules and sweeps", in.Leader)
	}
	var moves []PartitionMove
	for p := range count {
		cur := in.State.Partitions[p]
		why := reason[p]
		switch {
		case owner[p] != cur.Node:
		case in.EveryTerm && cur.Term < in.Term:
			why = fmt.Sprintf("new leadership term %d", in.Term)
		default:
			continue
		}
		moves = append(moves, PartitionMove{
			Partition: p, Node: owner[p], Epoch: max(cur.Epoch, in.Term) + 1, Term: in.Term, At: in.Now, Reason: why,
		})
	}
	return moves
}

// PartitionsOwnedBy returns the partitions node owns, each with its epoch,
// once the assignment is complete: the count is set, every partition has
// an owner, and every assignment was made in term or a later one (term 0
// accepts any). Otherwise it returns nil, false.
//
// Under PlaceOnLeader the leader of a term re-assigns every partition in
// that term, so a leader asking with its own term learns when the whole
// assignment of its term is in — then it owns every partition, at epochs
// above every earlier one — and starts its engine only then. Under
// PlaceBalanced assignments outlive terms: ask with 0.
func (s ControlState) PartitionsOwnedBy(node string, term uint64) (map[int]uint64, bool) {
	if s.PartitionCount == 0 {
		return nil, false
	}
	out := map[int]uint64{}
	for p := range s.PartitionCount {
		a, ok := s.Partitions[p]
		if !ok || a.Node == "" || a.Term < term {
			return nil, false
		}
		if a.Node == node {
			out[p] = a.Epoch
		}
	}
	return out, true
}
