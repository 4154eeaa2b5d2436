// Package meshtest builds in-process mesh clusters for tests of any package:
// servers and workers on 127.0.0.1 with free ports and mesh.TestConfig
// timings, joined together, with helpers to wait for a leader, kill,
// restart, partition and heal. Every cluster is stopped by t.Cleanup.
package meshtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/internal/loggate"
	"github.com/robonet/robonet/mesh"
)

// DefaultTimeout bounds the waits of the helpers (leader, convergence).
const DefaultTimeout = 15 * time.Second

// ClusterOption configures NewTestCluster.
type ClusterOption func(*options)

type options struct {
	configure       func(*mesh.Config)
	bootstrapExpect int
	memoryRaft      bool
	logLevel        zapcore.Level
	logger          *zap.Logger
	noLeaderWait    bool
}

// WithConfig lets the test adjust every node's configuration (called last,
// before New).
func WithConfig(f func(*mesh.Config)) ClusterOption {
	return func(o *options) { o.configure = f }
}

// WithBootstrapExpect sets the servers' BootstrapExpect (default: the
// number of servers).
func WithBootstrapExpect(n int) ClusterOption {
	return func(o *options) { o.bootstrapExpect = n }
}

// WithMemoryRaft keeps Raft state in memory (Restart then starts empty).
// Default: each server has a data dir under t.TempDir.
func WithMemoryRaft() ClusterOption { return func(o *options) { o.memoryRaft = true } }

// WithLogLevel sets the level of the nodes' zaptest loggers (default Info;
// the logs show with -v or when a test fails).
func WithLogLevel(l zapcore.Level) ClusterOption { return func(o *options) { o.logLevel = l } }

// WithLogger gives every node this logger instead of a zaptest logger
// (benchmarks pass zap.NewNop()).
func WithLogger(l *zap.Logger) ClusterOption { return func(o *options) { o.logger = l } }

// WithoutLeaderWait makes NewTestCluster return once every node runs,
// without waiting for a leader.
func WithoutLeaderWait() ClusterOption { return func(o *options) { o.noLeaderWait = true } }

// Node is one member of a TestCluster.
type Node struct {
	Name   string
	Server bool
	Config mesh.Config // as passed to mesh.New, with the ports it bound
	Mesh   *mesh.Mesh  // nil while the node is down
}

// TestCluster is an in-process mesh.
type TestCluster struct {
	t       testing.TB
	opts    options
	Net     *Network
	logDone *loggate.Gate

	mu    sync.Mutex
	nodes map[string]*Node
	order []string
}

// NewTestCluster starts servers (named s0, s1, …) and workers (w0, w1, …),
// all joined through s0 (or w0), and — when there are servers — waits for
// a leader. The cluster stops when the test ends.
func NewTestCluster(t testing.TB, servers, workers int, opts ...ClusterOption) *TestCluster {
	t.Helper()
	o := options{bootstrapExpect: servers, logLevel: zapcore.InfoLevel}
	for _, f := range opts {
		f(&o)
	}
	c := &TestCluster{t: t, opts: o, Net: NewNetwork(), nodes: map[string]*Node{}, logDone: &loggate.Gate{}}
	// Registered first, so it runs last: no log line after the test ends
	// (zaptest would panic), whatever a library goroutine still prints.
	t.Cleanup(c.logDone.Close)
	t.Cleanup(c.Close)

	var names []string
	for i := range servers {
		names = append(names, "s"+strconv.Itoa(i))
	}
	for i := range workers {
		names = append(names, "w"+strconv.Itoa(i))
	}
	if len(names) == 0 {
		return c
	}
	first := c.add(names[0], servers > 0)
	if err := c.start(first, nil); err != nil {
		t.Fatalf("starting %s: %v", first.Name, err)
	}
	seed := []string{first.Mesh.GossipAddr()}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names[1:] {
		n := c.add(name, i+1 < servers)
		wg.Go(func() { errs[i+1] = c.start(n, seed) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	if servers > 0 && !o.noLeaderWait && o.bootstrapExpect > 0 && o.bootstrapExpect <= servers {
		c.WaitForLeader(DefaultTimeout)
	}
	return c
}

// Logger returns a zaptest logger at level that goes silent when the test
// ends (libraries may still log from goroutines that end a moment after
// Stop, and zaptest would fail the test for it). Call it before starting
// the meshes that use it.
func Logger(t testing.TB, level zapcore.Level) *zap.Logger {
	gate := &loggate.Gate{}
	t.Cleanup(gate.Close)
	return guardedLogger(t, level, gate)
}

func guardedLogger(t testing.TB, level zapcore.Level, gate *loggate.Gate) *zap.Logger {
	z := zaptest.NewLogger(t, zaptest.Level(level))
	return zap.New(&guardCore{Core: z.Core(), gate: gate})
}

type guardCore struct {
	zapcore.Core
	gate *loggate.Gate
}

func (g *guardCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !g.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, g)
}

func (g *guardCore) Write(e zapcore.Entry, f []zapcore.Field) error {
	var err error
	g.gate.Pass(func() { err = g.Core.Write(e, f) })
	return err
}

func (g *guardCore) With(f []zapcore.Field) zapcore.Core {
	return &guardCore{Core: g.Core.With(f), gate: g.gate}
}

// add registers a new node with its configuration.
func (c *TestCluster) add(name string, server bool) *Node {
	cfg := mesh.TestConfig(name)
	cfg.Server = server
	cfg.Meta = mesh.NodeMeta{Version: "test", GRPCAddr: "127.0.0.1:0"}
	if server {
		cfg.Meta.Roles = []mesh.Role{mesh.RoleServer}
		cfg.BootstrapExpect = c.opts.bootstrapExpect
		if !c.opts.memoryRaft {
			cfg.DataDir = c.t.TempDir()
		}
	} else {
		cfg.Meta.Roles = []mesh.Role{mesh.RoleWorker}
		cfg.Meta.Capabilities = map[string]int{"test.echo": 2}
	}
	cfg.Logger = c.opts.logger
	if cfg.Logger == nil {
		cfg.Logger = guardedLogger(c.t, c.opts.logLevel, c.logDone)
	}
	cfg.Interceptor = c.Net.Interceptor(name)
	if c.opts.configure != nil {
		c.opts.configure(&cfg)
	}
	n := &Node{Name: name, Server: server, Config: cfg}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[name] = n
	c.order = append(c.order, name)
	return n
}

// start creates and starts n's mesh, joining join, and records the ports
// it bound so that a restart binds the same ones.
func (c *TestCluster) start(n *Node, join []string) error {
	cfg := n.Config
	cfg.Join = join
	m, err := mesh.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		return err
	}
	c.Net.Register(n.Name, m.GossipAddr(), m.RaftAddr())
	c.mu.Lock()
	defer c.mu.Unlock()
	n.Mesh = m
	n.Config.BindPort = port(m.GossipAddr())
	if n.Server {
		n.Config.RaftPort = port(m.RaftAddr())
	}
	return nil
}

func port(hostport string) int {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(p)
	return v
}

// Node returns the named node (nil if unknown).
func (c *TestCluster) Node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Mesh returns the named node's running mesh, failing the test if it is
// down or unknown.
func (c *TestCluster) Mesh(name string) *mesh.Mesh {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil || n.Mesh == nil {
		c.t.Fatalf("node %s is not running", name)
	}
	return n.Mesh
}

// Names returns every node's name in creation order; Running only those up.
func (c *TestCluster) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

// Running returns the names of the nodes that are up, servers only if
// servers is set.
func (c *TestCluster) Running(servers bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range c.order {
		n := c.nodes[name]
		if n.Mesh != nil && (!servers || n.Server) {
			out = append(out, name)
		}
	}
	return out
}

// Eventually polls cond every 10 ms until it holds or timeout passes, then
// fails the test with what.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// LeaderAmong returns the name and term of the single leader that every
// named running server agrees on and whose configuration every one of
// them holds, or "" if they do not agree yet.
func (c *TestCluster) LeaderAmong(names []string) (string, uint64) {
	var leader string
	var term uint64
	leaders := 0
	for _, name := range names {
		n := c.Node(name)
		if n == nil || n.Mesh == nil {
			continue
		}
		l := n.Mesh.Leader()
		if l.Leader == "" || (leader != "" && (l.Leader != leader || l.Term != term)) {
			return "", 0
		}
		leader, term = l.Leader, l.Term
		if len(n.Mesh.RaftConfiguration()) == 0 {
			return "", 0 // the bootstrap configuration has not reached it yet
		}
		if l.IsLeader {
			leaders++
		}
	}
	if leaders != 1 {
		return "", 0
	}
	return leader, term
}

// WaitForLeader waits until every running server agrees on one leader that
// knows it leads, and returns its name and term.
func (c *TestCluster) WaitForLeader(timeout time.Duration) (string, uint64) {
	c.t.Helper()
	var leader string
	var term uint64
	Eventually(c.t, timeout, "a leader all servers agree on", func() bool {
		leader, term = c.LeaderAmong(c.Running(true))
		return leader != ""
	})
	return leader, term
}

// Leader returns the running server every running server currently agrees
// leads, waiting for one.
func (c *TestCluster) Leader() *mesh.Mesh {
	c.t.Helper()
	name, _ := c.WaitForLeader(DefaultTimeout)
	return c.Mesh(name)
}

// Apply applies cmd on the current leader, retrying on ErrNotLeader while
// the leadership moves, until ctx ends. When leadership is lost while the
// command commits, its outcome is unknown and the retry may apply it a
// second time: use it with idempotent commands, or check the state.
func (c *TestCluster) Apply(ctx context.Context, cmd mesh.Command) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var err error = &mesh.NotLeaderError{}
		if name, _ := c.LeaderAmong(c.Running(true)); name != "" {
			if n := c.Node(name); n != nil && n.Mesh != nil {
				err = n.Mesh.Apply(ctx, cmd)
			}
		}
		if !errors.Is(err, mesh.ErrNotLeader) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// WaitForMembers waits until every running node sees every running node
// alive (and each down node as not alive).
func (c *TestCluster) WaitForMembers(timeout time.Duration) {
	c.t.Helper()
	Eventually(c.t, timeout, "membership to converge", c.Converged)
}

// Converged reports whether every running node sees exactly the running
// nodes alive.
func (c *TestCluster) Converged() bool {
	running := c.Running(false)
	want := map[string]bool{}
	for _, name := range running {
		want[name] = true
	}
	for _, name := range running {
		n := c.Node(name)
		if n == nil || n.Mesh == nil {
			continue
		}
		alive := 0
		for _, mem := range n.Mesh.Members() {
			isAlive := mem.Status == mesh.StatusAlive
			if isAlive != want[mem.Name] {
				return false
			}
			if isAlive {
				alive++
			}
		}
		if alive != len(want) {
			return false
		}
	}
	return true
}

// Kill stops the node hard, as kill -9 would: no leave, no leadership
// transfer; peers detect the failure.
func (c *TestCluster) Kill(name string) {
	c.t.Helper()
	m := c.detach(name)
	if err := m.Halt(); err != nil {
		c.t.Errorf("killing %s: %v", name, err)
	}
}

// Stop stops the node gracefully (leave; a leader transfers leadership).
func (c *TestCluster) Stop(name string) {
	c.t.Helper()
	m := c.detach(name)
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		c.t.Errorf("stopping %s: %v", name, err)
	}
}

func (c *TestCluster) detach(name string) *mesh.Mesh {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil || n.Mesh == nil {
		c.t.Fatalf("node %s is not running", name)
	}
	m := n.Mesh
	n.Mesh = nil
	return m
}

// Restart starts a node that was killed or stopped again, with the same
// name, ports and data dir, joining the running nodes.
func (c *TestCluster) Restart(name string) {
	c.t.Helper()
	n := c.Node(name)
	if n == nil || n.Mesh != nil {
		c.t.Fatalf("node %s is unknown or running", name)
	}
	if err := c.start(n, c.gossipAddrs(name)); err != nil {
		c.t.Fatalf("restarting %s: %v", name, err)
	}
}

// AddServer and AddWorker start a new node that joins the running ones.
func (c *TestCluster) AddServer(name string) *mesh.Mesh { return c.addAndStart(name, true) }

// AddWorker starts a new worker that joins the running nodes.
func (c *TestCluster) AddWorker(name string) *mesh.Mesh { return c.addAndStart(name, false) }

func (c *TestCluster) addAndStart(name string, server bool) *mesh.Mesh {
	c.t.Helper()
	if c.Node(name) != nil {
		c.t.Fatalf("node %s exists", name)
	}
	n := c.add(name, server)
	if err := c.start(n, c.gossipAddrs(name)); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	return n.Mesh
}

func (c *TestCluster) gossipAddrs(except string) []string {
	var out []string
	for _, other := range c.Running(false) {
		if other != except {
			out = append(out, c.Node(other).Mesh.GossipAddr())
		}
	}
	return out
}

// Partition cuts the named nodes off from all others (both gossip and
// Raft), until Heal.
func (c *TestCluster) Partition(names ...string) { c.Net.Partition(names) }

// Heal restores every link.
func (c *TestCluster) Heal() { c.Net.Heal() }

// Close kills every running node, in parallel (tests that want a graceful
// stop call Stop). It runs at cleanup; calling it earlier is allowed.
func (c *TestCluster) Close() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, name := range c.Running(false) {
		m := c.detach(name)
		wg.Go(func() {
			if err := m.Halt(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Errorf("stopping the cluster: %v", err)
	}
}
