package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/robonet/robonet/internal/clock"
)

// instanceState is what the engine keeps in runner_instances.state: a small
// envelope of per-instance facts the graph does not know, around the graph
// snapshot. The workflow deadline lives here (not in the inputs record, so
// that InstanceRecord.Inputs stays exactly the bound inputs): it is written
// at submission, before the instance is claimed, and copied into every
// later snapshot. So are, for child workflows, the instance's depth and
// the versions its child workflow tasks that name no version run.
//
// Layout: byte stateTag, byte version, varint deadline (ns, 0: none),
// varint deadline at (Unix ns, 0: none), varint started at (Unix ns, 0: not
// started); version 2 then has uvarint depth, uvarint pins and, per pin,
// uvarint name length, name, uvarint version; then the graph snapshot
// (empty until the first claim starts the graph). Version 1 (no depth, no
// pins) is written when there is neither, so an instance without child
// workflows reads as before. A value that does not start with stateTag is
// read as a bare graph snapshot, as written by tools that drive the graph
// directly.
type instanceState struct {
	deadline   time.Duration // as submitted, for the error message
	deadlineAt time.Time     // zero: none
	startedAt  time.Time     // first claim; zero before
	depth      int           // among child workflows: 0 for a submitted instance
	pins       []childPin    // sorted by name
	graph      []byte        // graph.Snapshot; empty before the first claim
}

// childPin is the version a child workflow named without one runs: the
// latest registered when the instance was submitted (or, for a child
// instance, started), kept so that every attempt and every replay runs the
// same version.
type childPin struct {
	name    string
	version uint32
}

// pin returns the version pinned for the child workflow name, 0 if none.
func (s *instanceState) pin(name string) uint32 {
	for _, p := range s.pins {
		if p.name == name {
			return p.version
		}
	}
	return 0
}

const (
	stateTag     = 0xE5
	stateVersion = 2
	// statePlain is the version written without child workflow facts.
	statePlain = 1
)

// encode appends the envelope and snap (the graph snapshot to store, which
// replaces s.graph) to a new buffer.
func (s instanceState) encode(snap []byte) []byte {
	n := 2 + 3*binary.MaxVarintLen64 + len(snap)
	for _, p := range s.pins {
		n += 2*binary.MaxVarintLen64 + len(p.name)
	}
	b := make([]byte, 0, n+2*binary.MaxVarintLen64)
	v := byte(statePlain)
	if s.depth > 0 || len(s.pins) > 0 {
		v = stateVersion
	}
	b = append(b, stateTag, v)
	b = binary.AppendVarint(b, int64(s.deadline))
	b = binary.AppendVarint(b, clock.UnixNanos(s.deadlineAt))
	b = binary.AppendVarint(b, clock.UnixNanos(s.startedAt))
	if v == stateVersion {
		b = binary.AppendUvarint(b, uint64(s.depth))
		b = binary.AppendUvarint(b, uint64(len(s.pins)))
		for _, p := range s.pins {
			b = binary.AppendUvarint(b, uint64(len(p.name)))
			b = append(b, p.name...)
			b = binary.AppendUvarint(b, uint64(p.version))
		}
	}
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
	if len(b) < 2 || (b[1] != statePlain && b[1] != stateVersion) {
		return instanceState{}, fmt.Errorf("%w: unknown version", errBadState)
	}
	version := b[1]
	b = b[2:]
	var v [3]int64
	for i := range v {
		x, n := binary.Varint(b)
		if n <= 0 {
			return instanceState{}, fmt.Errorf("%w: truncated", errBadState)
		}
		v[i], b = x, b[n:]
	}
	st := instanceState{
		deadline:   time.Duration(v[0]),
		deadlineAt: clock.FromUnixNanos(v[1]),
		startedAt:  clock.FromUnixNanos(v[2]),
	}
	if version == stateVersion {
		uv := func() uint64 {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				b = nil
				return math.MaxUint64
			}
			b = b[n:]
			return x
		}
		depth, pins := uv(), uv()
		if depth > math.MaxInt32 || pins > uint64(len(b)) {
			return instanceState{}, fmt.Errorf("%w: truncated child workflow facts", errBadState)
		}
		st.depth = int(depth)
		for range pins {
			n := uv()
			if n > uint64(len(b)) {
				return instanceState{}, fmt.Errorf("%w: truncated child workflow facts", errBadState)
			}
			name := string(b[:n])
			b = b[n:]
			ver := uv()
			if ver > math.MaxUint32 {
				return instanceState{}, fmt.Errorf("%w: truncated child workflow facts", errBadState)
			}
			st.pins = append(st.pins, childPin{name: name, version: uint32(ver)})
		}
	}
	st.graph = b
	return st, nil
}
