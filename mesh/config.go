package mesh

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultBindAddr            = "0.0.0.0"
	DefaultBindPort            = 7946
	DefaultRaftPort            = 7947
	DefaultJoinTimeout         = 60 * time.Second
	DefaultServerStabilization = 10 * time.Second
	DefaultDeadServerGrace     = 30 * time.Second
	DefaultDeadServerTimeout   = 15 * time.Minute
	DefaultReconcileInterval   = time.Second
	DefaultReconnectInterval   = time.Second
	DefaultReconnectTimeout    = 24 * time.Hour
	DefaultLeaveTimeout        = 5 * time.Second
	DefaultEventBuffer         = 256
)

// Config configures a Mesh. The zero value of every optional field means
// "the default"; WithDefaults fills them in and New validates the result.
type Config struct {
	// Name identifies the node in the mesh and, for servers, in the Raft
	// configuration. It must be unique and stable across restarts.
	Name string

	// BindAddr and BindPort are where memberlist listens (UDP and TCP).
	// Port 0 picks a free port (see Mesh.GossipAddr).
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what other nodes use to reach
	// this one; empty/zero: the bound address.
	AdvertiseAddr string
	AdvertisePort int

	// Join lists host:port of any members. Start retries them with
	// exponential backoff until one answers or JoinTimeout passes.
	Join []string
	// JoinTimeout bounds the join retries of Start. Default 60 s.
	JoinTimeout time.Duration

	// Meta is advertised in gossip. Name is forced to Config.Name; for
	// servers RaftAddr is filled in by the mesh.
	Meta NodeMeta

	// Server makes the node a Raft server.
	Server bool
	// BootstrapExpect (servers only): the first Raft configuration is
	// bootstrapped once this many servers with no Raft state see each other
	// by gossip — by exactly one of them, the one with the lowest name, and
	// never on a node that already has Raft state. 1 is a single server;
	// 0 never bootstraps (the node waits to be added by a leader).
	BootstrapExpect int
	// DataDir holds the Raft log and stable store (raft-boltdb) and file
	// snapshots under DataDir/raft. Empty keeps Raft state in memory (tests
	// only: it is lost on Stop).
	DataDir string
	// RaftBindAddr and RaftPort are where the Raft TCP transport listens.
	// Empty address: BindAddr. Port 0 picks a free port.
	RaftBindAddr string
	RaftPort     int

	// ServerStabilization is how long a joining server must stay alive as a
	// non-voter before the leader promotes it to voter. Default 10 s.
	ServerStabilization time.Duration
	// DeadServerGrace is how long a failed non-voter stays in the Raft
	// configuration, and a failed voter when a replacement server waits
	// to take its place, before the leader removes it (never below
	// quorum). Default 30 s.
	DeadServerGrace time.Duration
	// DeadServerTimeout is how long a failed voter stays when no
	// replacement waits: long enough that a partition heals with the
	// server still a voter, which is then back as soon as Raft reaches it
	// (removed, it would have to be re-added and stabilise first).
	// Default 15 min.
	DeadServerTimeout time.Duration
	// ReconcileInterval is how often the leader reconciles the Raft
	// configuration with membership even without events. Default 1 s.
	ReconcileInterval time.Duration
	// ManualWagglers keeps the leader from placing Waggler roles (see
	// planWagglers): the roles change only by the commands applied. For
	// tests of the control state itself.
	ManualWagglers bool
	// WagglerRank, when set, ranks nodes for new Waggler roles by the
	// trust the leader has in them: a role goes to the highest-ranked
	// node serving the capability (then the one with the fewest roles),
	// and never to a node ranked below zero (it betrayed). nil: every
	// node ranks the same.
	WagglerRank func(node string) int
	// Partitions is the partition count of a mesh this server creates:
	// 1..MaxPartitions, 0 for DefaultPartitions unless PartitionsSet. The
	// first leader sets it in the control state if it took part in the
	// bootstrap (it had BootstrapExpect, no Raft state when it started,
	// and was a voter of the first configuration it saw); a leader that
	// did not and finds no count leads a mesh created before partitions
	// existed, and sets 1. A mesh keeps its count for ever, whatever
	// later servers ask (see Mesh.CheckPartitions).
	Partitions int
	// PartitionsSet says the operator gave Partitions explicitly
	// (--partitions): CheckPartitions then refuses a mesh created with
	// another count, instead of silently using it.
	PartitionsSet bool
	// PartitionPlacement says where the leader places partitions.
	// Default (zero): PlaceOnLeader.
	PartitionPlacement PartitionPlacement
	// ReconnectInterval is how often every failed (not left) server, and
	// one other failed member whose backoff ran out, is tried again, so
	// that a healed partition merges within about this interval (see
	// reconnectLoop). Default 1 s.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a failed member is tried before it is
	// forgotten. Default 24 h.
	ReconnectTimeout time.Duration
	// LeaveTimeout bounds the leave broadcast and the leadership transfer
	// of Stop (the context of Stop bounds them too). Default 5 s.
	LeaveTimeout time.Duration
	// EventBuffer is the per-subscriber buffer of membership events; a
	// subscriber that falls further behind loses the oldest events (counted
	// and logged). Default 256.
	EventBuffer int

	// GossipKey, when set, encrypts gossip with memberlist's keyring
	// (AES-128/192/256: 16, 24 or 32 bytes).
	GossipKey []byte
	// RaftTLS, when set, makes the Raft transport mutual TLS: the listener
	// accepts with Server, dials go out with Client. Only servers hold a
	// certificate both accept (node: internal/pki).
	RaftTLS *RaftTLS

	// Logger receives the mesh's logs and, routed, those of memberlist and
	// Raft. Default: no logging.
	Logger *zap.Logger

	// Memberlist, when set, is called on the memberlist configuration
	// (based on memberlist.DefaultLANConfig) after the mesh has filled it
	// in: tests tighten timings here.
	Memberlist func(*memberlist.Config)
	// Raft, when set, is called on the Raft configuration after the mesh
	// has filled it in (Raft's defaults with DefaultRaftTimings).
	Raft func(*raft.Config)

	// Interceptor, when set, sees and may drop every outgoing gossip packet,
	// gossip stream and Raft connection of this node. Tests partition a
	// cluster with it and the convergence benchmark counts bytes; production
	// leaves it nil.
	Interceptor Interceptor
}

// RaftTLS configures the Raft transport's TLS.
type RaftTLS struct {
	Server, Client *tls.Config
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.BindAddr == "" {
		c.BindAddr = DefaultBindAddr
	}
	if c.RaftBindAddr == "" {
		c.RaftBindAddr = c.BindAddr
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultJoinTimeout
	}
	if c.ServerStabilization == 0 {
		c.ServerStabilization = DefaultServerStabilization
	}
	if c.DeadServerGrace == 0 {
		c.DeadServerGrace = DefaultDeadServerGrace
	}
	if c.DeadServerTimeout == 0 {
		c.DeadServerTimeout = max(DefaultDeadServerTimeout, c.DeadServerGrace)
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.Partitions == 0 && !c.PartitionsSet {
		c.Partitions = DefaultPartitions
	}
	if c.ReconnectInterval == 0 {
		c.ReconnectInterval = DefaultReconnectInterval
	}
	if c.ReconnectTimeout == 0 {
		c.ReconnectTimeout = DefaultReconnectTimeout
	}
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = DefaultLeaveTimeout
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Join = append([]string(nil), c.Join...)
	c.GossipKey = append([]byte(nil), c.GossipKey...)
	c.Meta = c.Meta.clone()
	c.Meta.Name = c.Name
	return c
}

// validate reports the first problem of a defaulted configuration.
func (c Config) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if net.ParseIP(c.BindAddr) == nil {
		errs = append(errs, fmt.Errorf("bind address %q is not an IP address", c.BindAddr))
	}
	if c.Server && net.ParseIP(c.RaftBindAddr) == nil {
		errs = append(errs, fmt.Errorf("raft bind address %q is not an IP address", c.RaftBindAddr))
	}
	for _, p := range []struct {
		name string
		port int
	}{{"bind", c.BindPort}, {"advertise", c.AdvertisePort}, {"raft", c.RaftPort}} {
		if p.port < 0 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("%s port %d out of range", p.name, p.port))
		}
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d is negative", c.BootstrapExpect))
	}
	if c.BootstrapExpect > 0 && !c.Server {
		errs = append(errs, errors.New("bootstrap-expect needs a server"))
	}
	switch len(c.GossipKey) {
	case 0, 16, 24, 32:
	default:
		errs = append(errs, fmt.Errorf("gossip key must be 16, 24 or 32 bytes, not %d", len(c.GossipKey)))
	}
	for name, d := range map[string]time.Duration{
		"join timeout": c.JoinTimeout, "server stabilization": c.ServerStabilization,
		"dead server grace": c.DeadServerGrace, "dead server timeout": c.DeadServerTimeout, "reconcile interval": c.ReconcileInterval,
		"reconnect interval": c.ReconnectInterval, "reconnect timeout": c.ReconnectTimeout,
		"leave timeout": c.LeaveTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", name, d))
		}
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d outside 1..%d", c.Partitions, MaxPartitions))
	}
	if c.PartitionPlacement != PlaceOnLeader && c.PartitionPlacement != PlaceBalanced {
		errs = append(errs, fmt.Errorf("unknown partition placement %d", int(c.PartitionPlacement)))
	}
	if c.EventBuffer < 1 {
		errs = append(errs, fmt.Errorf("event buffer %d must be positive", c.EventBuffer))
	}
	if err := c.Meta.checkSize(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mesh config: %w", err)
	}
	return nil
}

// TestConfig returns a configuration for tests of any package: loopback,
// free ports, in-memory Raft state (set DataDir to keep it) and timings
// tightened so that failure detection, elections and reconciliation take
// tens to hundreds of milliseconds instead of seconds.
func TestConfig(name string) Config {
	return Config{
		Name:                name,
		BindAddr:            "127.0.0.1",
		RaftBindAddr:        "127.0.0.1",
		JoinTimeout:         10 * time.Second,
		ServerStabilization: 300 * time.Millisecond,
		DeadServerGrace:     time.Second,
		DeadServerTimeout:   3 * time.Second,
		ReconcileInterval:   50 * time.Millisecond,
		ReconnectInterval:   500 * time.Millisecond,
		ReconnectTimeout:    time.Minute,
		LeaveTimeout:        2 * time.Second,
		Memberlist:          TestMemberlistTimings,
		Raft:                TestRaftTimings,
	}
}

// TestMemberlistTimings tightens memberlist for in-process clusters: a
// probe every 100 ms, gossip every 20 ms, push/pull every second. A dead
// node is noticed in about half a second.
func TestMemberlistTimings(c *memberlist.Config) {
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = time.Second
	c.TCPTimeout = time.Second
	c.SuspicionMult = 2
	c.GossipToTheDeadTime = 5 * time.Second
	c.DeadNodeReclaimTime = 100 * time.Millisecond
}

// TestRaftTimings tightens Raft for in-process clusters: heartbeat,
// election and leader lease of 100 ms.
func TestRaftTimings(c *raft.Config) {
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}
