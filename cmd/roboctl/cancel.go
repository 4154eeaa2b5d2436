package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newCancelCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a running or queued instance",
		Long: `Ask a running or queued instance to stop. Its running tasks are
cancelled (exec children are killed) and it ends CANCELLED; follow it with
roboctl watch ID. Cancelling an instance that already finished fails (exit 1).`,
		Args:              oneArg("an instance id (or a unique prefix of one)"),
		ValidArgsFunction: completeInstanceIDs(g),
		RunE: onInstance(g, &output, func(cmd *cobra.Command, format client.Format, wf robonetv1.WorkflowServiceClient, id string) error {
			if err := g.call(cmd.Context(), func(ctx context.Context) error {
				_, err := wf.CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: id})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			if format != client.FormatTable {
				return client.WriteData(cmd.OutOrStdout(), format, map[string]any{"instance_id": id, "cancel_requested": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancellation of %s requested\n", id)
			return nil
		}),
	}
	outputFlag(cmd, &output)
	return cmd
}
