package node

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/pki"
)

// bearer reads the token of an "authorization: Bearer TOKEN" header.
func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") && token != "" {
			return strings.TrimSpace(token), true
		}
	}
	return "", false
}

// callerNode reads the node a call comes from, by its verified
// certificate; ok is false for clients without one (and without TLS).
func callerNode(ctx context.Context) (name string, server, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found {
		return "", false, false
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS {
		return "", false, false
	}
	return pki.PeerNode(info.State)
}

// errWrongNode is the refusal of a node that speaks for another.
var errWrongNode = errors.New("the certificate names another node")

// checkCaller verifies, when the call comes over TLS, that the calling
// node's certificate names claimed (the node a stream says it is), and
// that it is a server's when server is set.
func checkCaller(ctx context.Context, claimed string, server bool) error {
	name, isServer, ok := callerNode(ctx)
	switch {
	case !ok:
		return nil
	case name != claimed:
		return status.Errorf(codes.PermissionDenied, "%v: %s speaks for %s", errWrongNode, name, claimed)
	case server && !isServer:
		return status.Errorf(codes.PermissionDenied, "%s is not a server: only the engine leader opens a Lead stream", name)
	}
	return nil
}
