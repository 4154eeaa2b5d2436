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
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/sqlite"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// The engine is the API's Engine and wag's ResultSink; wag is the engine's
// Dispatcher.
var (
	_ Engine            = (*engine.Engine)(nil)
	_ engine.Dispatcher = (*wag.Local)(nil)
)

// Node is one robonode: store, engine, workers and the API servers, with one
// lifecycle. Build it with New, then Start and Stop it; Stop is idempotent.
type Node struct {
	cfg Config
	log *zap.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	stopErr error

	// stopping is cancelled when Stop begins: long-lived API streams end
	// with UNAVAILABLE so that clients reconnect elsewhere or later.
	stopping      context.Context
	beginStopping context.CancelFunc

	lock    *dirLock
	term    uint64
	store   engine.Store
	workers *wag.Local
	eng     *engine.Engine

	grpcLis net.Listener
	grpcSrv *grpc.Server
	health  *health.Server
	httpLis net.Listener
	httpSrv *http.Server
	ready   atomic.Bool

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
	stopping, begin := context.WithCancel(context.Background())
	return &Node{
		cfg:           cfg,
		log:           cfg.Logger.With(zap.String("node", cfg.Name)),
		stopping:      stopping,
		beginStopping: begin,
		fatal:         make(chan error, 2),
	}, nil
}

// Start opens the store, starts the workers, the engine and the API
// servers, and returns once they all run. If any step fails, what was
// started is stopped again and the error returned. A node starts once.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.stopped {
		return errors.New("node: Start called twice, or after Stop")
	}
	n.started = true
	defer func() {
		if err != nil {
			err = errors.Join(err, n.shutdown(context.WithoutCancel(ctx)))
			n.stopped = true
		}
	}()

	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	if n.lock, err = lockDir(n.cfg.DataDir); err != nil {
		return err
	}
	if n.term, err = nextTerm(n.cfg.DataDir); err != nil {
		return err
	}
	n.log = n.log.With(zap.Uint64("term", n.term))
	if n.store, err = n.openStore(ctx); err != nil {
		return err
	}

	// wag needs its sink and the engine its dispatcher at construction:
	// the relay breaks the cycle, and is pointed at the engine before
	// anything runs.
	relay := &sinkRelay{}
	wcfg := n.cfg.Wag
	// wag and the engine add the node's name (and the engine its term) to
	// their own log lines.
	wcfg.NodeName, wcfg.Capabilities, wcfg.Sink, wcfg.Logger = n.cfg.Name, n.cfg.Capabilities, relay, n.cfg.Logger
	if n.workers, err = wag.New(wcfg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ecfg := n.cfg.Engine
	ecfg.Store, ecfg.Dispatcher, ecfg.Logger, ecfg.NodeName, ecfg.Term = n.store, n.workers, n.cfg.Logger, n.cfg.Name, n.term
	if n.eng, err = engine.New(ecfg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	relay.sink.Store(n.eng)

	if err := n.workers.Start(ctx); err != nil {
		return fmt.Errorf("starting the workers: %w", err)
	}
	if err := n.eng.Start(ctx); err != nil {
		return fmt.Errorf("starting the engine: %w", err)
	}
	if err := n.startGRPC(); err != nil {
		return err
	}
	if err := n.startHTTP(); err != nil {
		return err
	}
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.health.SetServingStatus(robonetv1.WorkflowService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	n.ready.Store(true)
	n.log.Info("node started",
		zap.String("grpc_addr", n.GRPCAddr()), zap.String("http_addr", n.HTTPAddr()),
		zap.String("store", n.storeName()), zap.String("data_dir", n.cfg.DataDir),
		zap.Any("capabilities", n.cfg.Capabilities))
	return nil
}

func (n *Node) storeName() string {
	if n.cfg.PostgresDSN != "" {
		return "postgres"
	}
	return "sqlite"
}

func (n *Node) openStore(ctx context.Context) (engine.Store, error) {
	if n.cfg.PostgresDSN != "" {
		s, err := postgres.Open(ctx, postgres.Config{DSN: n.cfg.PostgresDSN, Schema: n.cfg.PostgresSchema, Logger: n.log})
		if err != nil {
			return nil, fmt.Errorf("opening the Postgres store: %w", err)
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: n.cfg.sqlitePath(), Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite store: %w", err)
	}
	return s, nil
}

func (n *Node) startGRPC() error {
	lis, err := net.Listen("tcp", n.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	n.grpcLis = lis
	ic := apiInterceptors{log: n.log.Named("api")}
	n.grpcSrv = grpc.NewServer(
		grpc.MaxRecvMsgSize(n.cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(n.cfg.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(ic.unary),
		grpc.ChainStreamInterceptor(n.endStreamsOnStop, ic.stream),
	)
	robonetv1.RegisterWorkflowServiceServer(n.grpcSrv, &apiServer{eng: n.eng, maxSpecBytes: n.cfg.MaxSpecBytes})
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
	return nil
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

func (n *Node) startHTTP() error {
	if n.cfg.HTTPAddr == HTTPDisabled {
		return nil
	}
	lis, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP listener: %w", err)
	}
	n.httpLis = lis
	n.httpSrv = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
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

// Term is this start's fencing term (0 before Start).
func (n *Node) Term() uint64 { return n.term }

// Failed delivers an error if one of the node's servers stops on its own;
// the caller should then Stop the node.
func (n *Node) Failed() <-chan error { return n.fatal }

// Stop shuts the node down in reverse dependency order: it stops taking
// requests (health NOT_SERVING, streams ended, gRPC and HTTP servers
// stopped), then stops the engine (which stops dispatching and releases
// its leases so the next owner claims them at once), then the workers
// (running actions are cancelled and exec children killed), then closes
// the store. It returns every error, joined. Stop is idempotent; calls
// after the first return the first one's result.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return n.stopErr
	}
	n.stopped = true
	n.stopErr = n.shutdown(ctx)
	if n.stopErr != nil {
		n.log.Warn("node stopped with errors", zap.Error(n.stopErr))
	} else if n.started {
		n.log.Info("node stopped")
	}
	return n.stopErr
}

// shutdown stops whatever runs; it is used by Stop and to roll back a
// failed Start. Each step runs even if an earlier one failed.
func (n *Node) shutdown(ctx context.Context) error {
	var errs []error
	n.ready.Store(false)
	n.beginStopping()
	if n.health != nil {
		n.health.Shutdown() // every service NOT_SERVING
	}
	if n.grpcSrv != nil {
		n.stopGRPC(ctx)
	} else if n.grpcLis != nil {
		_ = n.grpcLis.Close()
	}
	if n.httpSrv != nil {
		if err := n.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the HTTP server: %w", err))
			_ = n.httpSrv.Close()
		}
	}
	n.serving.Wait()
	if n.eng != nil {
		if err := n.eng.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the engine: %w", err))
		}
	}
	if n.workers != nil {
		if err := n.workers.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the workers: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	if n.lock != nil {
		if err := n.lock.unlock(); err != nil {
			errs = append(errs, fmt.Errorf("unlocking the data directory: %w", err))
		}
	}
	return errors.Join(errs...)
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

// sinkRelay forwards results from the workers to the engine, which is
// built after them.
type sinkRelay struct {
	sink atomic.Pointer[engine.Engine]
}

func (r *sinkRelay) TaskResult(ctx context.Context, res engine.TaskResult) {
	if e := r.sink.Load(); e != nil {
		e.TaskResult(ctx, res)
	}
}

func (r *sinkRelay) TaskProgress(ctx context.Context, p engine.TaskProgress) {
	if e := r.sink.Load(); e != nil {
		e.TaskProgress(ctx, p)
	}
}
