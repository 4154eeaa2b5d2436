// Package client is what roboNet's command-line tools (roboctl, and the
// demos robonode demo runs) share to talk to a robonode's gRPC API:
// dialing, following an instance's events with automatic resumption, live
// progress, error descriptions with their details, and views of API objects
// rendered as tables, JSON or YAML. It lives outside cmd so that the demos,
// scenarios in package chaos/demo, can use it too.
//
// It holds presentation and protocol plumbing only; every decision is the
// server's.
package client

import (
	"google.golang.org/grpc"

	"github.com/robonet/robonet/internal/connect"
)

// MaxMessageBytes bounds the messages the tools receive (instances with
// large outputs).
const MaxMessageBytes = 64 << 20

// Credentials are how a tool verifies a node and authenticates to it.
type Credentials = connect.Credentials

// Dial returns a connection to a robonode's gRPC API at addr (host:port)
// with c. It does not contact the node: the first call does, so an
// unreachable node shows up as an Unavailable error from that call.
func Dial(addr string, c Credentials) (*grpc.ClientConn, error) {
	return connect.Dial(addr, c, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)))
}

// ReadToken reads an API token file (see connect.ReadToken).
func ReadToken(file string) (string, error) { return connect.ReadToken(file) }
