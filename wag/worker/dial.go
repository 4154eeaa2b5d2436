package worker

import (
	"google.golang.org/grpc"

	"github.com/robonet/robonet/internal/connect"
)

// Credentials are how a worker program verifies the node it connects to
// and authenticates to it: the mesh CA's certificate (TLS; empty means
// plaintext, for a node on loopback without TLS) and an API token.
type Credentials = connect.Credentials

// Dial returns a connection to a robonode's gRPC API at addr for Run,
// with c. The token is never sent unencrypted beyond loopback.
func Dial(addr string, c Credentials) (*grpc.ClientConn, error) {
	return connect.Dial(addr, c)
}

// ReadToken reads an API token file: the first line that is not blank or
// a # comment.
func ReadToken(file string) (string, error) { return connect.ReadToken(file) }
