package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"time"

	"github.com/robonet/robonet/cmd/internal/client"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/node"
)

// demoSecurity is what makes a demo mesh secure, as a real one would be:
// a CA with a certificate per node (mutual TLS between nodes and on Raft,
// TLS for the demo's own client), an API token and a gossip key, all made
// afresh in the demo's data directory.
type demoSecurity struct {
	dir       string
	token     string
	gossipKey []byte
}

// newDemoSecurity creates the CA, token and gossip key under dir/pki.
func newDemoSecurity(dir string) (*demoSecurity, error) {
	s := &demoSecurity{dir: filepath.Join(dir, "pki")}
	if _, _, err := pki.CreateCA(s.dir, 24*time.Hour, time.Now()); err != nil {
		return nil, runtimeError{err}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, runtimeError{err}
	}
	s.token = base64.RawURLEncoding.EncodeToString(secret)
	s.gossipKey = make([]byte, 32)
	if _, err := rand.Read(s.gossipKey); err != nil {
		return nil, runtimeError{err}
	}
	return s, nil
}

// apply gives cfg a certificate of its own, the token and the gossip key.
func (s *demoSecurity) apply(cfg *node.Config) error {
	cert, key, err := pki.CreateNodeCert(s.dir, s.dir, pki.NodeCert{Name: cfg.Name, Server: cfg.Server != nil && *cfg.Server, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		return runtimeError{err}
	}
	cfg.TLS = pki.Files{CA: filepath.Join(s.dir, pki.CAFile), Cert: cert, Key: key}
	cfg.APITokens = []string{s.token}
	cfg.GossipKey = s.gossipKey
	return nil
}

// credentials are the demo client's: the CA to verify nodes, the token.
func (s *demoSecurity) credentials() client.Credentials {
	return client.Credentials{CAFile: filepath.Join(s.dir, pki.CAFile), Token: s.token}
}

// describe says what protects the demo mesh.
func (s *demoSecurity) describe() string {
	return fmt.Sprintf("security: mutual TLS between nodes and on Raft (a CA and a certificate per node in %s), "+
		"an API token for the demo's client, encrypted gossip", s.dir)
}
