package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"

	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// The default demo: Wagglers across a mesh on the embedded store. One
// server on SQLite serves no capability, so every task crosses to one of
// three worker-only nodes serving code.exec, through the Waggler of
// code.exec that the engine leader placed on one of them. Mid-run the demo
// kills a worker that runs tasks, then the Waggler's node, and narrates
// what the gRPC API and the server's view of the mesh show (story.go).
//
// Where a task runs comes from its heartbeats: every TASK_PROGRESS event
// carries the worker id (node/capability/slot) of the run and its
// heartbeat number. A run moved to another node after a kill shows up as
// heartbeats of the same execution and attempt from a new worker; a run
// the successor Waggler adopts keeps its worker and its heartbeat numbers
// go on where they stopped.

const (
	capability = "code.exec"
	slots      = 2 // per worker node
	// heartbeatInterval is how often workers send heartbeats: a dead
	// worker has missed the Waggler's limit of three in under a second.
	heartbeatInterval = 250 * time.Millisecond
	// inheritGrace is how long a successor Waggler waits for the worker of
	// an attempt it inherited to register: six heartbeat intervals,
	// without wag's 5 s floor (on loopback a worker learns of the
	// successor and connects within a few hundred milliseconds).
	inheritGrace = 6 * heartbeatInterval
	// inputs: twelve chunks over six slots, each digest pausing 1.5 s, so
	// that both kills land while tasks run.
	inputs = `{"chunks": 12, "pause": 1.5}`
	// missedHeartbeats is the Waggler's limit: a worker that misses this
	// many heartbeats is dead to it.
	missedHeartbeats = wag.DefaultMissedHeartbeats
	// tick is how often the demo looks at the mesh and decides.
	tick = 50 * time.Millisecond
)

var workerNames = []string{"worker-1", "worker-2", "worker-3"}

// RunWagglers runs the default demo: one server on SQLite that serves no
// capability and three worker-only nodes serving code.exec with two slots
// each. It submits examples/demo.yaml through the server's gRPC API — a
// fan-out of exec tasks that generate, count and hash chunks of text, and
// a gather that adds them up — so every task crosses to a worker, through
// the Waggler of code.exec that the engine leader placed on one of them.
//
// It tells on w, as it happens, which node runs which task, the Waggler
// and its epoch; then it kills a worker node that runs tasks (as a crash)
// and shows its missed heartbeats and its attempts moving to live nodes
// (the same attempts: no retry is spent); then it kills the Waggler's node
// and shows the successor Waggler at a higher epoch adopting what runs on
// live workers. Finally it prints the outputs, where each task ran, and
// stops the mesh; about 15 seconds in all. It returns nil once the
// workflow completed and the mesh stopped cleanly (see ErrReported for the
// rest).
func RunWagglers(ctx context.Context, o Options, w io.Writer) error {
	return run(ctx, o, w, func(ctx context.Context, c *cluster, dir string) error {
		out, log := c.out, c.log
		server, err := c.start(ctx, wagglersNode("server", dir, true, nil, map[string]int{}, log),
			"server, SQLite store in "+filepath.Join(dir, "server")+", serves no capability")
		if err != nil {
			return err
		}
		c.first = server
		workers := map[string]*node.Node{}
		for _, name := range workerNames {
			cfg := wagglersNode(name, dir, false, []string{server.GossipAddr()}, map[string]int{capability: slots}, log)
			if workers[name], err = c.start(ctx, cfg, fmt.Sprintf("worker-only, %s ×%d", capability, slots)); err != nil {
				return err
			}
		}
		if _, err := c.waitLeader(ctx, ""); err != nil {
			return err
		}
		holder, epoch, err := waitWaggler(ctx, server)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "engine leader: %s (term %d)\nWaggler of %s: %s, epoch %d (placed by the leader)\n\n",
			server.Name(), server.Term(), capability, holder, epoch)

		conn, err := client.Dial(server.GRPCAddr(), c.sec.credentials())
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		wf := robonetv1.NewWorkflowServiceClient(conn)
		resp, err := submit(ctx, out, wf, server.GRPCAddr(), inputs)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "submitted %s (%s v%d) with %s, instance %s\n\n", examples.DemoFile,
			resp.GetWorkflow().GetName(), resp.GetWorkflow().GetVersion(), inputs, resp.GetInstanceId())

		s := newStory(out, server, workers, holder, epoch)
		final, err := s.run(ctx, wf, resp.GetInstanceId())
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(out, "interrupted; stopping the mesh")
			} else {
				fmt.Fprintf(out, "following the demo failed: %s\n", client.Describe(err, server.GRPCAddr()))
			}
			return ErrReported
		}
		err = printFinal(out, final)
		s.summary(out, final)
		return err
	})
}

// wagglersNode is a node of the Wagglers demo: timings that notice a dead
// node within about a second instead of several: heartbeats every 250 ms,
// and a gossip probe every 200 ms with a short suspicion
// (tuneMemberlist). They suit a LAN; they are not the test timings of
// mesh.TestConfig.
func wagglersNode(name, dir string, server bool, join []string, caps map[string]int, log *zap.Logger) node.Config {
	cfg := nodeConfig(name, dir, server, log.With(zap.String("node", name)))
	cfg.Join = join
	cfg.Capabilities = caps
	cfg.Mesh = mesh.Config{Memberlist: tuneMemberlist}
	cfg.Wag = wag.Config{HeartbeatInterval: heartbeatInterval, MissedHeartbeats: missedHeartbeats, InheritGrace: inheritGrace}
	return cfg
}

// tuneMemberlist tightens memberlist's LAN failure detection: a probe
// every 200 ms answered within 100 ms, and a suspicion of about two probe
// intervals before a silent node is declared failed. Gossip and push/pull
// keep their defaults but for a faster gossip round.
func tuneMemberlist(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.SuspicionMult = 2
}

// waitWaggler waits up to callTimeout for server to see an alive node
// holding the Waggler role of capability.
func waitWaggler(ctx context.Context, server *node.Node) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		for _, m := range server.Members() {
			if m.Status == mesh.StatusAlive && m.Wagglers[capability] > 0 {
				return m.Name, m.Wagglers[capability], nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", 0, fmt.Errorf("no Waggler of %s placed: %w", capability, ctx.Err())
		}
	}
}
