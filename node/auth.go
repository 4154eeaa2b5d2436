package node

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/pki"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Who may call what on a node's gRPC port:
//
//   - health: anyone (load balancers and probes);
//   - WagService (leader ↔ Waggler, pool ↔ Waggler): other nodes only,
//     identified by a certificate of the mesh CA (with TLS on);
//   - everything else (the client API, MeshService, WorkerService for
//     worker programs, reflection): a node's certificate, or a bearer
//     token from Config.APITokens when tokens are configured.
//
// Without TLS and tokens the port is open to whoever reaches it, which the
// node allows on loopback only unless Config.Insecure is set.

// minTokenBytes is the shortest API token accepted: a token is a secret,
// not a password to remember.
const minTokenBytes = 16

// tokenSet holds the SHA-256 digests of the API tokens; the tokens
// themselves are not kept.
type tokenSet struct{ digests [][sha256.Size]byte }

// newTokenSet hashes tokens; it refuses short or empty ones.
func newTokenSet(tokens []string) (*tokenSet, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	s := &tokenSet{}
	for i, t := range tokens {
		if len(t) < minTokenBytes {
			return nil, fmt.Errorf("%w: API token %d of %d is %d bytes, at least %d are needed (e.g. head -c 32 /dev/urandom | base64)",
				ErrConfig, i+1, len(tokens), len(t), minTokenBytes)
		}
		s.digests = append(s.digests, sha256.Sum256([]byte(t)))
	}
	return s, nil
}

// valid reports whether token is one of the set, comparing digests in
// constant time and always against every digest.
func (s *tokenSet) valid(token string) bool {
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range s.digests {
		ok |= subtle.ConstantTimeCompare(d[:], s.digests[i][:])
	}
	return ok == 1
}

// authz decides whether a call may proceed.
type authz struct {
	tls    bool      // the port speaks TLS; nodes present certificates
	tokens *tokenSet // nil: no tokens configured
}

// errNoCredentials is the message of a refused client call.
const errNoCredentials = `no valid credentials: send "authorization: Bearer TOKEN" with one of the node's API tokens (roboctl --token-file FILE or $ROBONET_TOKEN)`

// check returns nil or the status error that refuses the call.
func (a authz) check(ctx context.Context, fullMethod string) error {
	service := fullMethod
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		service = strings.TrimPrefix(fullMethod[:i], "/")
	}
	if service == healthpb.Health_ServiceDesc.ServiceName {
		return nil
	}
	_, _, isNode := callerNode(ctx)
	if service == robonetv1.WagService_ServiceDesc.ServiceName {
		if a.tls && !isNode {
			return status.Error(codes.PermissionDenied, "WagService is for the mesh's nodes: present a node certificate signed by the mesh CA")
		}
		return nil
	}
	if isNode || a.tokens == nil {
		return nil
	}
	token, ok := bearer(ctx)
	if !ok || !a.tokens.valid(token) {
		return status.Error(codes.Unauthenticated, errNoCredentials)
	}
	return nil
}

func (a authz) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a authz) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

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
