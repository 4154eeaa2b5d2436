// Package mesh owns membership and agreement: who is in the mesh and what
// each node can do (hashicorp/memberlist gossip with node metadata), which
// server leads (a hashicorp/raft group of the server nodes), and the small
// replicated control state every server agrees on (waggler assignments with
// epochs, the quarantine list, cluster settings, the engine's partition
// count and each partition's owner). It knows nothing about workflows; the
// node package wires it to the engine.
//
// # Membership
//
// Every node runs memberlist with the LAN profile (SWIM with Lifeguard),
// tunable through Config.Memberlist. A node advertises NodeMeta — roles,
// capabilities with pool sizes, gRPC and Raft addresses, version, trust
// anchor — as compact JSON with one-letter keys inside memberlist's 512-byte
// limit. The mesh adds its own small Raft status to a server's metadata
// (has Raft state, leads in term T, is a voter) and reserves room for the
// largest such status when it checks sizes, so metadata that passes
// NodeMeta.Encode can always be advertised. The status lets workers follow
// the leadership without Raft and keeps bootstrap from starting a second
// cluster next to an existing one.
//
// memberlist's callbacks run under its locks, so they only append to an
// unbounded queue; one event loop updates the member table and fans events
// out to subscribers. Each subscriber has a bounded buffer that drops its
// oldest event when full (counted, logged): a slow subscriber can never
// hold up gossip. Start joins with exponential backoff until a member
// answers or Config.JoinTimeout passes; Stop leaves gracefully so peers see
// "left" at once instead of waiting for failure detection. Failed (not
// left) servers are retried every ReconnectInterval, other failed members
// one per interval with backoff, so both sides of a healed partition merge
// again within about a second (memberlist itself never probes a member it
// declared dead).
//
// # Raft
//
// Servers run Raft over TCP with raft-boltdb for the log and stable store
// and file snapshots under DataDir/raft (in memory when DataDir is empty,
// for tests). The first configuration is bootstrapped by exactly one node:
// when BootstrapExpect alive servers without Raft state see each other by
// gossip, the one with the lowest name bootstraps all of them. A node with
// Raft state never bootstraps, so a restart (same name, same data dir)
// simply rejoins, and a node never bootstraps with fewer servers than
// expected. (Two disjoint groups of fresh servers that each reach the
// expected count before seeing each other could each bootstrap; as with
// Consul, start servers with a common join address.)
//
// The leader reconciles the Raft configuration with membership on every
// membership change and every ReconcileInterval: alive servers not in the
// configuration join as non-voters and are promoted once alive and a
// non-voter of this leader's configuration for ServerStabilization each,
// and once they advertise the index of the leader's latest configuration
// (they have the log up to it);
// servers that leave are removed at once (a stopping server says it is
// leaving and waits, up to half of LeaveTimeout, to be out of the
// configuration before it leaves gossip, so its vote counts for the
// removal); failed
// non-voters are removed after DeadServerGrace; a failed voter stays
// through ordinary partitions — removed after DeadServerGrace only when a
// replacement server waits for its place, else after DeadServerTimeout —
// so that a healed server is a voter again as soon as Raft's heartbeats
// reach it; and never so many go that the remaining voters drop below the
// quorum of the current voters. These
// decisions are pure functions (planBootstrap, planReconcile) of the gossip
// view, the configuration and the time, tested with tables. Removal does
// not shut a server's Raft down (ShutdownOnRemove is off), so a server
// removed while it was away is simply added again when it returns.
//
// # Leadership
//
// Raft's LeaderCh and observations may drop signals, so they only wake a
// loop that reads Raft's state and publishes a Leadership value; a ticker
// bounds the delay of a lost signal. Leadership subscribers get channels of
// capacity one that always hold the newest value: a reader may miss
// intermediate values, never the latest, so acting on each value (not on
// edges) can never leave two engine runloops running. Term is the Raft term
// in which the leader was elected — the fencing token of the engine's
// writes. It is read before and after the state and only trusted when both
// reads agree, so a deposed leader never claims its successor's term.
// Raft's leader lease (LeaderLeaseTimeout) makes a leader cut off from the
// quorum step down on its own, which is what a minority partition's leader
// does.
//
// # Control state
//
// The FSM is deterministic: Apply reads only the log entry and the state —
// times (quarantine since) are supplied by the proposer, never read from a
// clock. Commands are a type byte followed by a JSON body; an unknown type
// is skipped with a warning only when its type carries IgnoreUnknown, and
// otherwise stops the node rather than let its state diverge. Rejections
// (an AssignWaggler or AssignPartitions whose epoch does not exceed the
// current one, a second SetPartitionCount) are deterministic and returned
// to the proposer from Apply. Snapshots are JSON with sorted keys, so
// equal states give equal bytes.
//
// # Partitions
//
// The engine's work is split into a fixed number of partitions, set once
// in the control state by the first leader of a new mesh (1 for a mesh
// created before partitions existed) and never changed; CheckPartitions
// tells a server started with another explicit count. Each partition has
// an owner server and an epoch above every epoch and Raft term it had
// before. The leader places them each reconciliation pass (planPartitions,
// pure and table-tested): under PlaceOnLeader all on itself, with fresh
// epochs in every term; under PlaceBalanced spread over the eligible
// servers, moved at once off one that fails, leaves or is quarantined, and
// rebalanced by as few moves as balance needs when one joins.
//
// # Testing
//
// Config.Interceptor sees every outgoing gossip packet and stream and every
// Raft connection of a node; package meshtest uses it to cut links
// (partitions) and the convergence benchmark to count gossip bytes.
// Filtering on the sending side of every node cuts a link both ways,
// because each node's requests and replies travel over packets it sent or
// connections it dialed. TestConfig tightens every timing for in-process
// clusters; package meshtest builds them.
package mesh
