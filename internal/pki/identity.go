package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Files locates a node's identity: the mesh CA's certificate, and the
// node's certificate and key.
type Files struct {
	CA, Cert, Key string
}

// Set reports whether any file is named.
func (f Files) Set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Identity is a node's certificate and the mesh's CA, loaded and checked.
type Identity struct {
	// Name is the node the certificate names.
	Name string
	// Server reports a server certificate (ServerMarker).
	Server bool
	// NotAfter is when the certificate expires.
	NotAfter time.Time

	pair tls.Certificate
	pool *x509.CertPool
}

// Load reads f and checks that the certificate is signed by the CA and
// that the key matches it.
func Load(f Files) (*Identity, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("pki: a node's TLS identity needs the CA certificate, the node's certificate and its key (--tls-ca, --tls-cert, --tls-key)")
	}
	pool, err := LoadPool(f.CA)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: loading the node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("pki: parsing the node certificate: %w", err)
	}
	pair.Leaf = leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotSigned, f.Cert, err)
	}
	return &Identity{
		Name: leaf.Subject.CommonName, Server: slices.Contains(leaf.DNSNames, ServerMarker), NotAfter: leaf.NotAfter,
		pair: pair, pool: pool,
	}, nil
}

// ServerTLS is the configuration of the node's gRPC listener: its
// certificate, and client certificates verified against the mesh CA when
// given — nodes present one, clients (roboctl, worker programs) do not and
// authenticate with a token.
func (id *Identity) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    id.pool,
	}
}

// ClientTLS is the configuration for dialing the node named peer (any
// node of the mesh when empty): this node's certificate, and the peer's
// verified against the mesh CA and its name — not against the address
// dialled, so nodes need no certificate per address.
func (id *Identity) ClientTLS(peer string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.pair},
		// The standard hostname check is replaced by VerifyConnection,
		// which verifies the chain and the node's name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := verifyChain(id.pool, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if peer != "" && leaf.Subject.CommonName != peer {
				return fmt.Errorf("%w: dialled %s, it is %s", ErrWrongNode, peer, leaf.Subject.CommonName)
			}
			return nil
		},
	}
}

// RaftServerTLS is the configuration of the Raft listener: only servers
// (certificates with ServerMarker, signed by the mesh CA) may connect.
func (id *Identity) RaftServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    id.pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !slices.Contains(cs.PeerCertificates[0].DNSNames, ServerMarker) {
				return fmt.Errorf("%w: only servers join Raft", ErrNotServer)
			}
			return nil
		},
	}
}

// RaftClientTLS is the configuration for dialing another server's Raft
// transport: it must present a server certificate of the mesh.
func (id *Identity) RaftClientTLS() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{id.pair},
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := verifyChain(id.pool, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if !slices.Contains(leaf.DNSNames, ServerMarker) {
				return fmt.Errorf("%w: %s is not a server", ErrNotServer, leaf.Subject.CommonName)
			}
			return nil
		},
	}
}

// ClientTLS is the configuration of a client (roboctl, a worker program)
// of a node: the node's certificate verified against the CA in caFile —
// any node of the mesh, or the one named serverName when it is set.
func ClientTLS(caFile, serverName string) (*tls.Config, error) {
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := verifyChain(pool, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if serverName != "" && leaf.Subject.CommonName != serverName && leaf.VerifyHostname(serverName) != nil {
				return fmt.Errorf("%w: expected %s, it is %s", ErrWrongNode, serverName, leaf.Subject.CommonName)
			}
			return nil
		},
	}, nil
}

// PeerNode reads the node a verified TLS connection's peer certificate
// names; ok is false when the peer presented none.
func PeerNode(cs tls.ConnectionState) (name string, server, ok bool) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false, false
	}
	leaf := cs.VerifiedChains[0][0]
	return leaf.Subject.CommonName, slices.Contains(leaf.DNSNames, ServerMarker), true
}

// verifyChain verifies a presented chain (leaf first) against pool.
func verifyChain(pool *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: the peer presented no certificate", ErrNotSigned)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSigned, err)
	}
	return certs[0], nil
}
