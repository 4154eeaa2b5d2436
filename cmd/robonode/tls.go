package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/pki"
)

// newTLSCmd is `robonode tls`: a development CA and node certificates in
// two commands.
func newTLSCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create a development CA and node certificates for mutual TLS",
		Long: `Create what a mesh needs for mutual TLS between its nodes: a CA, and a
certificate per node signed by it.

  robonode tls ca create                          # robonet-ca.pem, robonet-ca-key.pem
  robonode tls cert create --name s1 --server     # s1.pem, s1-key.pem (a server: may join Raft)
  robonode tls cert create --name w1              # w1.pem, w1-key.pem (worker-only)

then start each node with its files:

  robonode --name s1 --tls-ca robonet-ca.pem --tls-cert s1.pem --tls-key s1-key.pem ...

and point clients at the CA: roboctl --tls-ca robonet-ca.pem.

A certificate names its node (--name must match the node's --name): nodes
verify each other by that name, not by address. Keep robonet-ca-key.pem
off the nodes; anyone holding it can make certificates the mesh trusts.`,
		Args: cobra.NoArgs,
	}
	ca := &cobra.Command{Use: "ca", Short: "Manage the mesh CA", Args: cobra.NoArgs}
	var caDir string
	var caDays int
	caCreate := &cobra.Command{
		Use:   "create",
		Short: "Create a CA certificate and key",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if caDays < 1 {
				return usagef("--days %d: want at least 1", caDays)
			}
			cert, key, err := pki.CreateCA(caDir, time.Duration(caDays)*24*time.Hour, time.Now())
			if err != nil {
				return runtimeError{err}
			}
			fmt.Fprintf(stdout, "created %s and %s (valid %d days)\n", cert, key, caDays)
			fmt.Fprintf(stdout, "next: robonode tls cert create --name NODE [--server] for every node\n")
			return nil
		},
	}
	caCreate.Flags().StringVar(&caDir, "dir", ".", "directory to write the CA into")
	caCreate.Flags().IntVar(&caDays, "days", 5*365, "validity in days")
	ca.AddCommand(caCreate)

	certCmd := &cobra.Command{Use: "cert", Short: "Manage node certificates", Args: cobra.NoArgs}
	var (
		c        pki.NodeCert
		dir, src string
		days     int
	)
	certCreate := &cobra.Command{
		Use:   "create",
		Short: "Create a node certificate signed by the CA",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if c.Name == "" {
				return usagef("--name is required: the node's name, as given to robonode --name")
			}
			if days < 1 {
				return usagef("--days %d: want at least 1", days)
			}
			c.Validity = time.Duration(days) * 24 * time.Hour
			cert, key, err := pki.CreateNodeCert(src, dir, c, time.Now())
			if err != nil {
				return runtimeError{err}
			}
			role := "worker-only (cannot join Raft)"
			if c.Server {
				role = "server (may join Raft)"
			}
			fmt.Fprintf(stdout, "created %s and %s for node %s, a %s\n", cert, key, c.Name, role)
			return nil
		},
	}
	certCreate.Flags().StringVar(&c.Name, "name", "", "the node's name (robonode --name); required")
	certCreate.Flags().BoolVar(&c.Server, "server", false, "a server's certificate: allowed to join Raft")
	certCreate.Flags().StringArrayVar(&c.Hosts, "host", nil, "another DNS name or IP address clients reach the node at (repeatable; for clients given --tls-server-name)")
	certCreate.Flags().StringVar(&src, "ca-dir", ".", "directory holding the CA (robonet-ca.pem and robonet-ca-key.pem)")
	certCreate.Flags().StringVar(&dir, "dir", ".", "directory to write the certificate into")
	certCreate.Flags().IntVar(&days, "days", 365, "validity in days (at most the CA's)")
	certCmd.AddCommand(certCreate)

	cmd.AddCommand(ca, certCmd)
	return cmd
}
