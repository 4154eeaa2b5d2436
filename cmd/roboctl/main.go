// Command roboctl is the roboNet client CLI.
//
// It validates workflow specs offline (`roboctl validate`) and drives a
// robonode over its gRPC API: submit, watch, get, ls, cancel, signal,
// events publish, retry, pause, resume, workflows register and workflows ls, and shows the mesh: members, leader and
// wagglers and partitions, and the audit trail. Any node of a mesh answers: calls that need the engine leader
// are forwarded to it by the node. roboctl holds presentation only: apart
// from the offline validator it talks to nothing but the gRPC API, and
// every decision is the node's.
//
// Every command prints a table (or plain lines) for people and, with
// -o json or -o yaml, the same data for scripts; streams (watch -o json)
// are JSON Lines.
//
// Exit codes: 0 success (for submit --wait and watch: the instance
// COMPLETED), 1 the request was understood but failed (an invalid spec, an
// error from the node, an instance that FAILED or was CANCELLED, a node that
// cannot be reached), 2 a usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/internal/version"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Exit codes scripts can rely on.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	envAddrName  = "ROBONET_ADDR"
	envTokenName = "ROBONET_TOKEN"
	envCAName    = "ROBONET_TLS_CA"
	defaultAddr  = "127.0.0.1:7233"
)

// errFailed marks a failure that the command already reported to the user.
var errFailed = errors.New("failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIn(ctx, args, os.Stdin, stdout, stderr)
}

// runIn is run reading stdin (roboctl signal --data-file -) from in.
func runIn(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetIn(in)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFailed):
		return exitFailed
	default:
		// A usage error: say it with the command's own usage line.
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "%s: %v\nUsage: %s\nRun '%s --help' for more.\n", cmd.CommandPath(), err, cmd.UseLine(), cmd.CommandPath())
		return exitUsage
	}
}

// oneArg is the Args of a command that takes one argument, what: the
// error names what is missing.
func oneArg(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fmt.Errorf("missing %s", what)
		case len(args) > 1:
			return fmt.Errorf("takes %s, not %d arguments", what, len(args))
		}
		return nil
	}
}

type globalOptions struct {
	addr       string
	timeout    time.Duration
	caFile     string // --tls-ca
	serverName string // --tls-server-name
	tokenFile  string // --token-file
}

// credentials resolves how to verify the node and authenticate to it:
// --tls-ca or $ROBONET_TLS_CA, --token-file or else $ROBONET_TOKEN.
func (o *globalOptions) credentials() (client.Credentials, error) {
	c := client.Credentials{CAFile: o.caFile, ServerName: o.serverName, Token: os.Getenv(envTokenName)}
	if c.CAFile == "" {
		c.CAFile = os.Getenv(envCAName)
	}
	if o.tokenFile != "" {
		t, err := client.ReadToken(o.tokenFile)
		if err != nil {
			return c, err
		}
		c.Token = t
	}
	return c, nil
}

// dial connects to the node at --addr with the credentials.
func (o *globalOptions) dial() (*grpc.ClientConn, error) {
	creds, err := o.credentials()
	if err != nil {
		return nil, err
	}
	return client.Dial(o.addr, creds)
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	opts := &globalOptions{}
	root := &cobra.Command{
		Use:     "roboctl",
		Version: version.String("roboctl"),
		Short:   "roboctl drives a roboNet mesh: validate, submit and watch workflows",
		Long: `roboctl drives a roboNet mesh over its gRPC API.

It talks to the robonode at --addr (or $` + envAddrName + `, default ` + defaultAddr + `,
where a robonode started with no flags listens). A node with TLS needs the
mesh CA (--tls-ca or $` + envCAName + `), a node with API tokens a token
(--token-file or $` + envTokenName + `); the token is never sent unencrypted
beyond loopback. Every command prints a table
for people, or the same data with -o json / -o yaml for scripts.

Exit codes: 0 success (submit --wait and watch: the instance completed),
1 failure (an error from the node, an invalid spec, an instance that failed
or was cancelled), 2 usage error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	addr := os.Getenv(envAddrName)
	if addr == "" {
		addr = defaultAddr
	}
	root.PersistentFlags().StringVar(&opts.addr, "addr", addr, "address of a robonode's gRPC API (env "+envAddrName+")")
	root.PersistentFlags().DurationVar(&opts.timeout, "timeout", 30*time.Second, "deadline of each request to the node (not of waiting)")
	root.PersistentFlags().StringVar(&opts.caFile, "tls-ca", "", "the mesh CA's certificate: talk TLS and verify the node against it (env "+envCAName+")")
	root.PersistentFlags().StringVar(&opts.serverName, "tls-server-name", "", "the node the certificate must name (default: any node of the mesh)")
	root.PersistentFlags().StringVar(&opts.tokenFile, "token-file", "", "file holding the API token to present (default: env "+envTokenName+")")
	root.AddCommand(
		newValidateCmd(),
		newSubmitCmd(opts),
		newWatchCmd(opts),
		newGetCmd(opts),
		newLogsCmd(opts),
		newListCmd(opts),
		newCancelCmd(opts),
		newSignalCmd(opts),
		newEventsCmd(opts),
		newRetryCmd(opts),
		newPauseCmd(opts, false),
		newPauseCmd(opts, true),
		newWorkflowsCmd(opts),
		newSchedulesCmd(opts),
		newMembersCmd(opts),
		newLeaderCmd(opts),
		newWagglersCmd(opts),
		newPartitionsCmd(opts),
		newQuarantineCmd(opts),
		newTrustCmd(opts),
		newAuditCmd(opts),
	)
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// connect opens a connection to the node; the caller closes it.
func (o *globalOptions) connect() (robonetv1.WorkflowServiceClient, *grpc.ClientConn, error) {
	conn, err := o.dial()
	if err != nil {
		return nil, nil, err
	}
	return robonetv1.NewWorkflowServiceClient(conn), conn, nil
}

// call runs one request under the --timeout deadline.
func (o *globalOptions) call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return fn(ctx)
}

// fail reports an error from the node (or from reaching it) with its
// details and returns errFailed.
func (o *globalOptions) fail(cmd *cobra.Command, err error) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: %s\n", client.Describe(err, o.addr))
	return errFailed
}

// outputFlag adds -o/--output to cmd.
func outputFlag(cmd *cobra.Command, p *string, formats ...string) {
	if len(formats) == 0 {
		formats = []string{"table", "json", "yaml"}
	}
	cmd.Flags().StringVarP(p, "output", "o", "table", "output format: "+strings.Join(formats[:len(formats)-1], ", ")+" or "+formats[len(formats)-1])
	_ = cmd.RegisterFlagCompletionFunc("output", completeOutput(formats...))
}
