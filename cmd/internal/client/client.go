// Package client is what roboNet's command-line tools (roboctl, and robonode
// demo) share to talk to a robonode's gRPC API: dialing, following an
// instance's events with automatic resumption, live progress, error
// descriptions with their details, and views of API objects rendered as
// tables, JSON or YAML.
//
// It holds presentation and protocol plumbing only; every decision is the
// server's.
package client

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageBytes bounds the messages the tools receive (instances with
// large outputs).
const MaxMessageBytes = 64 << 20

// Dial returns a connection to a robonode's gRPC API at addr (host:port).
// It does not contact the node: the first call does, so an unreachable node
// shows up as an Unavailable error from that call.
func Dial(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return conn, nil
}
