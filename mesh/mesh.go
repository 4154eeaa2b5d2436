package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/internal/loggate"
)

// Mesh is one node's membership in the mesh and, on servers, its Raft
// group member. Create it with New, then Start and Stop it once.
type Mesh struct {
	cfg  Config
	log  *zap.Logger
	name string

	fsm        *fsm
	leadership *leaderBroadcast

	// queue carries memberlist's callbacks to the event loop, so that
	// gossip never waits for the mesh or its subscribers.
	queue *eventQueue
	// wakeRaft and wakeAdvertise are coalescing signals (capacity 1).
	wakeRaft      chan struct{}
	wakeAdvertise chan struct{}

	mu       sync.Mutex
	meta     NodeMeta   // advertised metadata
	status   raftStatus // advertised Raft status (servers)
	members  map[string]*memberRecord
	subs     map[*subscriber]struct{}
	raftConf []raft.Server // last configuration seen (servers)
	// raftConfIndex is the log index of raftConf.
	raftConfIndex uint64

	// Set by Start, read-only afterwards.
	ml         *memberlist.Memberlist
	gossipAddr string // advertised host:port (memberlist's LocalNode is not safe to read concurrently)
	gossipTr   *memberlist.NetTransport
	raft       *raft.Raft
	raftTr     *raft.NetworkTransport
	raftStore  io.Closer // the bolt store; nil in memory
	observer   *raft.Observer
	obsCh      chan raft.Observation
	hasState   bool // Raft had state at start

	// reach is which Raft peers this leader's heartbeats fail to reach.
	reach raftReach

	// keyMu serialises keyring changes (each is saved to the data dir);
	// keyring is memberlist's, nil when gossip is not encrypted (under mu).
	keyMu   sync.Mutex
	keyring *memberlist.Keyring

	// mlLog silences memberlist's log once it is shut down (logging.go).
	mlLog loggate.Gate

	advMu sync.Mutex // serialises re-advertising with leaving
	left  bool       // the leave began: never advertise again (guarded by advMu)

	// life is the mesh's life: New, Running from Start, Stopped from the
	// first Stop or Halt (a Start that fails stops it too); its group
	// holds the mesh's loops. Its lock is taken inside mu, never around it.
	life   lifecycle.Base
	stopCh chan struct{}
	calls  sync.WaitGroup // waiters of Raft futures started by Apply/Barrier
}

// memberRecord is what the mesh knows about one member.
type memberRecord struct {
	Member
	since  time.Time  // when it entered Status
	status raftStatus // its advertised Raft status
}

// New validates cfg (after WithDefaults) and returns a Mesh that is not yet
// running.
func New(cfg Config) (*Mesh, error) {
	cfg = cfg.WithDefaults()
	if cfg.Server && !cfg.Meta.HasRole(RoleServer) {
		cfg.Meta.Roles = append(cfg.Meta.Roles, RoleServer)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.Named("mesh").With(zap.String("node", cfg.Name))
	m := &Mesh{
		cfg:           cfg,
		log:           log,
		name:          cfg.Name,
		fsm:           newFSM(log.Named("fsm")),
		leadership:    newLeaderBroadcast(),
		queue:         newEventQueue(),
		wakeRaft:      make(chan struct{}, 1),
		wakeAdvertise: make(chan struct{}, 1),
		meta:          cfg.Meta,
		members:       map[string]*memberRecord{},
		subs:          map[*subscriber]struct{}{},
		stopCh:        make(chan struct{}),
	}
	return m, nil
}

// Name returns the node's name.
func (m *Mesh) Name() string { return m.name }

// GossipAddr returns the host:port memberlist advertises (what other nodes
// pass to Join); empty before Start.
func (m *Mesh) GossipAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gossipAddr
}

// Start binds gossip (and, on servers, the Raft transport and stores),
// starts Raft, joins the mesh — retrying Config.Join with backoff until one
// answers or JoinTimeout passes — and returns once everything runs in the
// background. It does not wait for a leader. On error nothing keeps running.
func (m *Mesh) Start(ctx context.Context) error {
	if err := m.life.Start("mesh"); err != nil {
		return err
	}

	if err := m.startLocked(); err != nil {
		return errors.Join(err, m.shutdown(context.Background(), false))
	}
	if err := m.join(ctx); err != nil {
		return errors.Join(err, m.shutdown(context.Background(), false))
	}
	m.log.Info("mesh started", zap.String("gossip", m.GossipAddr()), zap.Bool("server", m.cfg.Server),
		zap.String("raft", m.meta.RaftAddr))
	return nil
}

// advertiseIP returns host as memberlist needs it, an IP address: a name
// (a container's service name, say) is resolved, IPv4 first. Raft and gRPC
// keep the name and resolve it when they dial.
func advertiseIP(host string) (string, error) {
	if host == "" || net.ParseIP(host) != nil {
		return host, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return "", fmt.Errorf("gossip advertise address %q is not an IP address and does not resolve (give --advertise an address other nodes reach this node at): %w", host, err)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	return ips[0].String(), nil
}

// startLocked builds the transports, Raft and memberlist and starts the
// loops. Fields it sets are published under mu for readers such as
// GossipAddr.
func (m *Mesh) startLocked() error {
	cfg := m.cfg
	mlLog := memberlistLogger(m.log.Named("memberlist"), &m.mlLog)
	nt, err := newGossipTransport(cfg, &memberlist.NetTransportConfig{
		BindAddrs: []string{cfg.BindAddr}, BindPort: cfg.BindPort, Logger: mlLog,
	})
	if err != nil {
		return err
	}
	m.gossipTr = nt
	advHost, err := advertiseIP(cfg.AdvertiseAddr)
	if err != nil {
		return err
	}
	advIP, advPort, err := nt.FinalAdvertiseAddr(advHost, cfg.AdvertisePort)
	if err != nil {
		return fmt.Errorf("gossip advertise address: %w", err)
	}
	if cfg.AdvertiseAddr == "" || advPort == 0 {
		advPort = nt.GetAutoBindPort()
	}

	if cfg.Server {
		raftHost := cfg.AdvertiseAddr
		if raftHost == "" && net.ParseIP(cfg.RaftBindAddr).IsUnspecified() {
			raftHost = advIP.String()
		}
		if err := m.startRaft(raftHost); err != nil {
			return err
		}
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = nt.GetAutoBindPort()
	mc.AdvertiseAddr = advIP.String()
	mc.AdvertisePort = advPort
	if cfg.Interceptor != nil {
		mc.Transport = &interceptedTransport{NetTransport: nt, icpt: cfg.Interceptor}
	} else {
		mc.Transport = nt
	}
	mc.Delegate = &delegate{m: m}
	mc.Events = &eventDelegate{m: m}
	mc.Logger = mlLog
	keys, err := m.initialKeys()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		if mc.Keyring, err = newKeyring(keys); err != nil {
			return fmt.Errorf("gossip keyring: %w", err)
		}
		m.mu.Lock()
		m.keyring = mc.Keyring // memberlist keeps this one: changes to it apply
		m.mu.Unlock()
	}
	if cfg.Memberlist != nil {
		cfg.Memberlist(mc)
	}
	mc.LogOutput = nil // we log through zap; memberlist refuses both
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("starting memberlist: %w", err)
	}
	m.mu.Lock()
	m.ml = ml
	m.gossipAddr = net.JoinHostPort(advIP.String(), strconv.Itoa(advPort))
	m.mu.Unlock()

	m.life.Go(m.eventLoop)
	m.life.Go(m.advertiseLoop)
	m.life.Go(m.reconnectLoop)
	if cfg.Server {
		m.life.Go(m.raftLoop)
	}
	return nil
}

// join contacts cfg.Join with exponential backoff (100 ms doubling to 5 s)
// until one answers, ctx ends or JoinTimeout passes.
func (m *Mesh) join(ctx context.Context) error {
	if len(m.cfg.Join) == 0 {
		return nil
	}
	deadline := time.NewTimer(m.cfg.JoinTimeout)
	defer deadline.Stop()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		n, err := m.ml.Join(m.cfg.Join)
		if n > 0 {
			m.log.Info("joined the mesh", zap.Int("contacted", n), zap.Int("attempt", attempt))
			return nil
		}
		m.log.Debug("join failed; retrying", zap.Error(err), zap.Int("attempt", attempt), zap.Duration("backoff", backoff))
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
		case <-deadline.C:
			wait.Stop()
			return fmt.Errorf("%w via %s: no member answered within %v: %w",
				ErrJoin, strings.Join(m.cfg.Join, ", "), m.cfg.JoinTimeout, err)
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("%w via %s: %w", ErrJoin, strings.Join(m.cfg.Join, ", "), ctx.Err())
		case <-m.stopCh:
			wait.Stop()
			return fmt.Errorf("%w: %w", ErrJoin, ErrNotRunning)
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Stop leaves the mesh gracefully — a leading server first hands
// leadership over, then memberlist broadcasts the leave so that peers do
// not wait for failure detection — and shuts everything down, waiting for
// every goroutine the mesh owns. It is idempotent: later calls wait for the
// first and return its result. ctx bounds the graceful part.
func (m *Mesh) Stop(ctx context.Context) error { return m.shutdown(ctx, true) }

// Halt stops the mesh without leaving, as if the process died: no
// leadership transfer, no leave broadcast, so peers detect a failure.
// For tests and fault injection; idempotent like Stop (whichever comes
// first decides how the node goes).
func (m *Mesh) Halt() error { return m.shutdown(context.Background(), false) }

func (m *Mesh) shutdown(ctx context.Context, graceful bool) error {
	// A later call waits for the first.
	return m.life.Stop(ctx, func(was lifecycle.State) error {
		m.admitNoMoreCalls()
		if was != lifecycle.Running {
			m.closeSubscribers()
			return nil
		}
		return m.teardown(ctx, graceful)
	})
}

// admitNoMoreCalls is called once the mesh is marked stopped. A call that
// saw it running (raftOrErr) holds mu until it is counted in calls: taking
// mu once orders every such call before teardown waits for calls, and
// every later call sees the mesh stopped.
func (m *Mesh) admitNoMoreCalls() {
	m.mu.Lock()
	defer m.mu.Unlock()
}

// teardown stops in reverse dependency order: hand over leadership and
// leave (graceful only), stop the loops and Raft, close the Raft transport
// and store, shut memberlist down.
func (m *Mesh) teardown(ctx context.Context, graceful bool) error {
	var errs []error
	if graceful {
		errs = append(errs, m.leave(ctx))
	}
	close(m.stopCh)
	// The loops and the calls admitted before stopping (Apply, Barrier,
	// the leave's transfer) end first, Raft after. While Raft runs it
	// answers every future it accepted: applied, not leader, or leadership
	// lost once the lease runs out. A shutdown does not: hashicorp/raft's
	// state machine loop can end with committed commands still queued for
	// it, and their futures are never answered (log futures, unlike its
	// other kinds, do not watch for the shutdown). No call is admitted
	// after stopping is set, so none can be left waiting.
	m.life.Wait()
	m.calls.Wait()
	if m.raft != nil {
		m.raft.DeregisterObserver(m.observer)
		if err := m.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
	}
	m.leadership.publish(Leadership{})
	m.leadership.close()
	m.closeSubscribers()
	if m.raftTr != nil {
		if err := m.raftTr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing raft transport: %w", err))
		}
	}
	if m.raftStore != nil {
		if err := m.raftStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing raft store: %w", err))
		}
	}
	if m.ml != nil {
		if err := m.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("memberlist shutdown: %w", err))
		}
		m.mlLog.Close()
	} else if m.gossipTr != nil {
		if err := m.gossipTr.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("gossip transport shutdown: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mesh stop: %w", err)
	}
	m.log.Info("mesh stopped", zap.Bool("graceful", graceful))
	return nil
}

// leave hands leadership over (if this server leads and has peers) and
// broadcasts the leave, each bounded by LeaveTimeout and ctx.
func (m *Mesh) leave(ctx context.Context) error {
	// Each step gets its own budget, all within ctx: a slow transfer must
	// not eat the leave broadcast's time.
	budget := func(d time.Duration) time.Duration {
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		return max(d, time.Millisecond)
	}
	if m.raft != nil && m.raft.State() == raft.Leader && m.otherVoters() > 0 {
		tctx, cancel := context.WithTimeout(ctx, budget(m.cfg.LeaveTimeout))
		err := m.await(tctx, m.raft.LeadershipTransfer())
		cancel()
		if err != nil {
			// Not fatal: the peers elect a new leader after our shutdown.
			m.log.Warn("leadership transfer failed; stepping down by shutting down", zap.Error(err))
		} else {
			m.log.Info("leadership transferred before leaving")
		}
	}
	if m.ml == nil {
		return nil
	}
	// Mark the metadata first, so that peers report "left", not "failed",
	// when the leave arrives (see raftStatus.Leaving). It is best effort:
	// a peer that misses it reports a failure instead, and the leader then
	// removes the server after DeadServerGrace instead of at once.
	m.mu.Lock()
	m.status.Leaving = true
	m.mu.Unlock()
	// advMu keeps the advertise loop from superseding this update (which
	// would end its broadcast early) and, once left, from advertising
	// again (an alive message after the leave would resurrect the node).
	m.advMu.Lock()
	defer m.advMu.Unlock()
	m.left = true
	if err := m.ml.UpdateNode(budget(m.cfg.LeaveTimeout / 4)); err != nil {
		m.log.Debug("leaving flag broadcast not confirmed", zap.Error(err))
	}
	m.awaitRemoval(ctx, budget(m.cfg.LeaveTimeout/2))
	if err := m.ml.Leave(budget(m.cfg.LeaveTimeout)); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	return nil
}

// awaitRemoval waits, up to d, until this server is out of the Raft
// configuration: the leader removes a server as soon as it sees the
// leaving flag, and waiting for it (as Consul's servers do) lets the
// removal commit with this server's vote still counted — the last but one
// server of a mesh can leave without taking the quorum with it — and means
// a leader that missed the leave broadcast does not take the server for
// failed instead. A server that leads (it had no other voter to hand over
// to, or the transfer failed) does not wait: a leader never removes
// itself. Not removed in time, it leaves anyway; the leader then removes
// it once gossip reports it gone.
func (m *Mesh) awaitRemoval(ctx context.Context, d time.Duration) {
	if m.raft == nil || m.raft.State() == raft.Leader {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		f := m.raft.GetConfiguration()
		if f.Error() != nil {
			return
		}
		if !slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == m.name }) {
			m.log.Info("out of the raft configuration: leaving")
			return // removed, or never in a configuration
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			m.log.Info("still in the raft configuration when leaving: the leader removes this server once gossip reports it gone", zap.Duration("waited", d))
			return
		case <-poll.C:
		}
	}
}

// otherVoters counts the voters of the last seen configuration other than
// this node.
func (m *Mesh) otherVoters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.raftConf {
		if s.Suffrage == raft.Voter && string(s.ID) != m.name {
			n++
		}
	}
	return n
}

// await waits for a Raft future until it resolves or ctx ends. The waiting
// goroutine is owned by the mesh: Stop waits for it before it shuts Raft
// down, since a running Raft answers every future it accepted and a shut
// down one may not (teardown).
func (m *Mesh) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	m.calls.Add(1)
	go func() {
		defer m.calls.Done()
		done <- f.Error()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Members returns every member this node knows, sorted by name, including
// those that left or failed recently. Leader and Voter are filled for
// servers (from Raft on a server, from gossip on a worker).
func (m *Mesh) Members() []Member {
	m.mu.Lock()
	ml := m.ml
	m.mu.Unlock()
	suspect := map[string]bool{}
	if ml != nil {
		for _, n := range ml.Members() {
			if n.State == memberlist.StateSuspect {
				suspect[n.Name] = true
			}
		}
	}
	lead := m.leadership.current()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, r := range m.members {
		mem := m.memberLocked(r, lead)
		if suspect[mem.Name] && mem.Status == StatusAlive {
			mem.Status = StatusSuspect
		}
		out = append(out, mem)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// memberLocked returns a copy of r with Leader and Voter filled in.
func (m *Mesh) memberLocked(r *memberRecord, lead Leadership) Member {
	mem := r.Member
	mem.NodeMeta = mem.clone()
	if !mem.HasRole(RoleServer) {
		return mem
	}
	mem.Leader = lead.Leader != "" && lead.Leader == mem.Name
	if m.cfg.Server {
		for _, s := range m.raftConf {
			if string(s.ID) == mem.Name {
				mem.Voter = s.Suffrage == raft.Voter
			}
		}
	} else {
		mem.Voter = r.status.Voter
	}
	return mem
}

// UpdateMeta replaces the advertised metadata and re-advertises it. Name
// and, on servers, RaftAddr and the server role are kept by the mesh. It
// fails with ErrMetaTooLarge when the metadata does not fit.
func (m *Mesh) UpdateMeta(meta NodeMeta) error {
	meta = meta.clone()
	m.mu.Lock()
	meta.Name = m.name
	if m.cfg.Server {
		meta.RaftAddr = m.meta.RaftAddr
		if !meta.HasRole(RoleServer) {
			meta.Roles = append(meta.Roles, RoleServer)
		}
	}
	if err := meta.checkSize(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.meta = meta
	m.mu.Unlock()
	signal(m.wakeAdvertise)
	return nil
}

// signal sends on a coalescing channel of capacity 1 without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// advertiseLoop re-advertises the local node (memberlist UpdateNode) when
// its metadata or Raft status changed. UpdateNode waits for the broadcast,
// so it runs here rather than in the caller.
func (m *Mesh) advertiseLoop() {
	for {
		select {
		case <-m.stopCh:
			return
		case <-m.wakeAdvertise:
		}
		m.advMu.Lock()
		if !m.left {
			if err := m.ml.UpdateNode(m.cfg.LeaveTimeout); err != nil {
				m.log.Debug("metadata update broadcast not confirmed", zap.Error(err))
			}
		}
		m.advMu.Unlock()
	}
}

// encodeLocalMeta is the Delegate's view of the local metadata.
func (m *Mesh) encodeLocalMeta(limit int) []byte {
	m.mu.Lock()
	meta, st := m.meta, m.status
	m.mu.Unlock()
	var stp *raftStatus
	if m.cfg.Server || st != (raftStatus{}) {
		stp = &st
	}
	b := mustMarshal(meta.wire(stp))
	if len(b) > limit { // cannot happen: sizes are checked with the largest status
		m.log.Error("node metadata over the limit; advertising without Raft status", zap.Int("bytes", len(b)))
		b = mustMarshal(meta.wire(nil))
		if len(b) > limit {
			return nil
		}
	}
	return b
}

// reconnectBackoffMax caps the backoff of a failed member that is not a
// server.
const reconnectBackoffMax = 30 * time.Second

// reconnectLoop retries failed (not left) members, so that the two sides of
// a healed partition merge without waiting for a push/pull to happen to
// cross it (memberlist does not probe a member it declared dead):
//
//   - every failed server each ReconnectInterval: there are few, and a
//     server back in the mesh is a voter back in the quorum;
//   - one other failed member per tick, among those whose backoff (from
//     ReconnectInterval, doubling up to reconnectBackoffMax) has run out:
//     serf's bound on what reconnecting costs a large mesh, where every
//     node reconnecting to every failed member at once costs a push/pull
//     each, and enough CPU to cause the very probe timeouts that make more
//     members look failed.
//
// A retry first dials the member's gossip port (cancelled by Stop; an
// unreachable member costs nothing else), then joins through it. Members
// failed longer than ReconnectTimeout ago are forgotten.
func (m *Mesh) reconnectLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(m.cfg.ReconnectInterval)
	defer t.Stop()
	type retry struct {
		next    time.Time
		backoff time.Duration
	}
	retries := map[string]*retry{}
	var tries sync.WaitGroup
	defer tries.Wait()
	inflight := map[string]bool{}
	var mu sync.Mutex // guards inflight
	for {
		select {
		case <-m.stopCh:
			return
		case <-t.C:
		}
		now := time.Now()
		type due struct {
			addr string
			rt   *retry
		}
		var servers []string // gossip addresses due for a retry
		var others []due
		m.mu.Lock()
		for name, r := range m.members {
			switch {
			case r.Status == StatusAlive || name == m.name:
				delete(retries, name)
			case now.Sub(r.since) > m.cfg.ReconnectTimeout:
				delete(m.members, name)
				delete(retries, name)
			case r.Status == StatusFailed && r.HasRole(RoleServer):
				servers = append(servers, r.GossipAddr)
			case r.Status == StatusFailed:
				rt := retries[name]
				if rt == nil {
					rt = &retry{backoff: m.cfg.ReconnectInterval}
					retries[name] = rt
				}
				if !now.Before(rt.next) {
					others = append(others, due{r.GossipAddr, rt})
				}
			}
		}
		m.mu.Unlock()
		if len(others) > 0 {
			pick := others[rand.IntN(len(others))]
			servers = append(servers, pick.addr)
			pick.rt.next = now.Add(pick.rt.backoff)
			pick.rt.backoff = min(2*pick.rt.backoff, reconnectBackoffMax)
		}
		for _, addr := range servers {
			mu.Lock()
			busy := inflight[addr]
			inflight[addr] = true
			mu.Unlock()
			if busy {
				continue // the previous try is still dialling
			}
			tries.Go(func() {
				defer func() {
					mu.Lock()
					delete(inflight, addr)
					mu.Unlock()
				}()
				m.reconnect(ctx, addr)
			})
		}
	}
}

// reconnect tries one failed member at addr.
func (m *Mesh) reconnect(ctx context.Context, addr string) {
	if m.cfg.Interceptor != nil && !m.cfg.Interceptor.Allow(addr) {
		return // a test's partition: the dial below would bypass it
	}
	dctx, cancel := context.WithTimeout(ctx, max(m.cfg.ReconnectInterval, time.Second))
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		m.log.Debug("failed member still unreachable", zap.String("addr", addr), zap.Error(err))
		return
	}
	_ = conn.Close() // memberlist ignores a stream that ends before its first byte
	if ctx.Err() != nil {
		return
	}
	if n, err := m.ml.Join([]string{addr}); n > 0 {
		m.log.Debug("reconnected to a failed member", zap.String("addr", addr))
	} else {
		m.log.Debug("failed member reachable but the join failed", zap.String("addr", addr), zap.Error(err))
	}
}

func gossipAddr(n *memberlist.Node) string {
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// RaftAddr returns the host:port this server advertises for Raft; empty on
// workers and before Start.
func (m *Mesh) RaftAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta.RaftAddr
}
