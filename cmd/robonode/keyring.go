package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// keyringOptions are how `robonode keyring` reaches a node.
type keyringOptions struct {
	addr, caFile, tokenFile, output string
	timeout                         time.Duration
}

// newKeyringCmd is `robonode keyring`: generate a gossip key, and list or
// rotate the keys of every node of a running mesh.
func newKeyringCmd(stdout io.Writer) *cobra.Command {
	o := &keyringOptions{}
	cmd := &cobra.Command{
		Use:   "keyring",
		Short: "Generate a gossip key; list or rotate the gossip keys of a running mesh",
		Long: `Gossip between nodes is encrypted with the mesh's gossip key (--gossip-key).
Every node accepts every key of its keyring and encrypts with the primary
one, so the key rotates without a restart:

  NEW=$(robonode keyring generate)
  echo "$NEW" | robonode keyring install -   # every node accepts NEW
  echo "$NEW" | robonode keyring use -       # every node encrypts with NEW
  echo "$OLD" | robonode keyring remove -    # OLD is gone
  robonode keyring list                      # each node's keys, as fingerprints

A change is applied by the node at --addr and by every other alive member
it asks; each reports its own outcome, so run the next step only when every
node succeeded (a node that was down gets the keys with the next
operation, or copy its keyring.json). Each node keeps its keyring in its
data directory (mesh/keyring.json), which wins over --gossip-key from then
on. Pass keys as "-" to read them from standard input rather than the
command line. Keys are never printed back: list shows fingerprints.`,
		Args: cobra.NoArgs,
	}
	addr := os.Getenv("ROBONET_ADDR")
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.addr, "addr", addr, "address of a node's gRPC API (env ROBONET_ADDR)")
	pf.StringVar(&o.caFile, "tls-ca", os.Getenv("ROBONET_TLS_CA"), "the mesh CA's certificate, for nodes with TLS (env ROBONET_TLS_CA)")
	pf.StringVar(&o.tokenFile, "token-file", "", "file holding an API token (default: env ROBONET_TOKEN)")
	pf.StringVarP(&o.output, "output", "o", "table", "output: table or json")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of the request")

	cmd.AddCommand(&cobra.Command{
		Use:   "generate",
		Short: "Print a new random 32-byte gossip key (base64)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return runtimeError{err}
			}
			fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every node's gossip keys (fingerprints), primary first",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return o.run(stdout, robonetv1.KeyringOp_KEYRING_OP_LIST, nil)
		},
	})
	for _, c := range []struct {
		use, short string
		op         robonetv1.KeyringOp
	}{
		{"install KEY|-", "Make every node accept KEY (base64); it still encrypts with its primary", robonetv1.KeyringOp_KEYRING_OP_INSTALL},
		{"use KEY|-", "Make every node encrypt with KEY, installed before", robonetv1.KeyringOp_KEYRING_OP_USE},
		{"remove KEY|-", "Remove KEY from every node (not a primary)", robonetv1.KeyringOp_KEYRING_OP_REMOVE},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   c.use,
			Short: c.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				key, err := readKeyArg(args[0], cmd.InOrStdin())
				if err != nil {
					return err
				}
				return o.run(stdout, c.op, key)
			},
		})
	}
	return cmd
}

// readKeyArg decodes a base64 key given as an argument, or read from
// stdin when the argument is "-". Errors never quote the key.
func readKeyArg(arg string, stdin io.Reader) ([]byte, error) {
	if arg == "-" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && line == "" {
			return nil, usagef("reading the key from standard input: %v", err)
		}
		arg = line
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(arg))
	if err != nil {
		return nil, usagef("the key is not base64 (robonode keyring generate makes one)")
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, usagef("the key is %d bytes; a gossip key is 16, 24 or 32 bytes", n)
	}
	return key, nil
}

// run sends the operation and prints each node's outcome; it fails when
// any node did.
func (o *keyringOptions) run(stdout io.Writer, op robonetv1.KeyringOp, key []byte) error {
	if o.output != "table" && o.output != "json" {
		return usagef("--output %q: want table or json", o.output)
	}
	creds := client.Credentials{CAFile: o.caFile, Token: os.Getenv("ROBONET_TOKEN")}
	if o.tokenFile != "" {
		t, err := client.ReadToken(o.tokenFile)
		if err != nil {
			return usageError{err}
		}
		creds.Token = t
	}
	conn, err := client.Dial(o.addr, creds)
	if err != nil {
		return runtimeError{err}
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	resp, err := robonetv1.NewMeshServiceClient(conn).Keyring(ctx, &robonetv1.KeyringRequest{Op: op, Key: key})
	if err != nil {
		return runtimeError{fmt.Errorf("%s", client.Describe(err, o.addr))}
	}
	failed := 0
	type row struct {
		Node         string   `json:"node"`
		OK           bool     `json:"ok"`
		Error        string   `json:"error,omitempty"`
		Fingerprints []string `json:"fingerprints"`
	}
	rows := make([]row, 0, len(resp.GetNodes()))
	for _, n := range resp.GetNodes() {
		rows = append(rows, row{Node: n.GetNode(), OK: n.GetError() == "", Error: n.GetError(), Fingerprints: n.GetFingerprints()})
		if n.GetError() != "" {
			failed++
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return runtimeError{err}
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tRESULT\tKEYS (PRIMARY FIRST)")
		for _, r := range rows {
			result := "ok"
			if !r.OK {
				result = "failed: " + r.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Node, result, strings.Join(r.Fingerprints, " "))
		}
		_ = tw.Flush()
	}
	if failed > 0 {
		return runtimeError{fmt.Errorf("%d of %d nodes failed: fix them before the next step", failed, len(rows))}
	}
	return nil
}
