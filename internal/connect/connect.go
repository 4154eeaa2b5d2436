// Package connect dials a robonode's gRPC API as a client (roboctl, the
// demos, worker programs): TLS against the mesh CA when it is given, and
// a bearer token on every call — never sent unencrypted beyond loopback.
package connect

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/robonet/robonet/internal/pki"
)

// Credentials are how a tool verifies a node and authenticates to it.
type Credentials struct {
	// CAFile is the mesh CA's certificate: the connection is TLS and the
	// node's certificate is verified against it. Empty: plaintext.
	CAFile string
	// ServerName, when set, is the node the certificate must name (or a
	// host it lists); otherwise any node of the mesh will do.
	ServerName string
	// Token is sent with every call as "authorization: Bearer TOKEN".
	Token string
}

// Dial returns a connection to a robonode's gRPC API at addr (host:port).
// It does not contact the node: the first call does, so an unreachable node
// shows up as an Unavailable error from that call. A token is never sent
// unencrypted beyond loopback.
func Dial(addr string, c Credentials, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if c.CAFile != "" {
		cfg, err := pki.ClientTLS(c.CAFile, c.ServerName)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	} else if c.Token != "" && !Loopback(addr) {
		return nil, fmt.Errorf("refusing to send the API token unencrypted to %s: give the mesh CA with --tls-ca (or $ROBONET_TLS_CA)", addr)
	}
	opts = append(opts, grpc.WithTransportCredentials(creds))
	if c.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(c.Token)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return conn, nil
}

// bearerToken sends a token with every call.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity is false so that a node on loopback without
// TLS can be reached with a token; Dial refuses plaintext elsewhere.
func (bearerToken) RequireTransportSecurity() bool { return false }

// Loopback reports whether addr (host:port) names only this machine: a
// loopback address, or localhost.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadToken reads an API token: the first field of the first non-empty
// line of file that is not a # comment. Errors never quote the file's
// contents.
func ReadToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// The token is a line's first field: a line of a node's token
		// file (TOKEN name=… role=…) works as a client's.
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("token file %s holds no token", file)
}
