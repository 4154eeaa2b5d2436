package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/internal/client"
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
refused (register it under a new version). A workflow whose tasks run
child workflows needs them registered first: the files are registered
children first (roboctl workflows register examples/*.yaml works in any
order). Exits 1 if any file failed.`,
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
			srcs := make([][]byte, len(args))
			errs := make([]error, len(args))
			for i, file := range args {
				srcs[i], errs[i] = os.ReadFile(file)
			}
			for _, i := range registrationOrder(args, srcs) {
				file, src, err := args[i], srcs[i], errs[i]
				r := registration{File: file}
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

// registrationOrder is the order to register files in: every workflow
// after the child workflows it runs that other files define, otherwise as
// given. A file that does not compile here (or cannot be read) keeps its
// place: the node reports what is wrong with it.
func registrationOrder(files []string, srcs [][]byte) []int {
	names := make([]string, len(files))      // the workflow each file defines
	children := make([][]string, len(files)) // the child workflows it runs
	for i := range files {
		wf, err := spec.Compile(files[i], srcs[i], spec.Options{})
		if err != nil {
			continue
		}
		names[i] = wf.GetName()
		for _, t := range wf.GetTasks() {
			if c := t.GetWorkflow(); c != nil && c.GetName() != wf.GetName() {
				children[i] = append(children[i], c.GetName())
			}
		}
	}
	placed := make([]bool, len(files))
	order := make([]int, 0, len(files))
	waits := func(i int) bool { // a child of i is defined by a file not placed yet
		for _, c := range children[i] {
			for j := range files {
				if j != i && !placed[j] && names[j] == c {
					return true
				}
			}
		}
		return false
	}
	for len(order) < len(files) {
		progressed := false
		for i := range files {
			if !placed[i] && !waits(i) {
				placed[i], order, progressed = true, append(order, i), true
			}
		}
		if !progressed { // children that run each other: as given
			for i := range files {
				if !placed[i] {
					placed[i], order = true, append(order, i)
				}
			}
		}
	}
	return order
}
