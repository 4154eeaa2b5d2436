package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

const (
	// callTimeout bounds the demos' unary calls, their waits for the mesh
	// (a leader, a Waggler) and the stop of their nodes.
	callTimeout = 30 * time.Second
	// stopTimeout is the demos' node.Config.StopTimeout. A node's graceful
	// gRPC stop waits for the streams its peers hold open to its Waggler
	// host; the demo does not wait more than this for them.
	stopTimeout = 5 * time.Second
)

// run sets up what both demos share — output from several goroutines,
// the nodes' logger, the data directory, the mesh's security — runs body
// on a cluster, and stops the cluster's nodes whatever body returns.
func run(ctx context.Context, o Options, w io.Writer, body func(ctx context.Context, c *cluster, dir string) error) (err error) {
	o = o.WithDefaults()
	out := zapcore.Lock(zapcore.AddSync(w)) // events and kills are told from several goroutines
	dir, cleanup, err := o.dir()
	if err != nil {
		return err
	}
	defer cleanup()
	sec, err := newSecurity(dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, sec.describe())
	c := &cluster{log: quiet(o.Logger), out: out, sec: sec}
	defer c.stopInto(&err)
	return body(ctx, c, dir)
}

// nodeConfig is a node of a demo: loopback, free ports, no HTTP listener.
func nodeConfig(name, dir string, server bool, log *zap.Logger) node.Config {
	return node.Config{
		Name:        name,
		DataDir:     filepath.Join(dir, name),
		GRPCAddr:    "127.0.0.1:0",
		HTTPAddr:    node.HTTPDisabled,
		GossipAddr:  "127.0.0.1:0",
		RaftAddr:    "127.0.0.1:0",
		Server:      &server,
		Logger:      log,
		StopTimeout: stopTimeout,
	}
}

// submit submits the embedded demo workflow with inputs (a JSON object;
// empty: the defaults) through the API at addr; a failure is told on w.
func submit(ctx context.Context, w io.Writer, wf robonetv1.WorkflowServiceClient, addr, inputs string) (*robonetv1.SubmitWorkflowResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := wf.SubmitWorkflow(sctx, &robonetv1.SubmitWorkflowRequest{
		Workflow:   &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: examples.Demo, Filename: examples.DemoFile}},
		InputsJson: inputs,
	})
	if err != nil {
		fmt.Fprintf(w, "submitting the demo failed: %s\n", client.Describe(err, addr))
		return nil, ErrReported
	}
	return resp, nil
}

// printFinal prints the finished instance and says whether it completed.
func printFinal(w io.Writer, final *robonetv1.Instance) error {
	fmt.Fprintln(w)
	client.PrintInstance(w, final)
	fmt.Fprintln(w)
	if final.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		return ErrReported
	}
	return nil
}

// cluster holds a demo's nodes.
type cluster struct {
	log *zap.Logger
	out io.Writer
	// first, if set, stops before the others: the single server of the
	// Wagglers demo, so that its engine stops dispatching and its streams
	// to the Waggler's node end before that node stops.
	first *node.Node
	// sec secures every node the demo starts, and its client.
	sec   *security
	mu    sync.Mutex
	nodes []*node.Node
}

// start starts a node of the demo and says so; role describes it.
func (c *cluster) start(ctx context.Context, cfg node.Config, role string) (*node.Node, error) {
	if err := c.sec.apply(&cfg); err != nil {
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
		return nil, fmt.Errorf("starting %s: %w", cfg.Name, err)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	fmt.Fprintf(c.out, "started %-8s (%s) gRPC %s gossip %s\n", n.Name(), role, n.GRPCAddr(), n.GossipAddr())
	return n, nil
}

// waitLeader waits up to callTimeout for a node other than not to run the
// engine.
func (c *cluster) waitLeader(ctx context.Context, not string) (*node.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		nodes := c.nodes
		c.mu.Unlock()
		for _, n := range nodes {
			if n.Name() != not && n.Term() > 0 {
				return n, nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("no engine leader elected: %w", ctx.Err())
		}
	}
}

// stopInto stops the nodes, joins a failure into *err and says when the
// mesh stopped cleanly. It stops c.first first, if set, then every other
// node at once: a node's graceful gRPC stop waits (up to its StopTimeout)
// for the streams its peers hold open to its Waggler host, and those end
// when the peers stop too. A node the demo halted reports its halt's
// outcome.
func (c *cluster) stopInto(err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	stop := func(n *node.Node) error {
		if err := n.Stop(ctx); err != nil {
			return fmt.Errorf("%s: %w", n.Name(), err)
		}
		return nil
	}
	errs := make([]error, len(c.nodes)+1)
	if c.first != nil {
		errs[len(c.nodes)] = stop(c.first)
	}
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n == c.first {
			continue
		}
		wg.Go(func() { errs[i] = stop(n) })
	}
	wg.Wait()
	if serr := errors.Join(errs...); serr != nil {
		c.log.Error("unclean shutdown", zap.Error(serr))
		*err = errors.Join(*err, ErrReported)
		return
	}
	fmt.Fprintln(c.out, "mesh stopped cleanly")
}
