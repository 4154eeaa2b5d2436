package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/robonet/robonet/cmd/internal/client"
	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		dataDir  string
		logLevel string
		keep     bool
		pg       string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo workflow on a throwaway node and show its progress and outputs",
		Long: `Start a node on loopback with the embedded SQLite store in a temporary
directory (or --data-dir), submit examples/demo.yaml through the node's gRPC
API — a fan-out of exec tasks that generate, count and hash chunks of text,
and a gather that adds them up — show live progress, print the outputs and
stop the node cleanly.

The node listens on a free port; nothing else needs to run. Exits 0 when
the workflow completed, 1 otherwise.

With --postgres DSN the demo is a mesh instead: three servers on that
database and two worker-only nodes, in this process on loopback. The
workflow is submitted through a worker-only node (which forwards it to the
leader) and followed through a follower; once a few tasks are done the
leader is killed (as a crash: no leave, no lease released), the demo names
the new leader, and the workflow finishes there with its outputs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := demoOptions{dataDir: dataDir, logLevel: logLevel, keep: keep, postgres: pg}
			if pg != "" {
				return runMeshDemo(o, stdout, stderr)
			}
			return runDemo(o, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&pg, "postgres", "", "Postgres DSN: run a mesh of three servers and two workers on it instead of one node on SQLite")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory to use (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "log level of the node: debug, info, warn or error")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory")
	return cmd
}

type demoOptions struct {
	dataDir  string
	logLevel string
	keep     bool
	postgres string
}

// dir returns the demo's data directory: --data-dir, or a temporary one that
// cleanup removes unless --keep was given.
func (o demoOptions) dir() (dir string, cleanup func(), err error) {
	if o.dataDir != "" {
		return o.dataDir, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "robonode-demo-*")
	if err != nil {
		return "", nil, runtimeError{fmt.Errorf("creating a temporary data directory: %w", err)}
	}
	if o.keep {
		return dir, func() {}, nil
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

func runDemo(o demoOptions, stdout, stderr io.Writer) error {
	log, err := newLogger("console", o.logLevel, stderr)
	if err != nil {
		return usageError{err}
	}
	defer func() { _ = log.Sync() }()

	dir, cleanup, err := o.dir()
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	n, err := node.New(node.Config{
		Name:       "demo",
		DataDir:    dir,
		GRPCAddr:   "127.0.0.1:0",
		HTTPAddr:   node.HTTPDisabled,
		GossipAddr: "127.0.0.1:0",
		RaftAddr:   "127.0.0.1:0",
		Logger:     log,
	})
	if err != nil {
		return err
	}
	if err := n.Start(ctx); err != nil {
		if errors.Is(err, node.ErrConfig) {
			return err
		}
		return runtimeError{fmt.Errorf("starting the node: %w", err)}
	}
	fmt.Fprintf(stdout, "robonode demo: node %q on %s, SQLite store in %s\n", "demo", n.GRPCAddr(), dir)

	runErr := submitDemo(ctx, n.GRPCAddr(), stdout)

	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Stop(stopCtx); err != nil {
		log.Error("unclean shutdown", zap.Error(err))
		return errors.Join(runErr, errReported)
	}
	fmt.Fprintln(stdout, "node stopped cleanly")
	return runErr
}

// submitDemo runs the embedded demo workflow through the node's API, the
// way roboctl submit --wait does.
func submitDemo(ctx context.Context, addr string, stdout io.Writer) error {
	conn, err := client.Dial(addr)
	if err != nil {
		return runtimeError{err}
	}
	defer func() { _ = conn.Close() }()
	wf := robonetv1.NewWorkflowServiceClient(conn)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := wf.SubmitWorkflow(sctx, &robonetv1.SubmitWorkflowRequest{
		Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: examples.Demo, Filename: examples.DemoFile}},
	})
	cancel()
	if err != nil {
		fmt.Fprintf(stdout, "submitting the demo failed: %s\n", client.Describe(err, addr))
		return errReported
	}
	fmt.Fprintf(stdout, "submitted %s (%s v%d), instance %s\n\n", examples.DemoFile, resp.GetWorkflow().GetName(),
		resp.GetWorkflow().GetVersion(), resp.GetInstanceId())

	final, err := client.Wait(ctx, wf, resp.GetInstanceId(), client.WaitOptions{Progress: client.NewProgress(stdout)})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stdout, "interrupted; stopping the node")
		} else {
			fmt.Fprintf(stdout, "following the demo failed: %s\n", client.Describe(err, addr))
		}
		return errReported
	}
	fmt.Fprintln(stdout)
	client.PrintInstance(stdout, final)
	fmt.Fprintln(stdout)
	if final.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		return errReported
	}
	return nil
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
