package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/cmd/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// meshClient opens a connection for the MeshService; the caller closes it.
func (o *globalOptions) meshClient() (robonetv1.MeshServiceClient, func(), error) {
	conn, err := client.Dial(o.addr)
	if err != nil {
		return nil, nil, err
	}
	return robonetv1.NewMeshServiceClient(conn), func() { _ = conn.Close() }, nil
}

func newMembersCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the nodes of the mesh: status, roles, gRPC address, capabilities; * marks the leader",
		Long: `List the nodes of the mesh as the node at --addr sees them through gossip:
name (the engine leader marked with *), gossip status (alive, suspect, left,
failed), roles (server: a Raft server that may lead the engine; worker: runs
tasks), gRPC address and capabilities with their worker pool sizes. Any
node answers, also during an election.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			mc, closeConn, err := g.meshClient()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer closeConn()
			var resp *robonetv1.ListMembersResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = mc.ListMembers(ctx, &robonetv1.ListMembersRequest{})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			if format != client.FormatTable {
				views := make([]client.MemberView, 0, len(resp.GetMembers()))
				for _, m := range resp.GetMembers() {
					views = append(views, client.Member(m))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintMembers(cmd.OutOrStdout(), resp.GetMembers())
			return nil
		},
	}
	outputFlag(cmd, &output)
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
			mc, closeConn, err := g.meshClient()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer closeConn()
			var resp *robonetv1.GetLeaderResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = mc.GetLeader(ctx, &robonetv1.GetLeaderRequest{})
				return err
			}); err != nil {
				return g.fail(cmd, err)
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
