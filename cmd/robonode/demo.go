package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/robonet/robonet/chaos/demo"
	"github.com/robonet/robonet/node"
)

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var o demo.Options // the flags set it; the logger comes from --log-level
	var logLevel string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo workflow across a throwaway mesh, killing a worker and the Waggler's node mid-run",
		Long: `Start a mesh in this process on loopback: one server with the embedded
SQLite store in a temporary directory (or --data-dir) that serves no
capability, and three worker-only nodes serving code.exec with two slots
each. Submit examples/demo.yaml through the server's gRPC API — a fan-out
of exec tasks that generate, count and hash chunks of text, and a gather
that adds them up — so every task crosses to a worker, through the Waggler
of code.exec that the engine leader placed on one of them.

The demo prints, as it happens, which node runs which task, the Waggler and
its epoch; then it kills a worker node that runs tasks (as a crash) and
shows its missed heartbeats and its attempts moving to live nodes (the
same attempts: no retry is spent); then it kills the Waggler's node and
shows the successor Waggler at a higher epoch adopting what runs on live
workers. Finally it prints the outputs, where each task ran, and stops the
mesh. It takes about 15 seconds.

Exits 0 when the workflow completed, 1 otherwise.

With --postgres DSN the demo is a mesh of three servers on that database
and two worker-only nodes instead. The workflow is submitted through a
worker-only node (which forwards it to the leader) and followed through a
follower; once a few tasks are done the engine leader is killed (as a
crash: no leave, no lease released), the demo names the new leader, and
the workflow finishes there with its outputs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(o, logLevel, stdout, stderr)
		},
	}
	addDemoFlags(cmd.Flags(), &o, &logLevel)
	return cmd
}

// addDemoFlags binds the demo's flags to o and logLevel.
func addDemoFlags(fs *pflag.FlagSet, o *demo.Options, logLevel *string) {
	fs.StringVar(&o.Postgres, "postgres", "", "Postgres DSN: run a mesh of three servers and two workers on it and kill the engine leader instead")
	fs.StringVar(&o.DataDir, "data-dir", "", "data directory to use, one subdirectory per node (default: a temporary one, removed afterwards)")
	fs.StringVar(logLevel, "log-level", "error", "log level of the nodes: debug, info, warn or error (the demos kill nodes on purpose: warn shows what the nodes say about it)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary data directory")
}

// runDemo runs the scenario of package chaos/demo that the flags chose,
// with the nodes logging to stderr at logLevel, until it ends or SIGINT or
// SIGTERM interrupts it.
func runDemo(o demo.Options, logLevel string, stdout, stderr io.Writer) error {
	log, err := newLogger("console", logLevel, stderr)
	if err != nil {
		return usageError{err}
	}
	defer func() { _ = log.Sync() }()
	o.Logger = log
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	scenario := demo.RunWagglers
	if o.Postgres != "" {
		scenario = demo.RunMesh
	}
	return demoError(scenario(ctx, o, stdout))
}

// demoError maps a demo's outcome to robonode's exit codes: a failure the
// demo told (1, said once), a node refusing its configuration (2), any
// other failure (1).
func demoError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, demo.ErrReported):
		return errReported
	case errors.Is(err, node.ErrConfig):
		return err
	default:
		return runtimeError{err}
	}
}
