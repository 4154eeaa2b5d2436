package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/cmd/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newListCmd(g *globalOptions) *cobra.Command {
	var (
		output   string
		workflow string
		states   []string
		limit    int
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List instances, newest first",
		Args:    cobra.NoArgs,
		Example: `  roboctl ls
  roboctl ls --workflow demo --state failed,cancelled --limit 10 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			if limit < 1 {
				return errors.New("--limit must be at least 1")
			}
			req := &robonetv1.ListInstancesRequest{Workflow: workflow}
			for _, list := range states {
				for _, s := range strings.Split(list, ",") {
					st, ok := client.ParseState(strings.TrimSpace(s))
					if !ok {
						return fmt.Errorf("--state %q: want one of pending, running, gathering, complete, failed, cancelled", s)
					}
					req.States = append(req.States, st)
				}
			}
			wf, conn, err := g.connect()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer func() { _ = conn.Close() }()

			// Read pages until --limit rows or the last page.
			var rows []*robonetv1.InstanceSummary
			next := ""
			for {
				req.PageSize = int32(min(limit-len(rows), 500))
				req.PageToken = next
				var resp *robonetv1.ListInstancesResponse
				if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
					resp, err = wf.ListInstances(ctx, req)
					return err
				}); err != nil {
					return g.fail(cmd, err)
				}
				rows = append(rows, resp.GetInstances()...)
				next = resp.GetNextPageToken()
				if next == "" || len(rows) >= limit {
					break
				}
			}
			if format != client.FormatTable {
				view := listView{Instances: make([]client.SummaryView, 0, len(rows)), NextPageToken: next}
				for _, r := range rows {
					view.Instances = append(view.Instances, client.Summary(r))
				}
				return client.WriteData(cmd.OutOrStdout(), format, view)
			}
			if len(rows) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no instances")
				return nil
			}
			client.PrintSummaries(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&workflow, "workflow", "", "only instances of this workflow")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only instances in these states (repeatable or comma-separated)")
	cmd.Flags().IntVar(&limit, "limit", 50, "show at most this many instances")
	outputFlag(cmd, &output)
	return cmd
}

// listView is the -o json form of ls.
type listView struct {
	Instances     []client.SummaryView `json:"instances"`
	NextPageToken string               `json:"next_page_token,omitempty"`
}
