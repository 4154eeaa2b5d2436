package mesh

import "fmt"

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
