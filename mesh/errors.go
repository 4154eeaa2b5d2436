package mesh

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader is matched (errors.Is) by every NotLeaderError.
	ErrNotLeader = errors.New("not the leader")
	// ErrNotRunning is returned by calls that need a started, not stopped,
	// mesh.
	ErrNotRunning = errors.New("mesh not running")
	// ErrNotServer is returned by Raft calls on a node that is not a server.
	ErrNotServer = errors.New("not a server")
	// ErrJoin is returned by Start when no join address answered in time.
	ErrJoin = errors.New("joining the mesh")
	// ErrPartitionCountMismatch is returned by CheckPartitions when this
	// server asked for another partition count than the mesh has.
	ErrPartitionCountMismatch = errors.New("partition count mismatch")
)

// NotLeaderError says that a call needs the leader (of Raft, and so of the
// engine) and where it is, if known. Callers redirect to LeaderGRPC (and
// retry, bounded, while it is empty during an election); the node's API
// edge maps it to UNAVAILABLE with the leader in an ErrorInfo detail.
type NotLeaderError struct {
	Leader     string // name of the current leader; empty while there is none
	LeaderGRPC string // its gRPC address, from its gossip metadata
	Term       uint64 // the term this node knows the leader in; 0: none
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "this node does not lead and knows no leader (an election is in progress)"
	}
	return fmt.Sprintf("this node does not lead; the leader is %s at %s (term %d)", e.Leader, e.LeaderGRPC, e.Term)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
