package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/cmd/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newWorkflowsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workflows",
		Aliases: []string{"workflow", "wf"},
		Short:   "Register and list workflow versions",
	}
	cmd.AddCommand(newWorkflowsRegisterCmd(g), newWorkflowsListCmd(g))
	return cmd
}

// registration is the outcome for one file; its JSON form is the -o json
// output of workflows register.
type registration struct {
	File     string               `json:"file"`
	OK       bool                 `json:"ok"`
	Workflow *client.WorkflowView `json:"workflow,omitempty"`
	Existing bool                 `json:"existing,omitempty"`
	Error    string               `json:"error,omitempty"`
}

func newWorkflowsRegisterCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "register FILE...",
		Short: "Compile and register workflow versions",
		Long: `Compile and register workflow specs as immutable versions. Registering
the same definition again is a no-op; changing a registered version is
refused (register it under a new version). Exits 1 if any file failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			wf, conn, err := g.connect()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer func() { _ = conn.Close() }()
			out := cmd.OutOrStdout()
			results := make([]registration, 0, len(args))
			failed := false
			for _, file := range args {
				r := registration{File: file}
				src, err := os.ReadFile(file)
				if err == nil {
					var resp *robonetv1.RegisterWorkflowResponse
					err = g.call(cmd.Context(), func(ctx context.Context) (err error) {
						resp, err = wf.RegisterWorkflow(ctx, &robonetv1.RegisterWorkflowRequest{
							Spec: &robonetv1.InlineSpec{Source: src, Filename: file},
						})
						return err
					})
					if err == nil {
						v := client.Workflow(resp.GetWorkflow())
						r.OK, r.Workflow, r.Existing = true, &v, resp.GetExisting()
					}
				}
				if err != nil {
					failed = true
					r.Error = client.Describe(err, g.addr)
				}
				results = append(results, r)
				if format == client.FormatTable {
					switch {
					case !r.OK:
						fmt.Fprintf(out, "✗ %s: %s\n", file, r.Error)
					case r.Existing:
						fmt.Fprintf(out, "= %s: %s v%d already registered (%s)\n", file, r.Workflow.Name, r.Workflow.Version, r.Workflow.IRHash)
					default:
						fmt.Fprintf(out, "✓ %s: registered %s v%d (%s)\n", file, r.Workflow.Name, r.Workflow.Version, r.Workflow.IRHash)
					}
				}
			}
			if format != client.FormatTable {
				if err := client.WriteData(out, format, results); err != nil {
					return err
				}
			}
			if failed {
				return errFailed
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newWorkflowsListCmd(g *globalOptions) *cobra.Command {
	var (
		output string
		name   string
		limit  int
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List registered workflow versions",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			wf, conn, err := g.connect()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer func() { _ = conn.Close() }()
			var resp *robonetv1.ListWorkflowsResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = wf.ListWorkflows(ctx, &robonetv1.ListWorkflowsRequest{Name: name, Limit: int32(limit)})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			if format != client.FormatTable {
				views := make([]client.WorkflowView, 0, len(resp.GetWorkflows()))
				for _, w := range resp.GetWorkflows() {
					views = append(views, client.Workflow(w))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			if len(resp.GetWorkflows()) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no workflows registered")
				return nil
			}
			client.PrintWorkflows(cmd.OutOrStdout(), resp.GetWorkflows())
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only versions of this workflow")
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many versions (0: the node's default)")
	outputFlag(cmd, &output)
	return cmd
}
