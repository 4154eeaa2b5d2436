package mesh

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Interceptor sees this node's outgoing traffic: every gossip packet, every
// gossip stream and every Raft connection. Filtering on the sending side of
// every node is enough to cut a link in both directions, because each
// node's requests and replies travel over connections it dialed itself or
// over packets it sent.
type Interceptor interface {
	// Allow reports whether traffic from this node to addr (a gossip or
	// Raft host:port) may pass now. A refused packet is dropped silently
	// (UDP semantics), a refused dial fails, and an established connection
	// fails at its next read or write and is closed.
	Allow(addr string) bool
	// Sent records n bytes of gossip (packets and streams) sent to addr.
	Sent(addr string, n int)
}

// errIntercepted is returned by dials and connections the Interceptor cut.
var errIntercepted = errors.New("mesh: link cut by interceptor")

// newGossipTransport binds memberlist's UDP+TCP transport. With port 0 the
// TCP and UDP listeners must land on the same free port, which can race with
// other processes; like memberlist itself, retry a few times.
func newGossipTransport(cfg Config, logger *memberlist.NetTransportConfig) (*memberlist.NetTransport, error) {
	tries := 1
	if cfg.BindPort == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(logger); err == nil {
			return nt, nil
		}
	}
	return nil, fmt.Errorf("binding gossip on %s: %w", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
}

// interceptedTransport wraps memberlist's transport with an Interceptor.
type interceptedTransport struct {
	*memberlist.NetTransport
	icpt Interceptor
}

var _ memberlist.NodeAwareTransport = (*interceptedTransport)(nil)

func (t *interceptedTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if !t.icpt.Allow(addr) {
		return time.Now(), nil
	}
	t.icpt.Sent(addr, len(b))
	return t.NetTransport.WriteTo(b, addr)
}

func (t *interceptedTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if !t.icpt.Allow(a.Addr) {
		return time.Now(), nil
	}
	t.icpt.Sent(a.Addr, len(b))
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *interceptedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *interceptedTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if !t.icpt.Allow(a.Addr) {
		return nil, fmt.Errorf("dial %s: %w", a.Addr, errIntercepted)
	}
	c, err := t.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &interceptedConn{Conn: c, icpt: t.icpt, addr: a.Addr, count: true}, nil
}

// interceptedConn checks the Interceptor on every read and write.
type interceptedConn struct {
	net.Conn
	icpt  Interceptor
	addr  string
	count bool // count written bytes as gossip
}

func (c *interceptedConn) Read(p []byte) (int, error) {
	if !c.icpt.Allow(c.addr) {
		_ = c.Close()
		return 0, errIntercepted
	}
	return c.Conn.Read(p)
}

func (c *interceptedConn) Write(p []byte) (int, error) {
	if !c.icpt.Allow(c.addr) {
		_ = c.Close()
		return 0, errIntercepted
	}
	n, err := c.Conn.Write(p)
	if c.count {
		c.icpt.Sent(c.addr, n)
	}
	return n, err
}

// raftStream is the Raft transport's stream layer: a TCP listener plus
// dialer that tracks every connection it made or accepted, so that Close
// really closes them (Raft's NetworkTransport leaves pooled and inbound
// connections to the peer otherwise, and their goroutines with them).
type raftStream struct {
	ln        net.Listener
	advertise net.Addr
	icpt      Interceptor
	tls       *RaftTLS // nil: plaintext

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*raftStream)(nil)

func newRaftStream(bind string, port int, advertise string, icpt Interceptor, tlsCfg *RaftTLS) (*raftStream, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("binding raft: %w", err)
	}
	s := &raftStream{ln: ln, icpt: icpt, tls: tlsCfg, conns: make(map[net.Conn]struct{})}
	bound := ln.Addr().(*net.TCPAddr)
	host := advertise
	if host == "" {
		if bound.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raft binds to %s: an advertise address is required", bound)
		}
		host = bound.IP.String()
	}
	adv, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, strconv.Itoa(bound.Port)))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("raft advertise address: %w", err)
	}
	s.advertise = adv
	return s, nil
}

func (s *raftStream) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, s: s}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// Accept returns the next inbound connection. With TLS the handshake
// happens on the connection's first read, in Raft's handler of it, so a
// peer that never completes it holds up no other; a peer refused (not a
// server of the mesh) fails that read and its connection closes.
func (s *raftStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		tc := tls.Server(c, s.tls.Server)
		_ = tc.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		c = &handshakeDeadline{Conn: tc}
	}
	return s.track(c)
}

// raftHandshakeTimeout bounds a Raft connection's TLS handshake.
const raftHandshakeTimeout = 10 * time.Second

// handshakeDeadline clears the handshake's deadline once the handshake is
// done, so Raft's own deadlines rule the connection afterwards.
type handshakeDeadline struct {
	*tls.Conn
	once sync.Once
}

func (c *handshakeDeadline) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	c.once.Do(func() { _ = c.SetDeadline(time.Time{}) })
	return c.Conn.Read(b)
}

func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	if s.icpt != nil && !s.icpt.Allow(addr) {
		return nil, fmt.Errorf("dial %s: %w", addr, errIntercepted)
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if s.icpt != nil {
		c = &interceptedConn{Conn: c, icpt: s.icpt, addr: addr}
	}
	if s.tls != nil {
		tc := tls.Client(c, s.tls.Client)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
		}
		c = tc
	}
	return s.track(c)
}

// Close closes the listener and every tracked connection.
func (s *raftStream) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[net.Conn]struct{}{}
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		_ = c.(*trackedConn).Conn.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *raftStream) Addr() net.Addr { return s.advertise }

// trackedConn removes itself from its stream layer when closed.
type trackedConn struct {
	net.Conn
	s    *raftStream
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
