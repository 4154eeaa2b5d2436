package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/hashicorp/memberlist"

	"github.com/robonet/robonet/trust"
)

// MetaLimit is memberlist's limit on a node's metadata, in bytes.
const MetaLimit = memberlist.MetaMaxSize

// metaEncodingVersion is the version of the gossip metadata encoding. A
// decoder accepts any version: unknown JSON fields are ignored, so newer
// nodes may add fields without breaking older ones. Version 2 servers
// advertise the index of their latest Raft configuration (raftStatus.Conf);
// a leader does not wait for it from a server of version 1.
const (
	metaEncodingVersion = 2
	metaConfIndexSince  = 2
)

// ErrMetaTooLarge is returned when node metadata does not fit in memberlist's
// metadata limit.
var ErrMetaTooLarge = errors.New("node metadata too large")

// wireMeta is the gossip encoding of NodeMeta plus the mesh's own Raft
// status: compact JSON with one-letter keys, because every byte counts
// against the 512-byte limit.
type wireMeta struct {
	V    int               `json:"v"`
	Name string            `json:"n"`
	Role []Role            `json:"r,omitempty"`
	Caps map[string]int    `json:"c,omitempty"`
	GRPC string            `json:"g,omitempty"`
	Raft string            `json:"a,omitempty"`
	Ver  string            `json:"s,omitempty"`
	TA   []byte            `json:"t,omitempty"`
	Wag  map[string]uint64 `json:"w,omitempty"`
	// St is the server's Raft status, maintained by the mesh: it lets
	// workers follow the leadership and lets bootstrap see which servers
	// already belong to a cluster.
	St *raftStatus `json:"x,omitempty"`
}

// raftStatus is what a node advertises about its Raft state (servers) and
// its lifecycle (all nodes).
type raftStatus struct {
	HasState bool   `json:"h,omitempty"` // has (or had) a Raft configuration: never bootstrap with it
	Leader   bool   `json:"l,omitempty"` // leads, in Term
	Term     uint64 `json:"e,omitempty"`
	Voter    bool   `json:"o,omitempty"`
	// Leaving is set by Stop before the leave broadcast: memberlist's
	// leave callback does not say whether a node left or died, so peers
	// tell the two apart by this flag in the node's last metadata.
	Leaving bool `json:"q,omitempty"`
	// Conf is the index of the latest Raft configuration the server holds.
	// Configurations are log entries and a log is replicated in order, so
	// a non-voter advertising its leader's index has the log up to it: the
	// leader promotes only such a non-voter (see planReconcile).
	Conf uint64 `json:"i,omitempty"`
	// confKnown is set on decoding when the advertiser's encoding has Conf
	// (metaConfIndexSince); a server's own status always has it.
	confKnown bool
}

// worstStatus is the largest raftStatus: the size check of metadata reserves
// room for it, so a later status change can never push metadata over the
// limit (memberlist panics on oversized metadata).
var worstStatus = raftStatus{HasState: true, Leader: true, Term: math.MaxUint64, Voter: true, Leaving: true, Conf: math.MaxUint64}

func (n NodeMeta) wire(st *raftStatus) wireMeta {
	return wireMeta{
		V: metaEncodingVersion, Name: n.Name, Role: n.Roles, Caps: n.Capabilities,
		GRPC: n.GRPCAddr, Raft: n.RaftAddr, Ver: n.Version, TA: n.TrustAnchor, Wag: n.Wagglers, St: st,
	}
}

// Encode returns the gossip encoding of n. It fails with ErrMetaTooLarge when
// n, together with the room the mesh reserves for its Raft status, exceeds
// MetaLimit.
func (n NodeMeta) Encode() ([]byte, error) {
	if err := n.checkSize(); err != nil {
		return nil, err
	}
	return json.Marshal(n.wire(nil))
}

// checkSize fails when n cannot be advertised with the largest Raft status.
func (n NodeMeta) checkSize() error {
	b, err := json.Marshal(n.wire(&worstStatus))
	if err != nil {
		return fmt.Errorf("encoding node metadata: %w", err)
	}
	if len(b) > MetaLimit {
		return fmt.Errorf("%w: %d bytes encoded (with %d reserved for the mesh), limit %d: fewer capabilities or shorter names",
			ErrMetaTooLarge, len(b), len(b)-len(mustMarshal(n.wire(nil))), MetaLimit)
	}
	return nil
}

func mustMarshal(w wireMeta) []byte {
	b, _ := json.Marshal(w) // wireMeta has only marshalable fields
	return b
}

// DecodeNodeMeta decodes gossip metadata produced by Encode (or by the mesh).
func DecodeNodeMeta(b []byte) (NodeMeta, error) {
	n, _, err := decodeWire(b)
	return n, err
}

func decodeWire(b []byte) (NodeMeta, raftStatus, error) {
	var w wireMeta
	if len(b) == 0 {
		return NodeMeta{}, raftStatus{}, errors.New("empty node metadata")
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return NodeMeta{}, raftStatus{}, fmt.Errorf("decoding node metadata: %w", err)
	}
	if err := w.check(); err != nil {
		return NodeMeta{}, raftStatus{}, fmt.Errorf("node metadata: %w", err)
	}
	n := NodeMeta{
		Name: w.Name, Roles: w.Role, Capabilities: w.Caps, GRPCAddr: w.GRPC,
		RaftAddr: w.Raft, Version: w.Ver, TrustAnchor: w.TA, Wagglers: w.Wag,
	}
	var st raftStatus
	if w.St != nil {
		st = *w.St
		st.confKnown = w.V >= metaConfIndexSince
	}
	return n, st, nil
}

// clone returns a deep copy of n.
func (n NodeMeta) clone() NodeMeta {
	n.Roles = slices.Clone(n.Roles)
	n.Capabilities = maps.Clone(n.Capabilities)
	n.TrustAnchor = slices.Clone(n.TrustAnchor)
	n.Wagglers = maps.Clone(n.Wagglers)
	return n
}

// HasRole reports whether n holds role r.
func (n NodeMeta) HasRole(r Role) bool { return slices.Contains(n.Roles, r) }

// maxPoolSize bounds an advertised pool size: no node runs more slots.
const maxPoolSize = 1 << 20

// check refuses metadata no honest node advertises: unknown roles, pool
// sizes outside 1..maxPoolSize, empty names, a trust anchor of the wrong
// size. (memberlist's 512-byte limit
// bounds its size; a node whose metadata is refused is listed without
// roles or capabilities, so no work or role goes to it.)
func (w wireMeta) check() error {
	for _, r := range w.Role {
		if r != RoleServer && r != RoleWorker {
			return fmt.Errorf("unknown role %q", string(r))
		}
	}
	for c, n := range w.Caps {
		if c == "" || n < 0 || n > maxPoolSize {
			return fmt.Errorf("capability %q with %d slots", c, n)
		}
	}
	for c := range w.Wag {
		if c == "" {
			return errors.New("a Waggler role of an empty capability")
		}
	}
	if len(w.TA) != 0 && len(w.TA) != trust.AnchorBytes {
		return fmt.Errorf("a hash-chain anchor of %d bytes, not %d", len(w.TA), trust.AnchorBytes)
	}
	return nil
}
