package demo

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/node"
)

// security is what makes a demo mesh secure, as a real one would be: a CA
// with a certificate per node (mutual TLS between nodes and on Raft, TLS
// for the demo's own client), an API token and a gossip key, all made
// afresh in the demo's data directory, and an exec policy naming the one
// program the demo runs.
type security struct {
	dir       string
	token     string
	gossipKey []byte
	// execAllow is the nodes' exec policy: examples/demo.yaml runs sh
	// (which runs the rest: seq, sed, wc, sha256sum, awk), so the policy
	// names the sh that PATH finds here (/bin/sh, or /usr/bin/sh on a
	// merged /usr), as the nodes will. On loopback a node would run any
	// program without a policy; the demo names what it runs, as a mesh
	// others can reach must.
	execAllow []string
}

// newSecurity creates the CA, token and gossip key under dir/pki, and
// finds the sh the demo runs.
func newSecurity(dir string) (*security, error) {
	s := &security{dir: filepath.Join(dir, "pki")}
	if _, _, err := pki.CreateCA(s.dir, 24*time.Hour, time.Now()); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s.token = base64.RawURLEncoding.EncodeToString(secret)
	s.gossipKey = make([]byte, 32)
	if _, err := rand.Read(s.gossipKey); err != nil {
		return nil, err
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("the demo runs sh, which is not in PATH: %w", err)
	}
	s.execAllow = []string{sh}
	return s, nil
}

// apply gives cfg a certificate of its own, the token, the gossip key and
// the exec policy.
func (s *security) apply(cfg *node.Config) error {
	cert, key, err := pki.CreateNodeCert(s.dir, s.dir, pki.NodeCert{Name: cfg.Name, Server: cfg.Server != nil && *cfg.Server, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		return err
	}
	cfg.TLS = pki.Files{CA: filepath.Join(s.dir, pki.CAFile), Cert: cert, Key: key}
	cfg.APITokens = []string{s.token}
	cfg.GossipKey = s.gossipKey
	cfg.ExecAllow = s.execAllow
	return nil
}

// credentials are the demo client's: the CA to verify nodes, the token.
func (s *security) credentials() client.Credentials {
	return client.Credentials{CAFile: filepath.Join(s.dir, pki.CAFile), Token: s.token}
}

// describe says what protects the demo mesh.
func (s *security) describe() string {
	return fmt.Sprintf("security: mutual TLS between nodes and on Raft (a CA and a certificate per node in %s), "+
		"an API token for the demo's client, encrypted gossip, exec limited to %s", s.dir, strings.Join(s.execAllow, ", "))
}
