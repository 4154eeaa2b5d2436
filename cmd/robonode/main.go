// Command robonode runs a roboNet node.
//
// With no flags it runs a single server on loopback: the gRPC API on
// 127.0.0.1:7233 (roboctl's default --addr), /healthz and /readyz on
// 127.0.0.1:7280, the embedded SQLite store in ./robonode-data, every
// built-in action and a default capability set sized to the machine
// (node.DefaultCapabilities), so every workflow in examples/ runs as it is.
//
// Settings come from flags, ROBONET_* environment variables and a config
// file, in that order of precedence (see settings.go and --help).
//
// robonode only parses its settings, starts a node, waits for SIGINT or
// SIGTERM and stops it: in-flight work is cancelled and the engine's leases
// released, so a restarted node (or another one) picks the workflows up at
// once. A second signal during the shutdown kills the process.
//
// `robonode demo` parses its flags and runs a scenario of package
// chaos/demo: a throwaway mesh in-process (a server on SQLite and three
// worker-only nodes) running examples/demo.yaml, a worker and then the
// Waggler's node killed mid-run while it tells what happens (RunMesh for
// --postgres).
//
// Exit codes: 0 clean shutdown, 1 runtime error, 2 usage or configuration
// error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapgrpc"
	"golang.org/x/term"
	"google.golang.org/grpc/grpclog"

	"github.com/robonet/robonet/internal/gctune"
	"github.com/robonet/robonet/internal/version"
	"github.com/robonet/robonet/node"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run executes one command line and returns its exit code. Commands
// return errReported or a runtimeError for failures at run time; every
// other error (bad flags, arguments, settings or configuration, including
// cobra's own) is a usage error.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	root := newRootCmd(stdout, stderr, getenv)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if cmd == nil {
		cmd = root
	}
	var re runtimeError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitRuntime
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "robonode: %v\n", err)
		return exitRuntime
	default:
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
		return exitUsage
	}
}

// errReported marks a runtime failure already shown to the user.
var errReported = errors.New("failed")

// runtimeError is a failure at run time that was not reported yet: exit 1.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func newRootCmd(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:     "robonode",
		Version: version.String("robonode"),
		Short:   "robonode runs a roboNet node",
		Long: `robonode runs a roboNet node: the workflow engine, worker pools for its
capabilities, the gRPC API and the /healthz and /readyz endpoints.

With no flags it runs a single server on loopback (gRPC 127.0.0.1:7233,
HTTP 127.0.0.1:7280, gossip 7301, Raft 7302) with the embedded SQLite store
in ./robonode-data and a default capability set sized to this machine, so
every example workflow runs. It is a mesh of one: it elects itself engine
leader within a second.

A mesh: start the first server, then point the others at its gossip
address. More than one server needs a shared Postgres store:

  robonode --name s1 --bootstrap-expect 3 --postgres $DSN --bind 10.0.0.1
  robonode --name s2 --bootstrap-expect 3 --postgres $DSN --bind 10.0.0.2 --join 10.0.0.1:7301 --server
  robonode --name s3 --bootstrap-expect 3 --postgres $DSN --bind 10.0.0.3 --join 10.0.0.1:7301 --server
  robonode --name w1 --bind 10.0.0.4 --join 10.0.0.1:7301 --capability code.exec=16 --exec-allow '/opt/jobs/*'

A node that listens beyond loopback runs no exec task unless --exec-allow
names the programs it may run (absolute paths or globs; '*' for any).

Any node answers the API (roboctl --addr any-node:7233): calls that need the
engine leader are forwarded to it. A node started with --join is
worker-only unless --server is given; worker-only nodes open no store.

Every flag can also be set with an environment variable ROBONET_<FLAG>
(e.g. ROBONET_DATA_DIR, ROBONET_CAPABILITY=code.exec=8,core=16) or in a YAML
or JSON config file (--config, keys like data_dir; capabilities as a map).
Precedence: flag > environment > config file > default.

Exit codes: 0 clean shutdown, 1 runtime error, 2 usage or configuration error.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := resolve(cmd.Flags(), getenv)
			if err != nil {
				return err
			}
			return serve(s, stderr, getenv)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	addServerFlags(root.Flags())
	root.AddCommand(newDemoCmd(stdout, stderr), newTLSCmd(stdout), newKeyringCmd(stdout), newHealthcheckCmd(stdout), newBenchCmd(stdout, stderr))
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// serve runs a node until SIGINT or SIGTERM, or until it fails.
func serve(s settings, stderr io.Writer, getenv func(string) string) error {
	log, err := newLogger(s.LogFormat, s.LogLevel, stderr)
	if err != nil {
		return usageError{err}
	}
	defer func() { _ = log.Sync() }()
	// gRPC's own warnings and errors go to the node's log, not to stderr
	// in a format of their own; its info chatter is dropped.
	grpclog.SetLoggerV2(zapgrpc.NewLogger(log.Named("grpc").WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))))
	// A node's collector settings, unless GOGC and GOMEMLIMIT set them.
	log.Info("garbage collector", zap.Stringer("settings", gctune.Apply(getenv)))
	if s.CPUProfile != "" {
		stop, err := startCPUProfile(s.CPUProfile)
		if err != nil {
			return usageError{err}
		}
		defer stop(log)
	}

	n, err := node.New(nodeConfig(s, log))
	if err != nil {
		return err
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := n.Start(ctx); err != nil {
		if errors.Is(err, node.ErrConfig) {
			return err
		}
		log.Error("node failed to start", zap.Error(err))
		return errReported
	}

	// SIGHUP re-reads the API token file at once (the node also notices
	// a change by itself within a second).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var runErr error
wait:
	for {
		select {
		case <-hup:
			if err := n.ReloadTokens(); err != nil {
				log.Error("SIGHUP: the API token file was not reloaded", zap.Error(err))
			}
			continue
		case <-ctx.Done():
			log.Info("signal received; shutting down (a second signal kills the process)")
		case runErr = <-n.Failed():
			log.Error("node failed; shutting down", zap.Error(runErr))
		}
		break wait
	}
	stopSignals() // from here on, a second signal has its default effect

	stopCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	if err := n.Stop(stopCtx); err != nil {
		log.Error("unclean shutdown", zap.Error(err))
		return errReported
	}
	if runErr != nil {
		return errReported
	}
	return nil
}

// nodeConfig maps settings to the node's configuration.
func nodeConfig(s settings, log *zap.Logger) node.Config {
	cfg := node.Config{
		Name:         s.Name,
		DataDir:      s.DataDir,
		PostgresDSN:  s.Postgres,
		GRPCAddr:     s.GRPC,
		HTTPAddr:     s.HTTP,
		EnableDebug:  s.EnableDebug,
		TLS:          s.TLS,
		APITokenFile: s.APITokenFile,
		Insecure:     s.Insecure,
		DispatchTier: s.DispatchTier,
		TrustPeers:   s.TrustPeers,
		ExecAllow:    s.ExecAllow,
		ExecUser:     s.ExecUser,
		Capabilities: s.Capabilities,
		Logger:       log,
		StopTimeout:  s.ShutdownTimeout,

		AllowWorkerBuiltins: s.WorkerBuiltins,
		WorkerMinRuntime:    s.WorkerMinRuntime,

		Join:            s.Join,
		Advertise:       s.Advertise,
		Server:          s.Server,
		BootstrapExpect: s.BootstrapExpect,
		GossipAddr:      s.Gossip,
		RaftAddr:        s.Raft,
		GossipKey:       s.GossipKey,
	}
	if s.WorkerMinRuntime == 0 {
		cfg.WorkerMinRuntime = -1 // --worker-min-runtime 0: no floor
	}
	cfg.Wag.HeartbeatInterval, cfg.Wag.MissedHeartbeats = s.HeartbeatInterval, s.MissedHeartbeats
	if s.Partitions > 0 {
		cfg.Mesh.Partitions, cfg.Mesh.PartitionsSet = s.Partitions, true
	}
	cfg.Mesh.PartitionPlacement = s.Placement
	for _, set := range s.Limits {
		set(&cfg)
	}
	return cfg
}

// newLogger builds the process's logger: JSON lines for machines, or
// coloured console lines for people; both to stderr.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	default:
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout(time.DateOnly + " " + time.TimeOnly + ".000") // a node runs for days
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w)))), nil
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// startCPUProfile profiles the process's CPU until the returned function
// runs, which writes the profile out.
func startCPUProfile(file string) (stop func(*zap.Logger), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu-profile %s: %w", file, err)
	}
	return func(log *zap.Logger) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Error("writing the CPU profile", zap.String("file", file), zap.Error(err))
			return
		}
		log.Info("CPU profile written", zap.String("file", file))
	}, nil
}
