package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/trust/center"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/remote"
	"github.com/robonet/robonet/wag/tasklog"
)

// The engine is the API's Engine; the Router of its term is its
// Dispatcher (wag.go).
var (
	_ Engine          = (*engine.Engine)(nil)
	_ port.Dispatcher = (*wag.Router)(nil)
)

// Node is one robonode: mesh membership, store, engine, workers and the
// API servers, with one lifecycle. Build it with New, then Start and Stop
// it; Stop is idempotent.
type Node struct {
	cfg Config
	log *zap.Logger

	// id is the node's certificate (nil without TLS); tokens the digests
	// of the API tokens (nil without).
	id     *pki.Identity
	tokens *tokenKeeper

	violMu     sync.Mutex
	violations map[string]int // by peer: messages that broke the limits of the Waggler streams

	// life is the node's life: New, Running from Start, Stopped from the
	// first Stop or Halt (a Start that fails stops it too); every Stop and
	// Halt waits for the first and returns its outcome.
	life lifecycle.Base
	// mu is held while the node starts and while it is torn down, so a
	// Stop during Start tears down what Start built, once it is built.
	mu sync.Mutex

	// stopping is cancelled when Stop begins: long-lived API streams end
	// with UNAVAILABLE so that clients reconnect elsewhere or later.
	stopping      context.Context
	beginStopping context.CancelFunc

	lock     *dirLock
	store    port.Store             // nil on worker-only nodes
	pg       *postgres.Store        // the store when it is Postgres: its connection and replication facts
	workers  *wag.WorkerHost        // this node's pools
	wagglers *wag.WagglerHost       // the Waggler roles this node is given
	taskLogs *tasklog.Store         // the logs of the attempts this node ran (exec, and worker programs')
	audit    *auditTrail            // the calls that changed something (audit.go)
	external *remote.ExternalServer // the WorkerService: worker programs connected to this node
	follower *wag.RoleFollower
	metaMu   sync.Mutex
	meta     mesh.NodeMeta // what this node advertises in gossip
	// reader is the engine's read side on servers: it answers reads from
	// the store while this node follows, and every term's engine shares
	// it. nil on worker-only nodes.
	reader *engine.Query
	// active is the running engine of the current term, published by the
	// leader loop; nil while this node does not lead.
	active atomic.Pointer[engine.Engine]
	// partRates samples the active engine's per-partition counts for
	// ListPartitions' rates.
	partRates partitionRates
	mesh      meshNode
	conns     *connCache

	owning     *ownerLoop
	stopLoop   context.CancelFunc
	loopDone   chan struct{}
	loopEngine *termEngine // what the owner loop left running when it stopped
	stopFollow func()      // ends the follower
	followDone chan struct{}
	trust      *center.Center
	stopTrust  func() // ends runTrust and runPoolStats
	trustDone  chan struct{}

	grpcLis net.Listener
	grpcSrv *grpc.Server
	health  *health.Server
	httpLis net.Listener
	httpSrv *http.Server
	ready   atomic.Bool

	metrics *nodeMetrics // served at /metrics
	// api and meshAPI serve the gRPC API; the dashboard calls them too.
	api     *forwarder
	meshAPI *meshAPI

	serving sync.WaitGroup // the Serve goroutines
	fatal   chan error     // a server that stopped on its own
}

// New checks cfg and returns a node that is not started yet. It does no
// I/O; errors wrap ErrConfig.
func New(cfg Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	tokens, err := newTokenKeeper(cfg, cfg.Logger.Named("node").With(zap.String("node", cfg.Name)))
	if err != nil {
		return nil, err
	}
	cfg.APITokens = nil // only the digests are kept
	var id *pki.Identity
	if cfg.TLS.Set() {
		if id, err = loadIdentity(cfg); err != nil {
			return nil, err
		}
	}
	stopping, begin := context.WithCancel(context.Background())
	n := &Node{
		cfg:           cfg,
		log:           cfg.Logger.Named("node").With(zap.String("node", cfg.Name)),
		id:            id,
		tokens:        tokens,
		violations:    map[string]int{},
		stopping:      stopping,
		beginStopping: begin,
		fatal:         make(chan error, 2),
	}
	n.metrics = newNodeMetrics(n)
	return n, nil
}

// loadIdentity loads the node's certificate and checks that it names
// this node, and a server's role.
func loadIdentity(cfg Config) (*pki.Identity, error) {
	id, err := pki.Load(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case id.Name != cfg.Name:
		return nil, fmt.Errorf("%w: the certificate %s names node %q, but this node is %q: other nodes verify it by that name (robonode tls cert create --name %s)",
			ErrConfig, cfg.TLS.Cert, id.Name, cfg.Name, cfg.Name)
	case cfg.IsServer() && !id.Server:
		return nil, fmt.Errorf("%w: this node is a server, but %s is a worker's certificate, which Raft refuses (robonode tls cert create --name %s --server)",
			ErrConfig, cfg.TLS.Cert, cfg.Name)
	}
	return id, nil
}

// Start opens the store, starts the workers, the engine and the API
// servers, and returns once they all run. If any step fails, what was
// started is stopped again and the error returned. A node starts once.
func (n *Node) Start(ctx context.Context) error {
	if err := n.life.Start("node"); err != nil {
		return err
	}
	n.mu.Lock()
	err := n.start(ctx)
	n.mu.Unlock()
	if err != nil {
		stopCtx := context.WithoutCancel(ctx)
		return errors.Join(err, n.life.Stop(stopCtx, func(lifecycle.State) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.shutdown(stopCtx)
		}))
	}
	return nil
}

func (n *Node) start(ctx context.Context) error {
	if err := n.openLocal(ctx); err != nil {
		return err
	}
	if err := n.buildServices(); err != nil {
		return err
	}
	if err := n.buildMesh(); err != nil {
		return err
	}
	if err := n.startServices(ctx); err != nil {
		return err
	}
	n.markReady()
	return nil
}

// openLocal opens what the node keeps on its machine: the data directory
// (locked), the audit trail and, on a server, the store.
func (n *Node) openLocal(ctx context.Context) (err error) {
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	if n.lock, err = lockDir(n.cfg.DataDir); err != nil {
		return err
	}
	if n.audit, err = n.openAudit(); err != nil {
		return err
	}
	if n.cfg.IsServer() {
		if n.store, err = n.openStore(ctx); err != nil {
			return err
		}
	}
	return nil
}

// buildServices builds, without starting them, the node's trust centre,
// task logs, worker pools and Waggler host, and on a server the read side
// of the store.
func (n *Node) buildServices() (err error) {
	// Every node runs its pools and can be given Waggler roles; the
	// engine of a term reaches both through its Router.
	wcfg := n.cfg.Wag
	// wag and the engine add the node's name (and the engine its term) to
	// their own log lines.
	wcfg.NodeName, wcfg.Capabilities, wcfg.Logger = n.cfg.Name, n.cfg.Capabilities, n.cfg.Logger
	wcfg.Metrics = n.metrics.wag
	wcfg.ServingNodes = n.servingNodes
	wcfg.Exec = n.cfg.execPolicy()
	n.logExecPolicy(wcfg.Exec)
	tier, _ := trust.ParseTier(n.cfg.DispatchTier) // validated
	if n.trust, err = n.newTrustCenter(tier); err != nil {
		return err
	}
	wcfg.Trust = n.trust
	if n.taskLogs, err = tasklog.Open(n.cfg.taskLogDir(), n.cfg.TaskLogs, nil, n.log.Named("tasklog")); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	wcfg.TaskLogs = n.taskLogs
	if n.workers, err = wag.NewWorkerHost(wcfg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if n.wagglers, err = wag.NewWagglerHost(wcfg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if n.cfg.IsServer() {
		// The read side lives as long as the node and is shared by the
		// engine of every term it leads.
		qcfg := n.cfg.Engine
		qcfg.Store, qcfg.Logger, qcfg.NodeName = n.store, n.cfg.Logger, n.cfg.Name
		if n.reader, err = engine.NewQuery(qcfg); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return nil
}

// buildMesh opens the gRPC listener (its address goes into the node's
// gossip metadata) and builds the mesh and the connections to its nodes.
func (n *Node) buildMesh() (err error) {
	if n.grpcLis, err = net.Listen("tcp", n.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	mcfg, err := n.meshConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if n.mesh, err = mesh.New(mcfg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n.meta = mcfg.Meta
	n.conns = newConnCache(n.cfg.MaxMessageBytes, n.id)
	return nil
}

// startServices starts what buildServices and buildMesh built, in
// dependency order: the pools and the Waggler host before the mesh that
// gives them roles, the API once the mesh runs, the loops that follow it
// last.
func (n *Node) startServices(ctx context.Context) (err error) {
	if err := n.workers.Start(ctx); err != nil {
		return fmt.Errorf("starting the workers: %w", err)
	}
	if err := n.wagglers.Start(ctx); err != nil {
		return fmt.Errorf("starting the waggler host: %w", err)
	}
	if err := n.mesh.Start(ctx); err != nil {
		return fmt.Errorf("starting the mesh: %w", err)
	}
	if err := n.advertiseGRPC(); err != nil {
		return err
	}
	if n.cfg.IsServer() && n.cfg.Mesh.PartitionsSet {
		if err := n.checkPartitions(ctx); err != nil {
			return err
		}
	}
	if n.follower, err = n.newRoleFollower(); err != nil {
		return err
	}
	// External worker programs (WorkerService) add and remove pools: the
	// node advertises its capabilities again and its pools follow their
	// Wagglers.
	n.workers.OnChange(n.capabilitiesChanged)
	n.startGRPC()
	if n.tokens != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			n.tokens.watch(n.stopping, n.cfg.Clock)
		}()
	}
	n.startFollower()
	n.startTrust()
	if n.cfg.IsServer() {
		n.startOwnerLoop()
	}
	return n.startHTTP()
}

// markReady says the node serves: health, readiness, and the log line
// that tells an operator what it runs.
func (n *Node) markReady() {
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.health.SetServingStatus(robonetv1.WorkflowService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	n.health.SetServingStatus(robonetv1.MeshService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	n.ready.Store(true)
	if c := n.cfg; c.Insecure {
		c.Insecure = false
		if err := c.checkExposure(); err != nil {
			n.log.Warn("running insecure (--insecure)", zap.Error(err))
		}
	}
	n.log.Info("node started",
		zap.String("grpc_addr", n.GRPCAddr()), zap.String("http_addr", n.HTTPAddr()),
		zap.String("gossip_addr", n.GossipAddr()), zap.Strings("join", n.cfg.Join),
		zap.Bool("server", n.cfg.IsServer()), zap.Int("bootstrap_expect", n.cfg.BootstrapExpect),
		zap.String("store", n.storeName()), zap.String("data_dir", n.cfg.DataDir),
		zap.Any("capabilities", n.cfg.Capabilities), zap.Bool("tls", n.id != nil), zap.Bool("api_tokens", n.tokens != nil),
		zap.Bool("gossip_encrypted", len(n.cfg.GossipKey) > 0))
}

// publish makes e the engine that serves the API; nil: none (this node
// follows).
func (n *Node) publish(e *engine.Engine) { n.active.Store(e) }

// startFollower runs the loop that keeps the pools with their Wagglers
// and the gossip metadata with this node's roles (wag.go).
func (n *Node) startFollower() {
	events, unsubscribe := n.mesh.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	n.stopFollow, n.followDone = cancel, make(chan struct{})
	go func() {
		defer close(n.followDone)
		defer unsubscribe()
		// The follower ends with the membership events too, as the mesh
		// stops.
		followCtx, endFollow := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { n.follower.Run(followCtx) })
		n.forwardMembership(ctx, events)
		endFollow()
		wg.Wait()
	}()
}

// startTrust runs the loop that advertises the node's hash-chain anchor
// and runs the Sentinel on the leader (trust.go).
func (n *Node) startTrust() {
	ctx, cancel := context.WithCancel(context.Background())
	n.stopTrust, n.trustDone = cancel, make(chan struct{})
	go func() {
		defer close(n.trustDone)
		var wg sync.WaitGroup
		wg.Go(func() { n.runTrust(ctx) })
		if n.store != nil {
			wg.Go(func() { n.runPoolStats(ctx) })
			wg.Go(func() { n.runPartitionRates(ctx, n.cfg.Clock) })
		}
		wg.Wait()
	}()
}

// capabilitiesChanged advertises the capabilities the node's pools serve
// now and has the pools follow their Wagglers.
func (n *Node) capabilitiesChanged() {
	caps := n.workers.Capabilities()
	if err := n.updateMeta(func(m *mesh.NodeMeta) { m.Capabilities = caps }); err != nil {
		n.log.Warn("advertising the capabilities failed", zap.Error(err))
	}
	n.follower.RolesChanged()
}

// updateMeta changes what this node advertises in gossip.
func (n *Node) updateMeta(edit func(*mesh.NodeMeta)) error {
	n.metaMu.Lock()
	defer n.metaMu.Unlock()
	meta := n.meta
	edit(&meta)
	if err := n.mesh.UpdateMeta(meta); err != nil {
		return err
	}
	n.meta = meta
	return nil
}

// startOwnerLoop runs the loop that makes the engine follow what this
// node owns (leader.go).
func (n *Node) startOwnerLoop() {
	var ( // only the loop's goroutine calls want
		lastLeader time.Time
		lastTerm   uint64
	)
	placement := n.cfg.Mesh.PartitionPlacement
	n.owning = &ownerLoop{mesh: n.mesh, log: n.log.Named("owner"), clock: n.cfg.Clock, newEngine: n.newTerm, publish: n.publish,
		want: func(lead mesh.Leadership, now time.Time) (ownership, bool) {
			if lead.Leader != "" {
				lastLeader = now
			}
			// Between leaders the mesh says term 0: a follower's engine
			// keeps (or starts with) the last term it knew.
			lastTerm = max(lastTerm, lead.Term)
			lead.Term = max(lead.Term, lastTerm)
			return owned(lead, n.mesh.State(), n.cfg.Name, placement, now.Sub(lastLeader))
		}}
	ctx, cancel := context.WithCancel(context.Background())
	n.stopLoop, n.loopDone = cancel, make(chan struct{})
	go func() {
		defer close(n.loopDone)
		n.loopEngine = n.owning.run(ctx)
	}()
}

func (n *Node) storeName() string {
	switch {
	case !n.cfg.IsServer():
		return "none (worker-only)"
	case n.cfg.PostgresDSN != "":
		return "postgres"
	}
	return "sqlite"
}

func (n *Node) openStore(ctx context.Context) (port.Store, error) {
	if n.cfg.PostgresDSN != "" {
		s, err := postgres.Open(ctx, postgres.Config{DSN: n.cfg.PostgresDSN, Schema: n.cfg.PostgresSchema, Logger: n.log})
		if err != nil {
			return nil, fmt.Errorf("opening the Postgres store: %w", err)
		}
		n.pg = s
		return s, nil
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: n.cfg.sqlitePath(), Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite store: %w", err)
	}
	return s, nil
}

// startGRPC serves the API on the listener opened by Start.
func (n *Node) startGRPC() {
	lis := n.grpcLis
	ic := apiInterceptors{log: n.log.Named("api")}
	az := authz{tls: n.id != nil, tokens: n.tokens}
	au := auditCalls{trail: n.audit, who: az.who}
	opts := []grpc.ServerOption{}
	if n.id != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.id.ServerTLS())))
	}
	n.grpcSrv = grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(n.cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(n.cfg.MaxMessageBytes),
		grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow),
		grpc.MaxConcurrentStreams(uint32(n.cfg.MaxStreams)),
		// A connection that has not finished its handshake in this time
		// (garbage, or a client that connects and says nothing) is closed.
		grpc.ConnectionTimeout(10*time.Second),
		// The audit comes first: it records the calls authz refuses too,
		// with the statuses ic maps errors to.
		grpc.ChainUnaryInterceptor(au.unary, ic.unary, az.unary),
		grpc.ChainStreamInterceptor(au.stream, n.endStreamsOnStop, ic.stream, az.stream),
	)...)
	n.api = &forwarder{clock: n.cfg.Clock,
		self: n.cfg.Name, mesh: n.mesh, log: n.log.Named("forward"), limits: apiLimits{maxSpecBytes: n.cfg.MaxSpecBytes, maxInputBytes: n.cfg.MaxInputBytes, maxSignalBytes: n.cfg.MaxSignalBytes},
		timeout: n.cfg.ForwardTimeout, active: n.active.Load, reader: n.reader, conns: n.conns, logs: n.taskLogs,
	}
	n.meshAPI = newMeshAPI(n)
	robonetv1.RegisterWorkflowServiceServer(n.grpcSrv, scopedAPI{n.api})
	robonetv1.RegisterMeshServiceServer(n.grpcSrv, n.meshAPI)
	robonetv1.RegisterWagServiceServer(n.grpcSrv, remote.NewServer(n.wagglers, n.log, remote.ServerOptions{
		Caller: checkCaller, OnViolation: n.peerViolation, HeartbeatInterval: n.cfg.Wag.WithDefaults().HeartbeatInterval,
		Trust: n.trust, Evidence: n.trust, MaxMessageBytes: n.cfg.MaxMessageBytes,
	}))
	wcfg := n.cfg.Wag.WithDefaults()
	n.external = remote.NewExternalServer(n.workers, n.cfg.Name, wcfg.HeartbeatInterval, wcfg.MissedHeartbeats, n.log, remote.ExternalOptions{
		TaskLogs: n.taskLogs, AllowBuiltins: n.cfg.AllowWorkerBuiltins, MinRuntime: max(n.cfg.WorkerMinRuntime, 0), Clock: n.cfg.Clock})
	robonetv1.RegisterWorkerServiceServer(n.grpcSrv, n.external)
	n.health = health.NewServer()
	healthpb.RegisterHealthServer(n.grpcSrv, n.health)
	reflection.Register(n.grpcSrv)
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		if err := n.grpcSrv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Error("gRPC server failed", zap.Error(err))
			n.fatal <- fmt.Errorf("gRPC server: %w", err)
		}
	}()
}

// endStreamsOnStop ends server streams (WatchInstance) when Stop begins, so
// that a graceful stop does not wait for instances to finish; clients get
// UNAVAILABLE and resume against the next node.
func (n *Node) endStreamsOnStop(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	unhook := context.AfterFunc(n.stopping, cancel)
	defer unhook()
	err := handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	if err != nil && n.stopping.Err() != nil {
		return status.Error(codes.Unavailable, "the node is shutting down; resume the stream on another node or later")
	}
	return err
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// Bounds of the HTTP server (docs/limits.md).
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 30 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpIdleTimeout       = 60 * time.Second
	httpMaxHeaderBytes    = 64 << 10
)

func (n *Node) startHTTP() error {
	if n.cfg.HTTPAddr == HTTPDisabled {
		return nil
	}
	lis, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP listener: %w", err)
	}
	handler, err := n.httpHandler()
	if err != nil {
		_ = lis.Close()
		return fmt.Errorf("HTTP handlers: %w", err)
	}
	n.httpLis = lis
	n.httpSrv = &http.Server{
		Handler: handler,
		// Every phase is bounded, so slow or idle clients cannot hold
		// connections (and their goroutines) forever.
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		if err := n.httpSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("HTTP server failed", zap.Error(err))
			n.fatal <- fmt.Errorf("HTTP server: %w", err)
		}
	}()
	return nil
}

// GRPCAddr is the address the gRPC API listens on (the actual port when
// Config.GRPCAddr asked for port 0); empty before Start.
func (n *Node) GRPCAddr() string {
	if n.grpcLis == nil {
		return ""
	}
	return n.grpcLis.Addr().String()
}

// HTTPAddr is the address of the HTTP server; empty before Start or when
// it is off.
func (n *Node) HTTPAddr() string {
	if n.httpLis == nil {
		return ""
	}
	return n.httpLis.Addr().String()
}

// GossipAddr is the address of the node's memberlist endpoint, the one
// other nodes --join (the actual port when Config.GossipAddr asked for
// port 0); empty before Start.
func (n *Node) GossipAddr() string {
	if n.mesh == nil {
		return ""
	}
	return n.mesh.GossipAddr()
}

// Name is the node's name in the mesh.
func (n *Node) Name() string { return n.cfg.Name }

// Leadership is this node's view of the engine leadership (zero before
// Start).
func (n *Node) Leadership() mesh.Leadership {
	if n.mesh == nil {
		return mesh.Leadership{}
	}
	return n.mesh.Leader()
}

// Members is the mesh as this node sees it (nil before Start).
func (n *Node) Members() []mesh.Member {
	if n.mesh == nil {
		return nil
	}
	return n.mesh.Members()
}

// Term is the fencing term of the leader's engine running on this node:
// the Raft term it leads in; 0 while it does not lead (an engine of a
// server that owns partitions without leading says nothing here).
func (n *Node) Term() uint64 {
	if e := n.active.Load(); e != nil && !e.Follower() {
		if l := n.mesh.Leader(); l.IsLeader {
			return l.Term
		}
	}
	return 0
}

// Failed delivers an error if one of the node's servers stops on its own;
// the caller should then Stop the node.
func (n *Node) Failed() <-chan error { return n.fatal }

// Stop shuts the node down in reverse dependency order: it stops taking
// requests (health NOT_SERVING, streams ended, gRPC and HTTP servers
// stopped), then stops the engine (which stops dispatching and releases
// its leases so the next owner claims them at once), then the workers
// (running actions are cancelled and exec children killed), then closes
// the store. It returns every error, joined. Stop is idempotent; calls
// after the first wait for it and return its result.
func (n *Node) Stop(ctx context.Context) error {
	return n.life.Stop(ctx, func(was lifecycle.State) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		err := n.shutdown(ctx)
		if err != nil {
			n.log.Warn("node stopped with errors", zap.Error(err))
		} else if was == lifecycle.Running {
			n.log.Info("node stopped")
		}
		return err
	})
}

// shutdown stops whatever runs; it is used by Stop and to roll back a
// failed Start. Each step runs even if an earlier one failed. The order:
// API servers, then the leader loop and the engine (so no new term
// starts one), then the mesh (a graceful leave: peers need not wait for
// failure detection), then the workers, the store and the lock.
func (n *Node) shutdown(ctx context.Context) error {
	return n.teardown(ctx, true)
}

// Halt stops the node as if its process died, for tests and fault
// injection: the mesh goes without leaving (no leadership transfer, no
// leave broadcast: peers detect a failure), API connections are cut, the
// engine is abandoned (no lease released, nothing written), running
// actions are cancelled. Unlike a real crash it still closes what the
// process owns (store, sockets, the data directory lock), so the test
// process leaks nothing. Halt and Stop share one outcome: whichever runs
// first decides.
func (n *Node) Halt() {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.StopTimeout)
	defer cancel()
	_ = n.life.Stop(ctx, func(lifecycle.State) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		err := n.teardown(ctx, false)
		n.log.Info("node halted", zap.NamedError("teardown", err))
		return err
	})
}

// teardown is shutdown, graceful or not (Halt).
func (n *Node) teardown(ctx context.Context, graceful bool) error {
	n.ready.Store(false)
	var errs []error
	if !graceful && n.mesh != nil {
		// First, so that the peers see this node die before it stops
		// answering anything else.
		if err := n.mesh.Halt(); err != nil {
			errs = append(errs, fmt.Errorf("halting the mesh: %w", err))
		}
	}
	n.beginStopping()
	errs = append(errs, n.stopServing(ctx, graceful)...)
	errs = append(errs, n.stopLoops(ctx, graceful)...)
	errs = append(errs, n.stopServices(ctx, graceful)...)
	errs = append(errs, n.closeLocal()...)
	return errors.Join(errs...)
}

// stopServing stops the API and the HTTP server (every service says
// NOT_SERVING first), and waits for what they served.
func (n *Node) stopServing(ctx context.Context, graceful bool) (errs []error) {
	if n.health != nil {
		n.health.Shutdown() // every service NOT_SERVING
	}
	if n.grpcSrv != nil {
		if graceful {
			n.stopGRPC(ctx)
		} else {
			n.grpcSrv.Stop()
		}
	} else if n.grpcLis != nil {
		_ = n.grpcLis.Close()
	}
	if n.httpSrv != nil && !graceful {
		_ = n.httpSrv.Close()
	} else if n.httpSrv != nil {
		if err := n.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the HTTP server: %w", err))
			_ = n.httpSrv.Close()
		}
	}
	n.serving.Wait()
	return errs
}

// stopLoops stops the owner loop and its engine, the loop that follows
// the Waggler roles and the trust loop.
func (n *Node) stopLoops(ctx context.Context, graceful bool) (errs []error) {
	if n.stopLoop != nil {
		n.stopLoop()
		<-n.loopDone
	}
	if err := n.stopEngine(ctx, graceful); err != nil {
		errs = append(errs, err)
	}
	if n.stopFollow != nil {
		n.stopFollow()
		<-n.followDone
	}
	if n.stopTrust != nil {
		n.stopTrust()
		<-n.trustDone
	}
	return errs
}

// stopServices stops, in reverse of their start, the Waggler host, the
// mesh (leaving it, when graceful), the connections to other nodes and
// the worker pools.
func (n *Node) stopServices(ctx context.Context, graceful bool) (errs []error) {
	if n.wagglers != nil {
		if err := n.wagglers.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the waggler host: %w", err))
		}
	}
	if n.mesh != nil && graceful {
		if err := n.mesh.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("leaving the mesh: %w", err))
		}
	}
	if n.conns != nil {
		if err := n.conns.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.workers != nil {
		if err := n.workers.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the workers: %w", err))
		}
	}
	return errs
}

// closeLocal closes what openLocal opened: the store, the audit trail and
// the data directory's lock.
func (n *Node) closeLocal() (errs []error) {
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	if n.audit != nil {
		if err := n.audit.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.lock != nil {
		if err := n.lock.unlock(); err != nil {
			errs = append(errs, fmt.Errorf("unlocking the data directory: %w", err))
		}
	}
	return errs
}

// stopEngine stops the engine the owner loop left running: gracefully
// (attempts cancelled, results written, leases released so the next
// owner claims at once) while this node still owns what the engine runs —
// the leader in its term, a follower its partitions at their epochs
// (what it writes is fenced by them anyway); abandoned otherwise, since
// a newer owner may have its instances already.
func (n *Node) stopEngine(ctx context.Context, graceful bool) error {
	e := n.loopEngine
	if e == nil {
		return nil
	}
	n.publish(nil)
	stillOwned := e.Follower() || n.mesh.Leader().IsLeader
	if !graceful || !stillOwned {
		e.Abandon()
		return nil
	}
	if err := e.Stop(ctx); err != nil {
		return fmt.Errorf("stopping the engine: %w", err)
	}
	return nil
}

// stopGRPC lets unary calls in progress finish (streams were ended by
// beginStopping), for at most StopTimeout or until ctx ends, then cuts
// whatever is left.
func (n *Node) stopGRPC(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		n.grpcSrv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(n.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-ctx.Done():
	case <-t.C:
	}
	n.log.Warn("gRPC calls still running at shutdown; cutting them")
	n.grpcSrv.Stop()
	<-done
}
