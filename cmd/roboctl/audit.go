package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/internal/audit"
	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newAuditCmd(g *globalOptions) *cobra.Command {
	var (
		output, since, node string
		limit               int
	)
	cmd := &cobra.Command{
		Use:   "audit [--since DURATION|TIME] [--node NAME] [-o json]",
		Short: "Show the audit trail: who changed what, from where, and how it ended (admin)",
		Long: `Show the audit trail of the mesh: a record per call that changed something
or tried to — submit, signal, publish, cancel, retry, pause, resume,
schedules, register, quarantine, keyring, a worker program's session — and
each reload of the API token file, with the time, the node that recorded
it, the token's name (never the token) and role, the caller's address, the
method, what it acted on, and its outcome (ok, or the status and why, e.g.
PERMISSION_DENIED for a token of too small a role). Reads are not recorded.

Each node keeps its own records in DATA_DIR/audit (JSON lines, with
audit.1 before it; 16 MiB each by default); the node at --addr reads its
own and asks every other member for theirs, and the records print merged
by time, oldest first. A member that cannot be asked is named on stderr.
Reading the trail needs an admin token.`,
		Example: `  roboctl audit --since 1h
  roboctl audit --since 2026-11-29T08:00:00Z --node server-1
  roboctl audit -o json | jq '.[] | select(.outcome != "ok")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			req := &robonetv1.ListAuditRequest{Node: node, Limit: int32(min(max(limit, 0), 1<<30))} //nolint:gosec // clamped
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				req.Since = timestamppb.New(t)
			}
			resp, err := askMesh(cmd, g, func(ctx context.Context, mc robonetv1.MeshServiceClient) (*robonetv1.ListAuditResponse, error) {
				return mc.ListAudit(ctx, req)
			})
			if err != nil {
				return err
			}
			for _, e := range resp.GetErrors() {
				fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: audit: no records of %s\n", e)
			}
			if format != client.FormatTable {
				views := make([]audit.Record, 0, len(resp.GetRecords()))
				for _, r := range resp.GetRecords() {
					views = append(views, client.Audit(r))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			client.PrintAudit(cmd.OutOrStdout(), resp.GetRecords())
			return nil
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&since, "since", "", "only calls made this long ago or since (e.g. 1h, 30m) or since this time (RFC 3339, e.g. 2026-11-29T08:00:00Z)")
	cmd.Flags().StringVar(&node, "node", "", "only the records of this node (default: every member's)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many records, the newest (default 1000, at most 10000)")
	return cmd
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s: a duration back from now is positive (e.g. 1h)", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration (1h, 30m) or an RFC 3339 time (2026-11-29T08:00:00Z)", s)
}
