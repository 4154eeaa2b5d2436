// Command roboctl is the roboNet client CLI.
//
// Today it validates workflow specs offline (`roboctl validate`); the
// commands that talk to a mesh over gRPC (submit, watch, get, ls, cancel,
// members, ...) arrive with the node. roboctl holds presentation only: it
// talks to nothing but the engine's compiler and, later, the gRPC API.
//
// Exit codes: 0 success, 1 the request was understood but failed (for example
// an invalid spec), 2 a usage error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes scripts can rely on.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	envAddrName = "ROBONET_ADDR"
)

// errFailed marks a failure that the command already reported to the user.
var errFailed = errors.New("failed")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFailed):
		return exitFailed
	default:
		fmt.Fprintf(stderr, "roboctl: %v\nRun 'roboctl --help' for usage.\n", err)
		return exitUsage
	}
}

type globalOptions struct {
	addr string
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	opts := &globalOptions{}
	root := &cobra.Command{
		Use:           "roboctl",
		Short:         "roboctl drives a roboNet mesh: validate, submit and watch workflows",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	defaultAddr := os.Getenv(envAddrName)
	if defaultAddr == "" {
		defaultAddr = "127.0.0.1:7233"
	}
	root.PersistentFlags().StringVar(&opts.addr, "addr", defaultAddr, "address of a robonode's gRPC API (env "+envAddrName+")")
	root.AddCommand(newValidateCmd())
	return root
}
