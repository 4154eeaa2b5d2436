package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/robonet/robonet/internal/clock"
)

// instanceState is what the engine keeps in runner_instances.state: a small
// envelope of per-instance facts the graph does not know, around the graph
// snapshot. The workflow deadline lives here (not in the inputs record, so
// that InstanceRecord.Inputs stays exactly the bound inputs): it is written
// at submission, before the instance is claimed, and copied into every
// later snapshot.
//
// Layout: byte stateTag, byte version (1), varint deadline (ns, 0: none),
// varint deadline at (Unix ns, 0: none), varint started at (Unix ns, 0: not
// started), then the graph snapshot (empty until the first claim starts the
// graph). A value that does not start with stateTag is read as a bare graph
// snapshot, as written by tools that drive the graph directly.
type instanceState struct {
	deadline   time.Duration // as submitted, for the error message
	deadlineAt time.Time     // zero: none
	startedAt  time.Time     // first claim; zero before
	graph      []byte        // graph.Snapshot; empty before the first claim
}

const (
	stateTag     = 0xE5
	stateVersion = 1
)

// encode appends the envelope and snap (the graph snapshot to store, which
// replaces s.graph) to a new buffer.
func (s instanceState) encode(snap []byte) []byte {
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(snap))
	b = append(b, stateTag, stateVersion)
	b = binary.AppendVarint(b, int64(s.deadline))
	b = binary.AppendVarint(b, clock.UnixNanos(s.deadlineAt))
	b = binary.AppendVarint(b, clock.UnixNanos(s.startedAt))
	return append(b, snap...)
}

var errBadState = errors.New("invalid instance state")

// decodeState reads what encode wrote. The graph snapshot aliases b.
func decodeState(b []byte) (instanceState, error) {
	if len(b) == 0 {
		return instanceState{}, nil
	}
	if b[0] != stateTag {
		return instanceState{graph: b}, nil
	}
	if len(b) < 2 || b[1] != stateVersion {
		return instanceState{}, fmt.Errorf("%w: unknown version", errBadState)
	}
	b = b[2:]
	var v [3]int64
	for i := range v {
		x, n := binary.Varint(b)
		if n <= 0 {
			return instanceState{}, fmt.Errorf("%w: truncated", errBadState)
		}
		v[i], b = x, b[n:]
	}
	return instanceState{
		deadline:   time.Duration(v[0]),
		deadlineAt: clock.FromUnixNanos(v[1]),
		startedAt:  clock.FromUnixNanos(v[2]),
		graph:      b,
	}, nil
}
