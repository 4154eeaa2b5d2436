package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

const (
	// demoCallTimeout bounds the demos' unary calls, their waits for the
	// mesh (a leader, a Waggler) and the stop of their nodes.
	demoCallTimeout = 30 * time.Second
	// demoStopTimeout is the demos' node.Config.StopTimeout.
	demoStopTimeout = 5 * time.Second
)

// withDemo sets up what both demos share — output from several
// goroutines, the logger, the data directory, signals — runs body on a
// meshDemo, and stops the demo's nodes whatever body returns.
func withDemo(o demoOptions, w, stderr io.Writer, body func(ctx context.Context, d *meshDemo, dir string) error) (err error) {
	stdout := &lockedWriter{w: w} // events and kills are told from several goroutines
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	dir, cleanup, err := o.dir()
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	sec, err := newDemoSecurity(dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, sec.describe())
	d := &meshDemo{log: log, out: stdout, sec: sec}
	defer d.stopInto(&err)
	return body(ctx, d, dir)
}

// runMeshDemo runs the demo on a local mesh: three servers on one Postgres
// and two worker-only nodes, the leader killed mid-run.
func runMeshDemo(o demoOptions, w, stderr io.Writer) error {
	return withDemo(o, w, stderr, func(ctx context.Context, d *meshDemo, dir string) error {
		stdout, log := d.out, d.log
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
				// A node's graceful gRPC stop waits for the streams its peers
				// hold open to its Waggler host; the demo does not wait more
				// than this for them.
				StopTimeout: demoStopTimeout,
			}
			role := "worker-only"
			if server {
				cfg.PostgresDSN, cfg.BootstrapExpect = o.postgres, 3
				role = "server"
			}
			if i > 0 {
				cfg.Join = []string{d.nodes[0].GossipAddr()}
			}
			if _, err := d.start(ctx, cfg, role); err != nil {
				return err
			}
		}
		leader, err := d.waitLeader(ctx, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "engine leader: %s (term %d)\n\n", leader.Name(), leader.Term())

		entry := d.nodes[3] // a worker-only node: it forwards to the leader
		follow := d.follower(leader)
		conn, err := client.Dial(entry.GRPCAddr(), d.sec.credentials())
		if err != nil {
			return runtimeError{err}
		}
		defer func() { _ = conn.Close() }()
		resp, err := submitDemo(ctx, stdout, robonetv1.NewWorkflowServiceClient(conn), entry.GRPCAddr(), "")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "submitted %s through %s, instance %s; following it through %s\n\n", examples.DemoFile,
			entry.Name(), resp.GetInstanceId(), follow.Name())

		fconn, err := client.Dial(follow.GRPCAddr(), d.sec.credentials())
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
		return printFinal(stdout, final)
	})
}

// meshDemo holds a demo's nodes.
type meshDemo struct {
	log *zap.Logger
	out io.Writer
	// first, if set, stops before the others: the single server of the
	// default demo, so that its engine stops dispatching and its streams
	// to the Waggler's node end before that node stops.
	first *node.Node
	// sec secures every node the demo starts, and its client.
	sec   *demoSecurity
	mu    sync.Mutex
	nodes []*node.Node
}

// start starts a node of the demo and says so; role describes it.
func (d *meshDemo) start(ctx context.Context, cfg node.Config, role string) (*node.Node, error) {
	if err := d.sec.apply(&cfg); err != nil {
		return nil, err
	}
	n, err := node.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		if errors.Is(err, node.ErrConfig) {
			return nil, err
		}
		return nil, runtimeError{fmt.Errorf("starting %s: %w", cfg.Name, err)}
	}
	d.mu.Lock()
	d.nodes = append(d.nodes, n)
	d.mu.Unlock()
	fmt.Fprintf(d.out, "started %-8s (%s) gRPC %s gossip %s\n", n.Name(), role, n.GRPCAddr(), n.GossipAddr())
	return n, nil
}

// waitLeader waits up to demoCallTimeout for a node other than not to run
// the engine.
func (d *meshDemo) waitLeader(ctx context.Context, not string) (*node.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, demoCallTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		d.mu.Lock()
		nodes := d.nodes
		d.mu.Unlock()
		for _, n := range nodes {
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

// stopInto stops the nodes, joins a failure into *err and says when the
// mesh stopped cleanly. It stops d.first first, if set, then every other
// node at once: a node's graceful gRPC stop waits (up to its StopTimeout)
// for the streams its peers hold open to its Waggler host, and those end
// when the peers stop too. A node the demo halted reports its halt's
// outcome.
func (d *meshDemo) stopInto(err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), demoCallTimeout)
	defer cancel()
	stop := func(n *node.Node) error {
		if err := n.Stop(ctx); err != nil {
			return fmt.Errorf("%s: %w", n.Name(), err)
		}
		return nil
	}
	errs := make([]error, len(d.nodes)+1)
	if d.first != nil {
		errs[len(d.nodes)] = stop(d.first)
	}
	var wg sync.WaitGroup
	for i, n := range d.nodes {
		if n == d.first {
			continue
		}
		wg.Go(func() { errs[i] = stop(n) })
	}
	wg.Wait()
	if serr := errors.Join(errs...); serr != nil {
		d.log.Error("unclean shutdown", zap.Error(serr))
		*err = errors.Join(*err, errReported)
		return
	}
	fmt.Fprintln(d.out, "mesh stopped cleanly")
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
