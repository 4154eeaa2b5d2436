package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// meshClient opens a connection for the MeshService; the caller closes it.
func (o *globalOptions) meshClient() (robonetv1.MeshServiceClient, func(), error) {
	conn, err := o.dial()
	if err != nil {
		return nil, nil, err
	}
	return robonetv1.NewMeshServiceClient(conn), func() { _ = conn.Close() }, nil
}

// askMesh asks the node at --addr one MeshService question, with the
// command's retries; a failure is reported the command's way.
func askMesh[R any](cmd *cobra.Command, g *globalOptions, ask func(context.Context, robonetv1.MeshServiceClient) (R, error)) (R, error) {
	var resp R
	mc, closeConn, err := g.meshClient()
	if err != nil {
		return resp, g.fail(cmd, err)
	}
	defer closeConn()
	if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
		resp, err = ask(ctx, mc)
		return err
	}); err != nil {
		return resp, g.fail(cmd, err)
	}
	return resp, nil
}

func newMembersCmd(g *globalOptions) *cobra.Command {
	var (
		output string
		pools  bool
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the nodes of the mesh: status, role, gRPC address, capabilities, Wagglers; * marks the leader",
		Long: `List the nodes of the mesh as the node at --addr sees them through gossip:
name (the engine leader marked with *), gossip status (alive, suspect, left,
failed), role (leader: the server that leads the engine; server: a Raft
server that may lead it; worker: a node that only runs tasks — servers run
tasks too), gRPC address, capabilities with their worker pool sizes, and
the capabilities whose Waggler the node runs. Any node answers, also during
an election.

-o wide (or --pools with -o json|yaml) asks every node for its worker
pools: busy slots, attempts done and failed, finishes in the last minute and
run-time percentiles. A node that does not answer gets a note (on a server,
with the pools as the leader last collected them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wide := strings.EqualFold(output, "wide")
			if wide {
				output, pools = "table", true
			}
			format, err := client.ParseFormat(output)
			if err != nil {
				return fmt.Errorf("%w (or wide)", err)
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.ListMembersResponse, error) {
				return mc.ListMembers(ctx, &robonetv1.ListMembersRequest{Pools: pools})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]client.MemberView, 0, len(resp.GetMembers()))
				for _, m := range resp.GetMembers() {
					views = append(views, client.Member(m))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintMembers(cmd.OutOrStdout(), resp.GetMembers(), wide)
			return nil
		},
	}
	outputFlag(cmd, &output, "table", "wide", "json", "yaml")
	cmd.Flags().Lookup("output").Usage = "output format: table, wide (with each node's worker pools), json or yaml"
	cmd.Flags().BoolVar(&pools, "pools", false, "ask every node for its worker pools (implied by -o wide)")
	return cmd
}

func newLeaderCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Show the engine leader: name, gRPC address and Raft term",
		Long: `Show the engine leader as the node at --addr sees it: its name, gRPC
address and the Raft term it leads in (the engine's fencing token). Exits 1
when no leader is elected (an election is in progress, or the servers lack
a quorum).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.GetLeaderResponse, error) {
				return mc.GetLeader(ctx, &robonetv1.GetLeaderRequest{})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				if err := client.WriteData(cmd.OutOrStdout(), format, client.Leader(resp)); err != nil {
					return err
				}
			} else if resp.GetName() != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s at %s, term %d\n", resp.GetName(), resp.GetGrpcAddr(), resp.GetTerm())
			}
			if resp.GetName() == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: %s knows no leader: an election is in progress, or the servers lack a quorum (see roboctl members)\n",
					resp.GetAnsweredBy())
				return errFailed
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newWagglersCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "wagglers",
		Short: "List the Waggler of each capability: node, epoch, state, workers, attempts in flight and queued, standbys",
		Long: `List the Waggler of each capability: the node that holds the role and the
epoch of its assignment, the Waggler's state, its workers, its attempts in
flight (assigned to a worker) and queued (waiting for one), and the standbys
(the other alive nodes that serve the capability).

The roles come from the replicated control state when --addr is a server,
and from what the nodes advertise in gossip when it is a worker-only node.
The live numbers come from each holder, asked within a short timeout; a
holder that cannot be asked is shown with state "unknown" and a note that
says why. A capability no node holds is "unassigned".`,
		Args: cobra.NoArgs,
		Example: `  roboctl wagglers
  roboctl wagglers -o json | jq '.[] | select(.queued > 0)'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.ListWagglersResponse, error) {
				return mc.ListWagglers(ctx, &robonetv1.ListWagglersRequest{})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]client.WagglerView, 0, len(resp.GetWagglers()))
				for _, r := range resp.GetWagglers() {
					views = append(views, client.Waggler(r))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintWagglers(cmd.OutOrStdout(), resp)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newPartitionsCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "List the mesh's partitions: owner, epoch, instances held, tasks/s, last move and why",
		Long: `List the mesh's partitions. Every instance belongs to one partition for life
(read from its id); each partition has one owner server, whose engine
alone claims and writes its instances, at an epoch above every earlier
one: the store refuses the writes of the partition's earlier owners.

The owners, epochs and moves come from the replicated control state; the
counts (instances held in memory, task results recorded and their rate
over the last ten seconds, writes the store refused) from the owner's
engine. The count of partitions is fixed when the mesh is created
(robonode --partitions).`,
		Args: cobra.NoArgs,
		Example: `  roboctl partitions
  roboctl partitions -o json | jq '.[] | select(.owner == "server-2")'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.ListPartitionsResponse, error) {
				return mc.ListPartitions(ctx, &robonetv1.ListPartitionsRequest{})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]client.PartitionView, 0, len(resp.GetPartitions()))
				for _, p := range resp.GetPartitions() {
					views = append(views, client.Partition(p))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintPartitions(cmd.OutOrStdout(), resp, time.Now())
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newQuarantineCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "List, add or release quarantined nodes and worker programs (no work goes to them)",
		Long: `A quarantined node gets no new work, and the attempts it runs move to other
workers (the same attempts: its late results are refused). A worker
program connected to a node is quarantined on its own as NODE/PROGRAM
(roboctl trust lists them): its node's other workers keep working. The
Sentinel quarantines nodes and programs that misbehave and releases them
after a cool-down; an operator's quarantine lasts until an operator
releases it. Changes are committed through Raft by the engine leader; any
node forwards them.`,
		Args: cobra.NoArgs,
	}
	run := func(op robonetv1.QuarantineOp, node, reason string, output *string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(*output)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				node = args[0]
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.QuarantineResponse, error) {
				return mc.Quarantine(ctx, &robonetv1.QuarantineRequest{Op: op, Node: node, Reason: reason})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]client.QuarantinedView, 0, len(resp.GetNodes()))
				for _, q := range resp.GetNodes() {
					views = append(views, client.Quarantined(q))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintQuarantine(cmd.OutOrStdout(), resp.GetNodes())
			return nil
		}
	}
	var lsOut, addOut, relOut, reason string
	ls := &cobra.Command{Use: "ls", Short: "List the quarantined nodes, why and since when", Args: cobra.NoArgs}
	ls.RunE = run(robonetv1.QuarantineOp_QUARANTINE_OP_LIST, "", "", &lsOut)
	outputFlag(ls, &lsOut)
	add := &cobra.Command{Use: "add NODE|NODE/PROGRAM", Short: "Quarantine a node or a worker program until an operator releases it", Args: cobra.ExactArgs(1)}
	add.RunE = func(cmd *cobra.Command, args []string) error {
		return run(robonetv1.QuarantineOp_QUARANTINE_OP_ADD, "", reason, &addOut)(cmd, args)
	}
	add.Flags().StringVar(&reason, "reason", "", "why (shown by ls)")
	outputFlag(add, &addOut)
	release := &cobra.Command{Use: "release NODE|NODE/PROGRAM", Short: "Release a node or worker program: it gets work again, its trust starting from zero", Args: cobra.ExactArgs(1)}
	release.RunE = run(robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE, "", "", &relOut)
	outputFlag(release, &relOut)
	cmd.AddCommand(ls, add, release)
	return cmd
}

func newTrustCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Show each node's and worker program's trust tier, score and evidence, as the leader sees them",
		Long: `Every node earns trust from what the others observe: heartbeats whose
hash-chain stamps verify, attempts it completes, and against it attempts it
loses, replayed stamps, messages beyond the stream limits and verified
attempts it is outvoted on. The score is the beta-reputation
(1 + good) / (2 + good + bad), evidence halving every 24 hours; tiers are
unverified < provisional < established < trusted. A worker node below the
dispatch tier (robonode --dispatch-tier, default established) is on
probation: one attempt at a time, one more per attempt it completes. A
node that forges a hash-chain token is betrayed: score 0 at once, no work,
and the Sentinel quarantines it.

A worker program connected to a node (WorkerService) is judged apart, as
NODE/PROGRAM: it starts on probation however trusted its node is, what it
loses or is outvoted on counts against it alone, and so do answers to
attempts it was never given or sooner than the node's floor (misbehaviour).
docs/security.md gives every parameter.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.ListTrustResponse, error) {
				return mc.ListTrust(ctx, &robonetv1.ListTrustRequest{})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]client.TrustView, 0, len(resp.GetNodes()))
				for _, n := range resp.GetNodes() {
					views = append(views, client.Trust(n))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintTrust(cmd.OutOrStdout(), resp)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
