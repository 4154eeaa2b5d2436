package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/zap"
)

// startRaft opens the stores, binds the transport and starts Raft. host is
// the address advertised for Raft (empty: the bound one).
func (m *Mesh) startRaft(host string) error {
	cfg := m.cfg
	hl := newHCLog(m.log.Named("raft"))

	stream, err := newRaftStream(cfg.RaftBindAddr, cfg.RaftPort, host, cfg.Interceptor, cfg.RaftTLS)
	if err != nil {
		return err
	}
	// MaxRPCsInFlight 1 turns hashicorp/raft's pipeline replication off.
	// With it on, a pipeline whose responses nobody read any more (its
	// reader returns when a follower answers Success=false, or when
	// replication stops) parked one goroutine sending and the other
	// handing over a response; only closing the pipeline frees them, and
	// that is deferred in the goroutine they block, so Shutdown waited for
	// ever (seen once in
	// CI: TestRestartEveryServer/stop hung ten minutes in Raft's
	// shutdown). The control state is small and rare: synchronous
	// replication costs it nothing that matters.
	m.raftTr = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl, MaxRPCsInFlight: 1,
	})
	m.mu.Lock()
	m.meta.RaftAddr = stream.Addr().String()
	m.mu.Unlock()

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.DataDir == "" {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		dir := filepath.Join(cfg.DataDir, "raft")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("raft data dir: %w", err)
		}
		bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		if err != nil {
			return fmt.Errorf("opening raft store in %s: %w", dir, err)
		}
		m.raftStore = bolt
		if logs, err = raft.NewLogCache(512, bolt); err != nil {
			return fmt.Errorf("raft log cache: %w", err)
		}
		stable = bolt
		if snaps, err = raft.NewFileSnapshotStoreWithLogger(dir, 2, hl); err != nil {
			return fmt.Errorf("raft snapshot store in %s: %w", dir, err)
		}
	}
	hasState, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("reading raft state: %w", err)
	}
	m.hasState = hasState

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Name)
	rc.Logger = hl
	// A server removed while it was down must be able to be added back
	// when it returns, so removal must not shut its Raft down.
	rc.ShutdownOnRemove = false
	rc.NoLegacyTelemetry = true
	DefaultRaftTimings(rc)
	if cfg.Raft != nil {
		cfg.Raft(rc)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("raft config: %w", err)
	}
	r, err := raft.NewRaft(rc, m.fsm, logs, stable, snaps, m.raftTr)
	if err != nil {
		return fmt.Errorf("starting raft: %w", err)
	}
	m.raft = r
	// Observations only wake the loop, which then reads the authoritative
	// state; a dropped observation (non-blocking) loses nothing.
	m.obsCh = make(chan raft.Observation, 16)
	m.observer = raft.NewObserver(m.obsCh, false, func(o *raft.Observation) bool {
		switch d := o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState, raft.PeerObservation:
			return true
		case raft.FailedHeartbeatObservation:
			// Recorded here, in Raft's goroutine, not from the channel:
			// the filter sees every observation, the channel may drop.
			m.reach.failed(string(d.PeerID), r.CurrentTerm())
			return true
		case raft.ResumedHeartbeatObservation:
			m.reach.resumed(string(d.PeerID))
			return true
		}
		return false
	})
	r.RegisterObserver(m.observer)
	m.status.HasState = hasState
	return nil
}

// DefaultRaftTimings are the Raft timings of a mesh's servers: half of
// Raft's defaults (a follower that hears nothing for 0.5–1 s starts an
// election, so a killed leader is replaced in about a second instead of
// two), for servers on one LAN or data centre. Pre-vote (Raft's default)
// keeps a server that returns from a partition from disrupting the leader
// with a higher term, and the leader steps down once it has not reached a
// quorum for LeaderLeaseTimeout. docs/benchmarks.md has the failover and
// the leader changes under load they give; Config.Raft changes them.
func DefaultRaftTimings(c *raft.Config) {
	c.HeartbeatTimeout = 400 * time.Millisecond
	c.ElectionTimeout = 400 * time.Millisecond
	c.LeaderLeaseTimeout = 400 * time.Millisecond
}

// raftLoop keeps the leadership view, the advertised Raft status, the
// bootstrap and — on the leader — the configuration in line with Raft and
// membership. It wakes on Raft signals, membership changes and a ticker;
// every pass recomputes from the current state rather than from the
// signal, so a lost or coalesced signal costs at most one tick.
func (m *Mesh) raftLoop() {
	t := time.NewTicker(m.cfg.ReconcileInterval)
	defer t.Stop()
	rec := &reconciler{missing: map[string]time.Time{}}
	for {
		lead := m.refreshLeadership()
		m.maybeBootstrap()
		rec.noteCreation(m)
		if lead.IsLeader {
			rec.run(m, lead.Term)
		}
		select {
		case <-m.stopCh:
			return
		case <-m.raft.LeaderCh():
		case <-m.obsCh:
		case <-m.wakeRaft:
		case <-t.C:
		}
	}
}

// refreshLeadership reads Raft's state, publishes the leadership view and
// updates the advertised Raft status.
func (m *Mesh) refreshLeadership() Leadership {
	var conf []raft.Server
	var confIndex uint64
	if f := m.raft.GetConfiguration(); f.Error() == nil {
		conf, confIndex = f.Configuration().Servers, f.Index()
	}
	l := m.raftLeadership()

	m.mu.Lock()
	m.raftConf, m.raftConfIndex = conf, confIndex
	st := raftStatus{HasState: m.status.HasState || len(conf) > 0, Leader: l.IsLeader, Term: l.Term, Leaving: m.status.Leaving,
		Conf: confIndex, confKnown: true}
	for _, s := range conf {
		if string(s.ID) == m.name {
			st.Voter = s.Suffrage == raft.Voter
		}
	}
	if l.Leader != "" {
		if r, ok := m.members[l.Leader]; ok {
			l.LeaderGRPC = r.GRPCAddr
		}
	}
	changed := st != m.status
	m.status = st
	m.mu.Unlock()
	if changed {
		signal(m.wakeAdvertise)
	}
	prev := m.leadership.current()
	if m.leadership.publish(l) && (prev.IsLeader != l.IsLeader || prev.Leader != l.Leader || prev.Term != l.Term) {
		m.log.Info("leadership", zap.Bool("is_leader", l.IsLeader), zap.String("leader", l.Leader),
			zap.Uint64("term", l.Term))
	}
	return l
}

// raftLeadership derives the leadership from Raft. The term is read before
// and after the state: a Leader state between two equal reads belongs to
// that term (Raft changes term and state separately), so a deposed leader
// never reports itself leader with its successor's term — the term is the
// fencing token of every write the leader makes.
func (m *Mesh) raftLeadership() Leadership {
	for {
		t1 := m.raft.CurrentTerm()
		state := m.raft.State()
		_, id := m.raft.LeaderWithID()
		t2 := m.raft.CurrentTerm()
		if t1 != t2 {
			continue // an election moved on while we read
		}
		if id == "" {
			return Leadership{}
		}
		isLeader := state == raft.Leader && string(id) == m.name
		if !isLeader && string(id) == m.name {
			return Leadership{} // stepping down: no leader known yet
		}
		return Leadership{IsLeader: isLeader, Term: t1, Leader: string(id)}
	}
}

// maybeBootstrap bootstraps the first Raft configuration when this server
// is the one to do it (see planBootstrap). It never runs on a server with
// Raft state, and at most once.
func (m *Mesh) maybeBootstrap() {
	if m.cfg.BootstrapExpect < 1 {
		return
	}
	m.mu.Lock()
	if m.status.HasState {
		m.mu.Unlock()
		return
	}
	servers := m.serverViewsLocked()
	m.mu.Unlock()
	list := make([]serverView, 0, len(servers))
	for _, s := range servers {
		list = append(list, s)
	}
	conf, ok := planBootstrap(m.name, m.cfg.BootstrapExpect, list)
	if !ok {
		return
	}
	err := m.raft.BootstrapCluster(conf).Error()
	m.mu.Lock()
	m.status.HasState = true // never try twice, whatever the outcome
	m.mu.Unlock()
	signal(m.wakeAdvertise)
	if err != nil {
		m.log.Warn("bootstrap failed", zap.Error(err))
		return
	}
	names := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		names = append(names, string(s.ID))
	}
	m.log.Info("bootstrapped the raft cluster", zap.Strings("servers", names))
}

// serverViewsLocked returns the gossip view of every server by name.
func (m *Mesh) serverViewsLocked() map[string]serverView {
	out := map[string]serverView{}
	for name, r := range m.members {
		if !r.HasRole(RoleServer) {
			continue
		}
		out[name] = serverView{Name: name, RaftAddr: r.RaftAddr, Status: r.Status, Since: r.since, HasState: r.status.HasState,
			Leaving: r.status.Leaving, ConfIndex: r.status.Conf, ConfKnown: r.status.confKnown}
	}
	// The local node is always alive to itself, with its own status.
	if self, ok := out[m.name]; ok {
		self.HasState, self.Leaving = m.status.HasState, m.status.Leaving
		out[m.name] = self
	}
	return out
}

// raftReach remembers which peers this leader's heartbeats fail to reach,
// by the term they failed in: a peer failing in the current term is
// unreachable (a new term's replication starts afresh, and a peer it
// reaches at once reports nothing).
type raftReach struct {
	mu     sync.Mutex
	failTm map[string]uint64
}

func (r *raftReach) failed(peer string, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failTm == nil {
		r.failTm = map[string]uint64{}
	}
	r.failTm[peer] = term
}

func (r *raftReach) resumed(peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failTm, peer)
}

// retain forgets the peers for which in is false: a server out of the
// configuration has no replication, and when it is added again its new
// replication starts afresh (reaching it at once reports nothing), so a
// failure recorded before must not outlive its removal.
func (r *raftReach) retain(in map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.failTm {
		if !in[p] {
			delete(r.failTm, p)
		}
	}
}

// unreachable lists the peers whose heartbeats fail in term.
func (r *raftReach) unreachable(term uint64) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for p, t := range r.failTm {
		if t == term {
			out[p] = true
		}
	}
	return out
}

// reconciler is the leader's memory between reconciliation passes, within
// one term: when it first noticed servers of the configuration that gossip
// does not know, and when it first saw each non-voter (at its address).
type reconciler struct {
	term     uint64
	missing  map[string]time.Time
	nonvoter map[string]nonvoterSeen
	// barrier: this term's barrier returned, so the state holds every
	// entry of earlier terms (placePartitions plans from it).
	barrier bool

	// Whether this server took part in creating the mesh (see
	// noteCreation), decided once per process: kept across terms.
	creationKnown bool
	created       bool
}

type nonvoterSeen struct {
	addr  raft.ServerAddress
	since time.Time
	// lagging: logged as held back for its log (see logLagging).
	lagging bool
}

// run reconciles once (see planReconcile) in term.
func (r *reconciler) run(m *Mesh, term uint64) {
	if r.term != term { // a new term: forget the previous leadership's memory
		r.term = term
		clear(r.missing)
		clear(r.nonvoter)
		r.barrier = false
	}
	now := time.Now()
	m.mu.Lock()
	conf := append([]raft.Server(nil), m.raftConf...)
	confIndex := m.raftConfIndex
	servers := m.serverViewsLocked()
	m.mu.Unlock()
	if len(conf) == 0 {
		return
	}
	inConf := map[string]bool{}
	for _, s := range conf {
		id := string(s.ID)
		inConf[id] = true
		if _, known := servers[id]; !known {
			if _, ok := r.missing[id]; !ok {
				r.missing[id] = now
			}
		}
	}
	for id := range r.missing {
		if _, known := servers[id]; known || !inConf[id] {
			delete(r.missing, id)
		}
	}
	m.reach.retain(inConf)
	in := reconcileInput{
		Self: m.name, Config: conf, ConfigIndex: confIndex, Servers: servers, Missing: r.missing, Now: now,
		NonvoterSince: r.nonvotersSince(conf, now),
		Unreachable:   m.reach.unreachable(term),
		Stabilization: m.cfg.ServerStabilization, Grace: m.cfg.DeadServerGrace, Timeout: m.cfg.DeadServerTimeout,
	}
	r.logLagging(m.log, in)
	changes := planReconcile(in)
	for _, c := range changes {
		var f raft.IndexFuture
		id, addr := raft.ServerID(c.ID), raft.ServerAddress(c.Address)
		switch c.Kind {
		case addNonvoter:
			f = m.raft.AddNonvoter(id, addr, 0, 0)
		case promote:
			f = m.raft.AddVoter(id, addr, 0, 0)
		case remove:
			f = m.raft.RemoveServer(id, 0, 0)
		}
		if err := f.Error(); err != nil {
			m.log.Warn("raft configuration change failed", zap.String("change", c.Kind.String()),
				zap.String("server", c.ID), zap.Error(err))
			return // leadership lost or raft busy: the next pass starts over
		}
		m.log.Info("raft configuration changed", zap.String("change", c.Kind.String()),
			zap.String("server", c.ID), zap.String("addr", c.Address), zap.String("reason", c.Reason),
			zap.Uint64("term", term))
		if c.Kind == remove {
			delete(r.missing, c.ID)
		}
	}
	if len(changes) > 0 {
		signal(m.wakeRaft) // refresh the cached configuration
	}
	if !m.cfg.ManualWagglers {
		r.placeWagglers(m, term)
	}
	r.placePartitions(m, term)
	r.registerAnchors(m)
}

// nonvotersSince updates when each non-voter of conf was first seen at its
// address, forgets the servers that are not non-voters any more, and
// returns the times by name.
func (r *reconciler) nonvotersSince(conf []raft.Server, now time.Time) map[string]time.Time {
	if r.nonvoter == nil {
		r.nonvoter = map[string]nonvoterSeen{}
	}
	out := make(map[string]time.Time)
	for _, s := range conf {
		if s.Suffrage == raft.Voter {
			continue
		}
		id := string(s.ID)
		seen, ok := r.nonvoter[id]
		if !ok || seen.addr != s.Address { // new, or re-added at a new address: its replication starts afresh
			seen = nonvoterSeen{addr: s.Address, since: now}
			r.nonvoter[id] = seen
		}
		out[id] = seen.since
	}
	for id := range r.nonvoter {
		if _, ok := out[id]; !ok {
			delete(r.nonvoter, id)
		}
	}
	return out
}

// logLagging says, once per server and term, that a non-voter otherwise
// ready for promotion waits for its log (see laggingNonvoters), so that a
// server that stays a non-voter is never a silent mystery.
func (r *reconciler) logLagging(log *zap.Logger, in reconcileInput) {
	if len(r.nonvoter) == 0 {
		return // nothing to promote: no need to plan twice more
	}
	lagging := laggingNonvoters(in)
	for id, seen := range r.nonvoter {
		behind := lagging[id]
		if behind && !seen.lagging {
			v := in.Servers[id]
			log.Info("non-voter not promoted yet: its log is behind the latest configuration",
				zap.String("server", id), zap.Uint64("its_configuration_index", v.ConfIndex),
				zap.Uint64("configuration_index", in.ConfigIndex))
		}
		seen.lagging = behind
		r.nonvoter[id] = seen
	}
}

// registerAnchors records in the control state the hash-chain anchor each
// alive node publishes, when it differs from the registered one.
func (r *reconciler) registerAnchors(m *Mesh) {
	state := m.fsm.State()
	for _, mem := range m.Members() {
		if mem.Status != StatusAlive || len(mem.TrustAnchor) == 0 || bytes.Equal(state.Anchors[mem.Name], mem.TrustAnchor) {
			continue
		}
		cmd := RegisterAnchor(mem.Name, mem.TrustAnchor)
		f := m.raft.Apply(cmd.Encode(), time.Second)
		if err := f.Error(); err != nil {
			m.log.Warn("registering a hash-chain anchor failed", zap.String("member", mem.Name), zap.Error(err))
			return // the next pass tries again
		}
		if err, ok := f.Response().(error); ok {
			m.log.Warn("registering a hash-chain anchor refused", zap.String("member", mem.Name), zap.Error(err))
		}
	}
}

// placeWagglers gives every capability served by an alive node a Waggler
// (see planWagglers). Suspect nodes keep their roles: only a failure, a
// leave, a quarantine or — for a server — failing Raft heartbeats in this
// term moves one.
func (r *reconciler) placeWagglers(m *Mesh, term uint64) {
	var eligible []wagglerCandidate
	unreachable := m.reach.unreachable(term)
	for _, mem := range m.Members() {
		if (mem.Status == StatusAlive || mem.Status == StatusSuspect) && !unreachable[mem.Name] {
			c := wagglerCandidate{Name: mem.Name, Capabilities: mem.Capabilities, Leader: mem.Name == m.name}
			if m.cfg.WagglerRank != nil {
				c.Rank = m.cfg.WagglerRank(mem.Name)
			}
			eligible = append(eligible, c)
		}
	}
	for _, cmd := range planWagglers(m.fsm.State(), eligible) {
		f := m.raft.Apply(cmd.Encode(), time.Second)
		if err := f.Error(); err != nil {
			if errors.Is(err, raft.ErrRaftShutdown) || m.isStopping() {
				return // the node is stopping: nothing to do, nothing to report
			}
			m.log.Warn("waggler role change failed", zap.Error(err))
			return // leadership lost or raft busy: the next pass starts over
		}
		if err, ok := f.Response().(error); ok {
			m.log.Warn("waggler role change refused", zap.Error(err))
			return
		}
		m.log.Info("waggler role changed", zap.String("command", cmd.describe()), zap.Uint64("term", term))
	}
}

// isStopping reports whether Stop or Halt began.
func (m *Mesh) isStopping() bool {
	return m.life.State().Stopped()
}

// raftOrErr returns the running Raft or why there is none.
func (m *Mesh) raftOrErr() (*raft.Raft, error) {
	if !m.cfg.Server {
		return nil, ErrNotServer
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.life.Running() || m.raft == nil {
		return nil, ErrNotRunning
	}
	m.calls.Add(1) // released by the caller's done
	return m.raft, nil
}

// leaderRaft returns this node's Raft when it leads; a worker or a follower
// gets the NotLeaderError redirect. On success the caller must call
// m.calls.Done() when its call ends.
func (m *Mesh) leaderRaft() (*raft.Raft, error) {
	r, err := m.raftOrErr()
	if errors.Is(err, ErrNotServer) {
		return nil, m.notLeader(nil)
	}
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		m.calls.Done()
		return nil, m.notLeader(nil)
	}
	return r, nil
}

// notLeader builds the redirect for a call that reached a follower.
func (m *Mesh) notLeader(cause error) error {
	l := m.Leader()
	if l.IsLeader { // lost it in between: no leader known yet
		l = Leadership{}
	}
	e := &NotLeaderError{Leader: l.Leader, LeaderGRPC: l.LeaderGRPC, Term: l.Term}
	if cause != nil {
		return fmt.Errorf("%w (%w)", e, cause)
	}
	return e
}

// isLeadershipErr reports whether a Raft error means "not (or no longer)
// the leader".
func isLeadershipErr(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// enqueueTimeout turns ctx's deadline into Raft's enqueue timeout (0: none).
func enqueueTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 0
}

// Apply replicates cmd through Raft and returns once it is applied on this
// node (the leader). A command the state machine rejects returns its
// error (ErrStaleEpoch, ErrInvalidCommand). On a node that does not lead
// it returns a *NotLeaderError (errors.Is ErrNotLeader) naming the leader.
func (m *Mesh) Apply(ctx context.Context, cmd Command) error {
	r, err := m.leaderRaft()
	if err != nil {
		return err
	}
	defer m.calls.Done()
	f := r.Apply(cmd.Encode(), enqueueTimeout(ctx))
	if err := m.await(ctx, f); err != nil {
		if isLeadershipErr(err) {
			return m.notLeader(err)
		}
		return fmt.Errorf("replicating control command %d: %w", cmd.typ, err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// Barrier returns once every entry committed before it is applied on this
// node, which must lead: call it after gaining leadership and before
// acting on the replicated state.
func (m *Mesh) Barrier(ctx context.Context) error {
	r, err := m.leaderRaft()
	if err != nil {
		return err
	}
	defer m.calls.Done()
	if err := m.await(ctx, r.Barrier(enqueueTimeout(ctx))); err != nil {
		if isLeadershipErr(err) {
			return m.notLeader(err)
		}
		return fmt.Errorf("raft barrier: %w", err)
	}
	return nil
}

// State returns a copy of the replicated control state as applied on this
// node. On a follower it may lag the leader; on a worker it is empty.
func (m *Mesh) State() ControlState { return m.fsm.State() }

// StateChanged returns a channel closed at the next change of the control
// state on this server.
func (m *Mesh) StateChanged() <-chan struct{} { return m.fsm.Changed() }

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	Name  string
	Addr  string // Raft address
	Voter bool
}

// RaftConfiguration returns the latest Raft configuration this server has
// seen (sorted by name); nil on workers and before Start.
func (m *Mesh) RaftConfiguration() []RaftServer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]RaftServer, 0, len(m.raftConf))
	for _, s := range m.raftConf {
		out = append(out, RaftServer{Name: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b RaftServer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// noteCreation decides, at the first Raft configuration this process
// sees, whether this server took part in creating the mesh: it expects a
// bootstrap (BootstrapExpect > 0), had no Raft state when it started, and
// is a voter of that first configuration. Every server of a fresh
// bootstrap is a voter of the bootstrap configuration, whichever of them
// bootstrapped it; a server added to an existing mesh is first a
// non-voter (see planReconcile), and one that restarts has state. Only a
// leader that took part in creating the mesh sets the partition count it
// was configured with (placePartitions): any other finding the count
// unset leads a mesh created before partitions existed.
func (r *reconciler) noteCreation(m *Mesh) {
	if r.creationKnown {
		return
	}
	m.mu.Lock()
	conf := m.raftConf
	m.mu.Unlock()
	if len(conf) == 0 {
		return
	}
	r.creationKnown = true
	r.created = m.cfg.BootstrapExpect > 0 && !m.hasState && slices.ContainsFunc(conf, func(s raft.Server) bool {
		return string(s.ID) == m.name && s.Suffrage == raft.Voter
	})
	m.log.Debug("raft configuration first seen", zap.Bool("created_the_mesh", r.created))
}

// placePartitions sets the partition count if it is not set yet, then
// places the partitions (see planPartitions) and applies the moves as one
// AssignPartitions, logging each.
//
// The count: a leader that took part in creating the mesh (noteCreation)
// sets Config.Partitions; any other leads a mesh created before
// partitions existed, which keeps one partition (its engine's work was
// never split).
func (r *reconciler) placePartitions(m *Mesh, term uint64) {
	if !r.barrier {
		// Plan from every entry of earlier terms: a plan from a state that
		// lags would only be refused (its epochs too low), but refused
		// noisily.
		if err := m.raft.Barrier(time.Second).Error(); err != nil {
			if !errors.Is(err, raft.ErrRaftShutdown) && !m.isStopping() {
				m.log.Debug("raft barrier before placing partitions failed", zap.Error(err))
			}
			return
		}
		r.barrier = true
	}
	state := m.fsm.State()
	if state.PartitionCount == 0 {
		count := 1
		if r.created {
			count = m.cfg.Partitions
		}
		if !m.applyControl(SetPartitionCount(count), "setting the partition count") {
			return
		}
		if r.created {
			m.log.Info("partition count set for the new mesh", zap.Int("partitions", count), zap.Uint64("term", term))
		} else {
			m.log.Info("mesh created before partitions: it keeps one partition", zap.Uint64("term", term))
		}
		state = m.fsm.State()
	}
	eligible, why := m.partitionEligible(state, term)
	moves := planPartitions(partitionInput{
		State: state, Eligible: eligible, Why: why, Term: term, Now: time.Now(),
		EveryTerm: m.cfg.PartitionPlacement == PlaceOnLeader, Leader: m.name,
	})
	if len(moves) == 0 {
		return
	}
	if !m.applyControl(AssignPartitions(moves), "assigning partitions") {
		return
	}
	// One line per (from, to, reason): a new term under leader placement
	// moves every partition at once, for one reason.
	type group struct{ from, to, reason string }
	var order []group
	byGroup := map[group][]PartitionMove{}
	for _, mv := range moves {
		g := group{state.Partitions[mv.Partition].Node, mv.Node, mv.Reason}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], mv)
	}
	for _, g := range order {
		mvs := byGroup[g]
		parts, epochs := make([]int, len(mvs)), make([]uint64, len(mvs))
		for i, mv := range mvs {
			parts[i], epochs[i] = mv.Partition, mv.Epoch
		}
		m.log.Info("partitions assigned", zap.Ints("partitions", parts), zap.String("from", g.from),
			zap.String("to", g.to), zap.Uint64s("epochs", epochs), zap.Uint64("term", term), zap.String("reason", g.reason))
	}
}

// partitionEligible returns the servers that may own partitions, and why
// each other known server may not. Under PlaceBalanced: the voters that
// gossip shows alive (suspect included) and not leaving, that are not
// quarantined and whose Raft heartbeats do not fail in this term — as for
// Waggler roles; a joining server gets partitions once promoted, when it
// has the log and the leader reaches it. Under PlaceOnLeader: this
// leader alone, whatever else holds (its engine is the only one).
func (m *Mesh) partitionEligible(state ControlState, term uint64) ([]string, map[string]string) {
	m.mu.Lock()
	servers := m.serverViewsLocked()
	conf := slices.Clone(m.raftConf)
	m.mu.Unlock()
	unreachable := m.reach.unreachable(term)
	why := map[string]string{}
	voter := map[string]bool{}
	for _, s := range conf {
		voter[string(s.ID)] = s.Suffrage == raft.Voter
		if _, known := servers[string(s.ID)]; !known {
			why[string(s.ID)] = "unknown to gossip"
		}
	}
	var eligible []string
	for name, v := range servers {
		_, quarantined := state.Quarantine[name]
		switch {
		case v.Status == StatusFailed:
			why[name] = "failed"
		case v.Status == StatusLeft:
			why[name] = "left"
		case v.Leaving:
			why[name] = "leaving"
		case quarantined:
			why[name] = "quarantined"
		case unreachable[name]:
			why[name] = "its raft heartbeats fail"
		case !voter[name]:
			why[name] = "not a raft voter"
		default:
			eligible = append(eligible, name)
		}
	}
	if m.cfg.PartitionPlacement == PlaceOnLeader {
		for _, name := range eligible {
			why[name] = "not the leader"
		}
		delete(why, m.name)
		return []string{m.name}, why
	}
	return eligible, why
}

// applyControl replicates a command of the leader's reconciliation and
// reports whether it applied; a failure or a refusal is logged (and the
// next pass tries again), except while stopping.
func (m *Mesh) applyControl(cmd Command, what string) bool {
	f := m.raft.Apply(cmd.Encode(), time.Second)
	if err := f.Error(); err != nil {
		if !errors.Is(err, raft.ErrRaftShutdown) && !m.isStopping() {
			m.log.Warn(what+" failed", zap.Error(err))
		}
		return false
	}
	if err, ok := f.Response().(error); ok {
		m.log.Warn(what+" refused", zap.Error(err), zap.String("command", cmd.describe()))
		return false
	}
	return true
}

// PartitionCount returns the partition count of the control state as
// applied on this server: 0 until it is set (and always on a worker).
func (m *Mesh) PartitionCount() int { return m.fsm.PartitionCount() }

// CheckPartitions returns an error (ErrPartitionCountMismatch) when this
// server was given a partition count explicitly (Config.PartitionsSet)
// and the mesh has another one: the count never changes after a mesh is
// created, and a server must not run as if it had. nil when the count
// matches, was not given, or is not known here yet (the control state has
// not reached this server: call it again once it has).
func (m *Mesh) CheckPartitions() error {
	have := m.PartitionCount()
	if !m.cfg.PartitionsSet || have == 0 || have == m.cfg.Partitions {
		return nil
	}
	return fmt.Errorf("%w: this mesh was created with %s; this node was started with --partitions %d; "+
		"the count never changes after a mesh is created: drop the flag or pass --partitions %d",
		ErrPartitionCountMismatch, partitions(have), m.cfg.Partitions, have)
}

// partitions renders a count of partitions.
func partitions(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
