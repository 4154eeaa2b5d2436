package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newWatchCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow an instance's events until it finishes",
		Long: `Follow an instance's events until it finishes, one line per event
(-o json: one JSON object per line).

The stream starts with a snapshot of the instance. If it breaks (the node
restarts, the network drops), watch reconnects and resumes after the last
event it printed; if the node no longer has those events it sends a fresh
snapshot. Exits 0 if the instance COMPLETED, 1 if it FAILED or was CANCELLED.`,
		Args:              oneArg("an instance id (or a unique prefix of one)"),
		ValidArgsFunction: completeInstanceIDs(g),
		RunE: onInstance(g, &output, func(cmd *cobra.Command, format client.Format, wf robonetv1.WorkflowServiceClient, id string) error {
			out := cmd.OutOrStdout()
			state, err := client.Follow(cmd.Context(), wf, id, client.FollowOptions{
				OnEvent: func(ev *robonetv1.Event) {
					if format == client.FormatTable {
						fmt.Fprintln(out, client.EventLine(ev))
						return
					}
					// JSON Lines for every non-table format: YAML has no
					// streaming form that tools agree on.
					_ = client.WriteJSONLine(out, client.Event(ev))
				},
				OnReconnect: func(err error) {
					fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: lost the event stream (%s); reconnecting\n", client.Describe(err, g.addr))
				},
			})
			if err != nil {
				if cmd.Context().Err() != nil {
					return errFailed
				}
				return g.fail(cmd, err)
			}
			if state != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
				return errFailed
			}
			return nil
		}),
	}
	outputFlag(cmd, &output)
	return cmd
}
