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
)

// NotLeaderError says that a call needs the Raft leader and where it is, if
// known. Callers redirect to LeaderGRPC (and retry, bounded, while it is
// empty during an election).
type NotLeaderError struct {
	Leader     string // name of the current leader; empty while there is none
	LeaderGRPC string // its gRPC address, from its gossip metadata
	Term       uint64 // the term this node knows the leader in
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "not the leader: no leader known (election in progress?)"
	}
	return fmt.Sprintf("not the leader: the leader is %s at %q (term %d)", e.Leader, e.LeaderGRPC, e.Term)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
