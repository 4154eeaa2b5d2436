package mesh

import "time"

// Role is what a node does in the mesh.
type Role string

// Roles a node can hold (several at once).
const (
	// RoleServer: a Raft voter (or candidate voter); may lead the engine.
	RoleServer Role = "server"
	// RoleWorker: runs tasks for its capabilities.
	RoleWorker Role = "worker"
)

// MemberStatus is a node's gossip status.
type MemberStatus string

// Member statuses, from memberlist's view.
const (
	StatusAlive   MemberStatus = "alive"
	StatusSuspect MemberStatus = "suspect"
	StatusLeft    MemberStatus = "left"
	StatusFailed  MemberStatus = "failed"
)

// NodeMeta is what a node advertises to the mesh in its gossip metadata. It
// must encode within memberlist's metadata limit (512 bytes); Encode fails
// with a clear error otherwise.
type NodeMeta struct {
	Name         string
	Roles        []Role
	Capabilities map[string]int // capability → worker pool size
	GRPCAddr     string         // host:port of the node's gRPC API
	RaftAddr     string         // host:port of the Raft transport; servers only
	Version      string         // software version
	TrustAnchor  []byte         // the node's HCTH hash-chain anchor (trust.Anchor.Encode); receivers verify its stamps from it
	// Wagglers are the Waggler roles this node runs now: capability →
	// epoch. Workers follow them to find the Waggler of their capability.
	Wagglers map[string]uint64
}

// Member is one node as this node sees it.
type Member struct {
	NodeMeta
	GossipAddr string // host:port of memberlist
	Status     MemberStatus
	Leader     bool // the current Raft leader (servers only)
	Voter      bool // a Raft voter (servers only)
}

// EventKind classifies membership events.
type EventKind string

// Membership events.
const (
	EventJoin   EventKind = "join"
	EventUpdate EventKind = "update"
	EventLeave  EventKind = "leave"  // left gracefully
	EventFailed EventKind = "failed" // declared dead by the failure detector
)

// Event is a membership change delivered to subscribers.
type Event struct {
	Kind   EventKind
	Member Member
	At     time.Time
}

// Leadership is this node's view of the engine leadership. A subscriber
// always eventually sees the latest value: intermediate values may be
// coalesced, the last one never is.
type Leadership struct {
	IsLeader   bool   // this node leads
	Term       uint64 // Raft term of the current leader (the fencing token)
	Leader     string // name of the leader; empty while there is none
	LeaderGRPC string // its gRPC address, for forwarding
}
