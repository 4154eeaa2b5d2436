package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newListCmd(g *globalOptions) *cobra.Command {
	var (
		output    string
		workflow  string
		states    []string
		limit     int
		all       bool
		pageToken string
		since     time.Duration
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List instances, newest first",
		Args:    cobra.NoArgs,
		Example: `  roboctl ls
  roboctl ls --workflow demo --state failed,cancelled --limit 10 -o json
  roboctl ls --since 1h --all -o json          # every instance of the last hour
  roboctl ls --page-token TOKEN                 # the page after a -o json answer's next_page_token`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			switch {
			case all && cmd.Flags().Changed("limit"):
				return errors.New("--all lists every instance: it goes without --limit")
			case limit < 1:
				return errors.New("--limit must be at least 1")
			case since < 0:
				return errors.New("--since must be a positive duration, e.g. 30m or 24h")
			}
			if all {
				limit = int(^uint(0) >> 1)
			}
			req := &robonetv1.ListInstancesRequest{Workflow: workflow}
			if since > 0 {
				req.CreatedAfter = timestamppb.New(time.Now().Add(-since))
			}
			for _, list := range states {
				for _, s := range strings.Split(list, ",") {
					st, ok := client.ParseState(strings.TrimSpace(s))
					if !ok {
						return fmt.Errorf("--state %q: want one of pending, running, gathering, paused, complete, failed, cancelled", s)
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
			next := pageToken
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
	_ = cmd.RegisterFlagCompletionFunc("workflow", completeWorkflows(g))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"pending", "running", "gathering", "paused", "complete", "failed", "cancelled"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringSliceVar(&states, "state", nil, "only instances in these states (repeatable or comma-separated)")
	cmd.Flags().IntVar(&limit, "limit", 50, "show at most this many instances")
	cmd.Flags().BoolVar(&all, "all", false, "list every instance, page after page")
	cmd.Flags().StringVar(&pageToken, "page-token", "", "start after the last instance of an earlier answer (its next_page_token)")
	cmd.Flags().DurationVar(&since, "since", 0, "only instances created this long ago or since, e.g. 1h")
	outputFlag(cmd, &output)
	return cmd
}

// listView is the -o json form of ls.
type listView struct {
	Instances     []client.SummaryView `json:"instances"`
	NextPageToken string               `json:"next_page_token,omitempty"`
}

// withInstance connects to the node, turns what the user typed into an
// instance id (resolveID) and runs do with the client and the id; a
// failure is reported as every command reports one.
func withInstance(cmd *cobra.Command, g *globalOptions, arg string, do func(wf robonetv1.WorkflowServiceClient, id string) error) error {
	wf, conn, err := g.connect()
	if err != nil {
		return g.fail(cmd, err)
	}
	defer func() { _ = conn.Close() }()
	id, err := resolveID(cmd.Context(), g, wf, arg)
	if err != nil {
		return g.fail(cmd, err)
	}
	return do(wf, id)
}

// onInstance is the RunE of a command whose argument names an instance
// and whose -o is output: it reads the format, resolves the id (a unique
// prefix will do) and runs do with the connection.
func onInstance(g *globalOptions, output *string, do func(cmd *cobra.Command, format client.Format, wf robonetv1.WorkflowServiceClient, id string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		format, err := client.ParseFormat(*output)
		if err != nil {
			return err
		}
		return withInstance(cmd, g, args[0], func(wf robonetv1.WorkflowServiceClient, id string) error {
			return do(cmd, format, wf, id)
		})
	}
}

// resolveID turns what the user typed into an instance id: a whole id as
// it is, a unique prefix (like git and docker) into the id it starts; an
// ambiguous prefix fails naming the instances it matches.
func resolveID(ctx context.Context, g *globalOptions, wf robonetv1.WorkflowServiceClient, arg string) (string, error) {
	if _, err := uuid.Parse(arg); err == nil {
		return arg, nil
	}
	var resp *robonetv1.ListInstancesResponse
	if err := g.call(ctx, func(ctx context.Context) (err error) {
		resp, err = wf.ListInstances(ctx, &robonetv1.ListInstancesRequest{IdPrefix: arg, PageSize: 6})
		return err
	}); err != nil {
		return "", err
	}
	switch matches := resp.GetInstances(); len(matches) {
	case 0:
		return "", fmt.Errorf("no instance id starts with %q (roboctl ls lists them)", arg)
	case 1:
		return matches[0].GetId(), nil
	default:
		var lines []string
		for _, m := range matches[:min(len(matches), 5)] {
			lines = append(lines, fmt.Sprintf("  %s  %s v%d, %s", m.GetId(), m.GetWorkflow(), m.GetVersion(), client.StateName(m.GetState())))
		}
		more := ""
		if len(matches) > 5 || resp.GetNextPageToken() != "" {
			more = "\n  …"
		}
		return "", fmt.Errorf("%q is the start of several instance ids; type more of it:\n%s%s", arg, strings.Join(lines, "\n"), more)
	}
}
