package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd is `robonode healthcheck`: a probe of a node's /readyz
// (or /healthz) for container health checks, where no curl or wget is at
// hand (the robonode image holds only its two binaries).
func newHealthcheckCmd(stdout io.Writer) *cobra.Command {
	var (
		url     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Probe a node's /readyz and exit 0 when it is ready (for container health checks)",
		Long: `healthcheck asks a node's HTTP listener whether it is ready: it prints the
answer and exits 0 on 200, 1 otherwise (not ready, stopping, unreachable).

  HEALTHCHECK CMD ["robonode", "healthcheck"]
  robonode healthcheck --url http://10.0.0.4:7280/healthz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return usageError{fmt.Errorf("--url %q: %w", url, err)}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return runtimeError{fmt.Errorf("%s: %w", url, err)}
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			answer := strings.TrimSpace(string(body))
			if resp.StatusCode != http.StatusOK {
				return runtimeError{fmt.Errorf("%s: %s: %s", url, resp.Status, answer)}
			}
			fmt.Fprintln(stdout, answer)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:7280/readyz", "the endpoint to probe")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
