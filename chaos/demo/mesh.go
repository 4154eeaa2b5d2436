package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/robonet/robonet/examples"
	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// RunMesh runs the demo on a local mesh: three servers on the Postgres
// database o.Postgres and two worker-only nodes. The workflow is submitted
// through a worker-only node (which forwards it to the leader) and
// followed through a follower; once a task is done the engine leader is
// killed (as a crash: no leave, no lease released), the demo names the new
// leader, and the workflow finishes there with its outputs. It tells the
// story on w and returns nil once the workflow completed and the mesh
// stopped cleanly (see ErrReported for the rest). Without o.Postgres the
// first server refuses its configuration (node.ErrConfig): servers of a
// mesh share one database.
func RunMesh(ctx context.Context, o Options, w io.Writer) error {
	return run(ctx, o, w, func(ctx context.Context, c *cluster, dir string) error {
		out, log := c.out, c.log
		names := []string{"server-1", "server-2", "server-3", "worker-1", "worker-2"}
		for i, name := range names {
			server := i < 3
			cfg := nodeConfig(name, dir, server, log)
			role := "worker-only"
			if server {
				cfg.PostgresDSN, cfg.BootstrapExpect = o.Postgres, 3
				role = "server"
			}
			if i > 0 {
				cfg.Join = []string{c.nodes[0].GossipAddr()}
			}
			if _, err := c.start(ctx, cfg, role); err != nil {
				return err
			}
		}
		leader, err := c.waitLeader(ctx, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "engine leader: %s (term %d)\n\n", leader.Name(), leader.Term())

		entry := c.nodes[3] // a worker-only node: it forwards to the leader
		follow := c.follower(leader)
		conn, err := client.Dial(entry.GRPCAddr(), c.sec.credentials())
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		resp, err := submit(ctx, out, robonetv1.NewWorkflowServiceClient(conn), entry.GRPCAddr(), "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "submitted %s through %s, instance %s; following it through %s\n\n", examples.DemoFile,
			entry.Name(), resp.GetInstanceId(), follow.Name())

		fconn, err := client.Dial(follow.GRPCAddr(), c.sec.credentials())
		if err != nil {
			return err
		}
		defer func() { _ = fconn.Close() }()
		var killOnce sync.Once
		killed := make(chan struct{})
		progress := client.NewProgress(out)
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
						fmt.Fprintf(out, "\n>>> killing the leader %s (term %d) mid-run\n", leader.Name(), leader.Term())
						began := time.Now()
						leader.Halt()
						if next, err := c.waitLeader(ctx, leader.Name()); err == nil {
							fmt.Fprintf(out, ">>> new engine leader: %s (term %d), %s after the kill\n", next.Name(), next.Term(),
								time.Since(began).Round(time.Millisecond))
						}
					}()
				})
			},
		})
		if err != nil {
			fmt.Fprintf(out, "following the demo failed: %s\n", client.Describe(err, follow.GRPCAddr()))
			return ErrReported
		}
		// Wait for the kill's report (the new leader), if the kill happened.
		killOnce.Do(func() {
			fmt.Fprintln(out, "(the workflow finished before the leader was killed)")
			close(killed)
		})
		<-killed
		return printFinal(out, final)
	})
}

// follower returns a server that does not lead.
func (c *cluster) follower(leader *node.Node) *node.Node {
	for _, n := range c.nodes[:3] {
		if n != leader {
			return n
		}
	}
	return leader
}
