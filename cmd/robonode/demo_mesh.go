package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/robonet/robonet/cmd/internal/client"
	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// runMeshDemo runs the demo on a local mesh: three servers on one Postgres
// and two worker-only nodes, the leader killed mid-run.
func runMeshDemo(o demoOptions, w, stderr io.Writer) (err error) {
	stdout := &lockedWriter{w: w} // the leader is killed from another goroutine
	log, err := newLogger("console", o.logLevel, stderr)
	if err != nil {
		return usageError{err}
	}
	defer func() { _ = log.Sync() }()
	if o.logLevel == "warn" || o.logLevel == "error" {
		// The demo kills a server on purpose and narrates it; at the default
		// level, the libraries' own complaints about the dead peer (every
		// refused vote request and heartbeat) would drown that out.
		log = log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return quietLibraries{Core: c}
		}))
	}
	dir, cleanup, err := o.dir()
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	d := &meshDemo{log: log, out: stdout}
	defer func() {
		if serr := d.stop(); serr != nil {
			log.Error("unclean shutdown", zap.Error(serr))
			err = errors.Join(err, errReported)
		} else {
			fmt.Fprintln(stdout, "mesh stopped cleanly")
		}
	}()
	names := []string{"server-1", "server-2", "server-3", "worker-1", "worker-2"}
	for i, name := range names {
		server := i < 3
		cfg := node.Config{
			Name:       name,
			DataDir:    filepath.Join(dir, name),
			GRPCAddr:   "127.0.0.1:0",
			HTTPAddr:   node.HTTPDisabled,
			GossipAddr: "127.0.0.1:0",
			RaftAddr:   "127.0.0.1:0",
			Server:     &server,
			Logger:     log,
		}
		if server {
			cfg.PostgresDSN, cfg.BootstrapExpect = o.postgres, 3
		}
		if i > 0 {
			cfg.Join = []string{d.nodes[0].GossipAddr()}
		}
		n, err := node.New(cfg)
		if err != nil {
			return err
		}
		if err := n.Start(ctx); err != nil {
			return runtimeError{fmt.Errorf("starting %s: %w", name, err)}
		}
		d.add(n)
		role := "server"
		if !server {
			role = "worker-only"
		}
		fmt.Fprintf(stdout, "started %-8s (%s) gRPC %s gossip %s\n", name, role, n.GRPCAddr(), n.GossipAddr())
	}
	leader, err := d.waitLeader(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "engine leader: %s (term %d)\n\n", leader.Name(), leader.Term())

	entry := d.nodes[3] // a worker-only node: it forwards to the leader
	follow := d.follower(leader)
	conn, err := client.Dial(entry.GRPCAddr())
	if err != nil {
		return runtimeError{err}
	}
	defer func() { _ = conn.Close() }()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := robonetv1.NewWorkflowServiceClient(conn).SubmitWorkflow(sctx, &robonetv1.SubmitWorkflowRequest{
		Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: examples.Demo, Filename: examples.DemoFile}},
	})
	cancel()
	if err != nil {
		fmt.Fprintf(stdout, "submitting the demo failed: %s\n", client.Describe(err, entry.GRPCAddr()))
		return errReported
	}
	fmt.Fprintf(stdout, "submitted %s through %s, instance %s; following it through %s\n\n", examples.DemoFile,
		entry.Name(), resp.GetInstanceId(), follow.Name())

	fconn, err := client.Dial(follow.GRPCAddr())
	if err != nil {
		return runtimeError{err}
	}
	defer func() { _ = fconn.Close() }()
	var killOnce sync.Once
	killed := make(chan struct{})
	progress := client.NewProgress(stdout)
	final, err := client.Wait(ctx, robonetv1.NewWorkflowServiceClient(fconn), resp.GetInstanceId(), client.WaitOptions{
		Progress: progress,
		OnEvent: func(ev *robonetv1.Event) {
			if ev.GetKind() != robonetv1.EventKind_EVENT_KIND_TASK_COMPLETED {
				return
			}
			killOnce.Do(func() {
				// Kill the leader in the background: the watch goes on
				// through the follower, which resumes with the next leader.
				go func() {
					defer close(killed)
					fmt.Fprintf(stdout, "\n>>> killing the leader %s (term %d) mid-run\n", leader.Name(), leader.Term())
					began := time.Now()
					leader.Halt()
					if next, err := d.waitLeader(ctx, leader.Name()); err == nil {
						fmt.Fprintf(stdout, ">>> new engine leader: %s (term %d), %s after the kill\n", next.Name(), next.Term(),
							time.Since(began).Round(time.Millisecond))
					}
				}()
			})
		},
	})
	if err != nil {
		fmt.Fprintf(stdout, "following the demo failed: %s\n", client.Describe(err, follow.GRPCAddr()))
		return errReported
	}
	// Wait for the kill's report (the new leader), if the kill happened.
	killOnce.Do(func() {
		fmt.Fprintln(stdout, "(the workflow finished before the leader was killed)")
		close(killed)
	})
	<-killed
	fmt.Fprintln(stdout)
	client.PrintInstance(stdout, final)
	fmt.Fprintln(stdout)
	if final.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		return errReported
	}
	return nil
}

// meshDemo holds the demo's nodes.
type meshDemo struct {
	log   *zap.Logger
	out   io.Writer
	mu    sync.Mutex
	nodes []*node.Node
}

func (d *meshDemo) add(n *node.Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes = append(d.nodes, n)
}

// waitLeader waits up to 30 s for a node other than not to run the engine.
func (d *meshDemo) waitLeader(ctx context.Context, not string) (*node.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, n := range d.nodes {
			if n.Name() != not && n.Term() > 0 {
				return n, nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, runtimeError{fmt.Errorf("no engine leader elected: %w", ctx.Err())}
		}
	}
}

// follower returns a server that does not lead.
func (d *meshDemo) follower(leader *node.Node) *node.Node {
	for _, n := range d.nodes[:3] {
		if n != leader {
			return n
		}
	}
	return leader
}

// stop stops every node, workers first, in parallel per role.
func (d *meshDemo) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for i := len(d.nodes) - 1; i >= 0; i-- {
		if err := d.nodes[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.nodes[i].Name(), err))
		}
	}
	return errors.Join(errs...)
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
