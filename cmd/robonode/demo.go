package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/internal/client"
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
			o := demoOptions{dataDir: dataDir, logLevel: logLevel, keep: keep, postgres: pg}
			if pg != "" {
				return runMeshDemo(o, stdout, stderr)
			}
			return runDemo(o, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&pg, "postgres", "", "Postgres DSN: run a mesh of three servers and two workers on it and kill the engine leader instead")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory to use, one subdirectory per node (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&logLevel, "log-level", "error", "log level of the nodes: debug, info, warn or error (the demos kill nodes on purpose: warn shows what the nodes say about it)")
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

// logger is the nodes' logger. The demos kill nodes on purpose and narrate
// it; at the default level, the libraries' own complaints about the dead
// peer (every refused vote request, heartbeat and probe) would drown that
// out, so they are dropped below error.
func (o demoOptions) logger(stderr io.Writer) (*zap.Logger, error) {
	log, err := newLogger("console", o.logLevel, stderr)
	if err != nil {
		return nil, usageError{err}
	}
	if o.logLevel == "warn" || o.logLevel == "error" {
		log = log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return quietLibraries{Core: c}
		}))
	}
	return log, nil
}

// submitDemo submits the embedded demo workflow with inputs (a JSON object;
// empty: the defaults) through the API at addr; a failure is reported on w.
func submitDemo(ctx context.Context, w io.Writer, wf robonetv1.WorkflowServiceClient, addr, inputs string) (*robonetv1.SubmitWorkflowResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, demoCallTimeout)
	defer cancel()
	resp, err := wf.SubmitWorkflow(sctx, &robonetv1.SubmitWorkflowRequest{
		Workflow:   &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: examples.Demo, Filename: examples.DemoFile}},
		InputsJson: inputs,
	})
	if err != nil {
		fmt.Fprintf(w, "submitting the demo failed: %s\n", client.Describe(err, addr))
		return nil, errReported
	}
	return resp, nil
}

// printFinal prints the finished instance and says whether it completed.
func printFinal(w io.Writer, final *robonetv1.Instance) error {
	fmt.Fprintln(w)
	client.PrintInstance(w, final)
	fmt.Fprintln(w)
	if final.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		return errReported
	}
	return nil
}

// quietLibraries drops entries below DPanic from the Raft and memberlist
// libraries' loggers (named mesh.raft and mesh.memberlist) and keeps
// everything else.
type quietLibraries struct{ zapcore.Core }

func (q quietLibraries) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.DPanicLevel && (strings.HasPrefix(e.LoggerName, "mesh.raft") || strings.HasPrefix(e.LoggerName, "mesh.memberlist")) {
		return ce
	}
	return q.Core.Check(e, ce)
}

func (q quietLibraries) With(fields []zapcore.Field) zapcore.Core {
	return quietLibraries{Core: q.Core.With(fields)}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
