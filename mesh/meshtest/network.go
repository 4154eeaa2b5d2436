package meshtest

import (
	"sync"
	"sync/atomic"

	"github.com/robonet/robonet/mesh"
)

// Network is the in-process "network" of a test cluster: it knows which
// node owns which gossip and Raft address, can partition the nodes into
// groups that cannot reach each other, and counts gossip bytes per node.
// Each node gets a mesh.Interceptor from it that filters and counts that
// node's outgoing traffic; since every node filters what it sends, a cut
// link is cut both ways.
type Network struct {
	mu    sync.RWMutex
	owner map[string]string // address → node name
	group map[string]int    // node → partition group; nil when healed
	sent  map[string]*atomic.Int64
	pkts  map[string]*atomic.Int64
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{
		owner: map[string]string{},
		sent:  map[string]*atomic.Int64{},
		pkts:  map[string]*atomic.Int64{},
	}
}

// Register records that addr (gossip or Raft host:port) belongs to node.
func (n *Network) Register(node string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		if a != "" {
			n.owner[a] = node
		}
	}
}

// Interceptor returns the interceptor for node's outgoing traffic.
func (n *Network) Interceptor(node string) mesh.Interceptor {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sent[node] == nil {
		n.sent[node] = new(atomic.Int64)
		n.pkts[node] = new(atomic.Int64)
	}
	return &link{n: n, from: node, sent: n.sent[node], pkts: n.pkts[node]}
}

// Partition splits the nodes into groups; nodes in different groups cannot
// reach each other. Nodes named in no group form one more group together.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[string]int{}
	for i, g := range groups {
		for _, name := range g {
			n.group[name] = i + 1
		}
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = nil
}

// Allowed reports whether from can reach the node owning addr now.
// Addresses of no registered node are always reachable.
func (n *Network) Allowed(from, addr string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.group == nil {
		return true
	}
	to, ok := n.owner[addr]
	if !ok {
		return true
	}
	return n.group[from] == n.group[to] // unnamed nodes share group 0
}

// BytesSent returns the gossip bytes node has sent so far.
func (n *Network) BytesSent(node string) int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if c := n.sent[node]; c != nil {
		return c.Load()
	}
	return 0
}

// TotalBytesSent returns the gossip bytes all nodes have sent so far, and
// how many packets or stream writes carried them.
func (n *Network) TotalBytesSent() (bytes, writes int64) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for name, c := range n.sent {
		bytes += c.Load()
		writes += n.pkts[name].Load()
	}
	return bytes, writes
}

type link struct {
	n    *Network
	from string
	sent *atomic.Int64
	pkts *atomic.Int64
}

func (l *link) Allow(addr string) bool { return l.n.Allowed(l.from, addr) }

func (l *link) Sent(_ string, n int) {
	l.sent.Add(int64(n))
	l.pkts.Add(1)
}
