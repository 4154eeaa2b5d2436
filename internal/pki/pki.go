// Package pki is the mesh's certificates: a development CA and node
// certificates (what `robonode tls` creates), loading a node's identity
// from PEM files, the TLS configurations built from it, and reading a
// peer's identity off a verified connection.
//
// A node certificate names its node in its common name and as a DNS name;
// a server's also carries the DNS name ServerMarker, which the Raft
// transport requires, so a worker-only node's certificate cannot join
// Raft. Every connection between nodes is mutual TLS against the mesh's
// CA, and the receiver reads who is calling from the verified chain: the
// name in a certificate is the node's identity, not the address it calls
// from. Clients (roboctl, worker programs) verify a node's certificate
// against the same CA and authenticate with a bearer token instead of a
// certificate.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ServerMarker is the DNS name every server certificate carries besides
// its node's name.
const ServerMarker = "server.robonet"

// File names in a directory of certificates.
const (
	CAFile    = "robonet-ca.pem"
	CAKeyFile = "robonet-ca-key.pem"
)

// NodeFiles returns the certificate and key file names of node in dir.
func NodeFiles(dir, node string) (cert, key string) {
	return filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem")
}

// Errors of loading and verifying identities.
var (
	// ErrNotSigned: a certificate does not chain to the mesh's CA.
	ErrNotSigned = errors.New("pki: certificate not signed by the mesh CA")
	// ErrNotServer: a Raft peer presented a certificate without
	// ServerMarker.
	ErrNotServer = errors.New("pki: not a server certificate")
	// ErrWrongNode: a peer's certificate names another node than the one
	// dialled.
	ErrWrongNode = errors.New("pki: certificate of another node")
)

// CreateCA writes a new CA certificate and key (ECDSA P-256) into dir
// (created if missing), valid from now for validity. It refuses to
// overwrite an existing CA.
func CreateCA(dir string, validity time.Duration, now time.Time) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certFile, keyFile); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("pki: generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "roboNet mesh CA", Organization: []string{"roboNet"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("pki: creating the CA certificate: %w", err)
	}
	if err := writePair(dir, certFile, keyFile, der, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// NodeCert describes a node certificate to create.
type NodeCert struct {
	// Name is the node's name (robonode --name): the certificate's common
	// name and a DNS name.
	Name string
	// Server marks a server's certificate (ServerMarker).
	Server bool
	// Hosts are more DNS names or IP addresses clients may dial the node
	// at; localhost and 127.0.0.1 are always included.
	Hosts []string
	// Validity is how long the certificate is valid from now.
	Validity time.Duration
}

// CreateNodeCert writes a certificate and key for c into dir, signed by
// the CA in caDir (CAFile, CAKeyFile). It refuses to overwrite existing
// files.
func CreateNodeCert(caDir, dir string, c NodeCert, now time.Time) (certFile, keyFile string, err error) {
	if err := CheckNodeName(c.Name); err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	caCert, caKey, err := loadCA(caDir)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = NodeFiles(dir, c.Name)
	if err := refuseExisting(certFile, keyFile); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("pki: generating the key of %s: %w", c.Name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: c.Name, Organization: []string{"roboNet"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(c.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{c.Name, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if c.Server {
		tmpl.DNSNames = append(tmpl.DNSNames, ServerMarker)
	}
	for _, h := range c.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("pki: creating the certificate of %s: %w", c.Name, err)
	}
	if err := writePair(dir, certFile, keyFile, der, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// CheckNodeName accepts the names a node may have: 1..128 letters,
// digits, '.', '_' and '-', starting with a letter or digit. Such a name
// stands as a DNS name in the node's certificate, and begins the ids of
// its workers ("node/capability/slot", split at the slashes) well within
// the 256 bytes a name may take on the mesh's streams.
func CheckNodeName(name string) error {
	ok := name != "" && len(name) <= 128 && isAlnum(rune(name[0]))
	for _, r := range name {
		ok = ok && (isAlnum(r) || r == '-' || r == '.' || r == '_')
	}
	if !ok {
		return fmt.Errorf("node name %q: use 1..128 letters, digits, '.', '_' or '-', starting with a letter or digit", name[:min(len(name), 64)])
	}
	return nil
}

func isAlnum(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("pki: reading randomness: %v", err)) // crypto/rand does not fail on Linux
	}
	return n
}

func refuseExisting(files ...string) error {
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("pki: %s exists; remove it first or write elsewhere", f)
		}
	}
	return nil
}

// writePair writes a certificate (0644) and its key (0600).
func writePair(dir, certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: encoding the key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil { //nolint:gosec // a certificate is public
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: loading the CA from %s (robonode tls ca create makes one): %w", dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parsing the CA certificate: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, nil, fmt.Errorf("pki: %s does not hold a CA made by robonode tls ca create", dir)
	}
	return cert, key, nil
}

// LoadPool reads the CA certificates in caFile.
func LoadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("pki: reading the CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("pki: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}
