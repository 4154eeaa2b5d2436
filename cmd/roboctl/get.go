package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newGetCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "get ID",
		Short:             "Show an instance: state, tasks, attempts, timings, outputs and errors",
		Args:              oneArg("an instance id (or a unique prefix of one)"),
		ValidArgsFunction: completeInstanceIDs(g),
		Example: `  roboctl get 0b6f3c9e-3f0a-4a43-9d7e-2f1c5d8e9a10
  roboctl get 0b6f3c9e-3f0a-4a43-9d7e-2f1c5d8e9a10 -o json | jq .outputs`,
		RunE: onInstance(g, &output, func(cmd *cobra.Command, format client.Format, wf robonetv1.WorkflowServiceClient, id string) error {
			var resp *robonetv1.GetInstanceResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = wf.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			if format != client.FormatTable {
				return client.WriteData(cmd.OutOrStdout(), format, client.Instance(resp.GetInstance()))
			}
			client.PrintInstance(cmd.OutOrStdout(), resp.GetInstance())
			return nil
		}),
	}
	outputFlag(cmd, &output)
	return cmd
}
