package node

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/robonet/robonet/internal/version"
	"github.com/robonet/robonet/mesh"
)

// meshConfig is the mesh's configuration: cfg.Mesh's tuning with the
// node's identity, addresses and roles. The gRPC listener is open, so the
// metadata carries its actual address.
func (n *Node) meshConfig() (mesh.Config, error) {
	c := n.cfg
	mc := c.Mesh
	mc.Name = c.Name
	var err error
	if mc.BindAddr, mc.BindPort, err = splitHostPort(c.GossipAddr); err != nil {
		return mc, fmt.Errorf("gossip address: %w", err)
	}
	if mc.RaftBindAddr, mc.RaftPort, err = splitHostPort(c.RaftAddr); err != nil {
		return mc, fmt.Errorf("raft address: %w", err)
	}
	mc.BindAddr, mc.RaftBindAddr = ipHost(mc.BindAddr), ipHost(mc.RaftBindAddr)
	mc.AdvertiseAddr = c.Advertise
	mc.Join = c.Join
	mc.Server = c.IsServer()
	mc.BootstrapExpect = c.BootstrapExpect
	mc.DataDir = filepath.Join(c.DataDir, "mesh")
	mc.GossipKey = c.GossipKey
	if n.id != nil && mc.Server {
		mc.RaftTLS = &mesh.RaftTLS{Server: n.id.RaftServerTLS(), Client: n.id.RaftClientTLS()}
	}
	mc.Logger = c.Logger
	if mc.Server && mc.BootstrapExpect == 1 && len(mc.Join) == 0 && mc.Raft == nil {
		mc.Raft = singleServerRaftTimings
	}
	roles := []mesh.Role{mesh.RoleWorker}
	if mc.Server {
		roles = []mesh.Role{mesh.RoleServer, mesh.RoleWorker}
	}
	mc.Meta = mesh.NodeMeta{
		Name:         c.Name,
		Roles:        roles,
		Capabilities: c.Capabilities,
		GRPCAddr:     n.advertisedGRPC(c.Advertise),
		Version:      Version(),
		TrustAnchor:  n.trust.Anchor().Encode(),
	}
	mc.WagglerRank = n.wagglerRank
	return mc, nil
}

// advertisedGRPC is the gRPC address other nodes forward to: the
// listener's port on the advertised host, or on the listener's own host;
// empty when neither names a reachable host (a wildcard bind without
// Advertise), until advertiseGRPC fills it in after the mesh started.
func (n *Node) advertisedGRPC(host string) string {
	addr := n.grpcLis.Addr().(*net.TCPAddr)
	if host == "" {
		if addr.IP.IsUnspecified() {
			return ""
		}
		host = addr.IP.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// advertiseGRPC completes the gossip metadata of a node whose gRPC
// listener binds a wildcard address and that was given no Advertise host:
// it advertises the listener's port on the host gossip advertises.
func (n *Node) advertiseGRPC() error {
	n.metaMu.Lock()
	have := n.meta.GRPCAddr != ""
	n.metaMu.Unlock()
	if have {
		return nil
	}
	host, _, err := net.SplitHostPort(n.mesh.GossipAddr())
	if err != nil {
		return fmt.Errorf("the gossip address %q: %w", n.mesh.GossipAddr(), err)
	}
	if err := n.updateMeta(func(m *mesh.NodeMeta) { m.GRPCAddr = n.advertisedGRPC(host) }); err != nil {
		return fmt.Errorf("advertising the gRPC address: %w", err)
	}
	return nil
}

// singleServerRaftTimings shorten Raft's timeouts for a node that starts a
// mesh as its only server, so that it elects itself in a few hundred
// milliseconds instead of 1–2 s (Raft's default heartbeat timeout of 1 s,
// randomised up to twice that): the single-node quick start stays as
// quick as it was before there was a Raft. These timings suit loopback and
// LANs; servers of a mesh of several keep mesh.DefaultRaftTimings.
func singleServerRaftTimings(c *raft.Config) {
	c.HeartbeatTimeout = 250 * time.Millisecond
	c.ElectionTimeout = 250 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
}

// ipHost maps "localhost" to its IPv4 address: gossip and Raft bind IP
// addresses only.
func ipHost(h string) string {
	if h == "localhost" {
		return "127.0.0.1"
	}
	return h
}

func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, int(p), nil
}

// Version is the software version a node advertises: the module version
// it was built as, or "dev".
func Version() string { return version.Version() }
