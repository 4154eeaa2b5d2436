package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Shell completion (roboctl completion bash|zsh|fish|powershell) of what
// the node knows: instance ids and workflow names are asked of the node at
// --addr, briefly; when it does not answer, nothing is offered.

// completeTimeout bounds one completion's call: a shell must not hang.
const completeTimeout = 2 * time.Second

// completeInstanceIDs offers the ids of recent instances that start with
// what was typed, each with its workflow and state.
func completeInstanceIDs(g *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		wf, conn, err := g.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		req := &robonetv1.ListInstancesRequest{PageSize: 50}
		if toComplete != "" {
			req.IdPrefix = toComplete
		}
		resp, err := wf.ListInstances(ctx, req)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]cobra.Completion, 0, len(resp.GetInstances()))
		for _, in := range resp.GetInstances() {
			out = append(out, cobra.CompletionWithDesc(in.GetId(), fmt.Sprintf("%s v%d, %s", in.GetWorkflow(), in.GetVersion(), client.StateName(in.GetState()))))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWorkflows offers the names of registered workflows (with
// @VERSION for --workflow NAME@VERSION once a name is typed whole).
func completeWorkflows(g *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		wf, conn, err := g.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		resp, err := wf.ListWorkflows(ctx, &robonetv1.ListWorkflowsRequest{Limit: 1000})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		name, _, versioned := strings.Cut(toComplete, "@")
		for _, w := range resp.GetWorkflows() {
			switch {
			case versioned && w.GetName() == name:
				out = append(out, cobra.CompletionWithDesc(fmt.Sprintf("%s@%d", w.GetName(), w.GetVersion()), w.GetDescription()))
			case !versioned && !slices.Contains(out, w.GetName()):
				out = append(out, w.GetName())
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeOutput offers the output formats a command takes.
func completeOutput(formats ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp)
}
