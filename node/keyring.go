package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Keyring applies a keyring operation on this node and, unless the
// request is local only, on every other alive member (asked over the
// node-to-node channel, each within wagglerAskTimeout), and reports each
// node's outcome. Keys are never sent back: fingerprints only.
func (s *meshAPI) Keyring(ctx context.Context, req *robonetv1.KeyringRequest) (*robonetv1.KeyringResponse, error) {
	op, err := keyringOp(req)
	if err != nil {
		return nil, err
	}
	resp := &robonetv1.KeyringResponse{Nodes: []*robonetv1.NodeKeyring{s.localKeyring(op, req.GetKey())}}
	if req.GetLocalOnly() {
		return resp, nil
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, m := range s.mesh.Members() {
		if m.Name == s.self || !memberUp(m) {
			continue
		}
		wg.Go(func() {
			r := s.remoteKeyring(ctx, m, req)
			mu.Lock()
			resp.Nodes = append(resp.Nodes, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(resp.Nodes, func(a, b *robonetv1.NodeKeyring) int { return strings.Compare(a.GetNode(), b.GetNode()) })
	return resp, nil
}

// keyringOp checks a request: a known operation, and a key of a valid
// size for changes.
func keyringOp(req *robonetv1.KeyringRequest) (mesh.KeyringOp, error) {
	var op mesh.KeyringOp
	switch req.GetOp() {
	case robonetv1.KeyringOp_KEYRING_OP_LIST:
		return 0, nil
	case robonetv1.KeyringOp_KEYRING_OP_INSTALL:
		op = mesh.KeyInstall
	case robonetv1.KeyringOp_KEYRING_OP_USE:
		op = mesh.KeyUse
	case robonetv1.KeyringOp_KEYRING_OP_REMOVE:
		op = mesh.KeyRemove
	default:
		return 0, status.Errorf(codes.InvalidArgument, "keyring: op %s: want LIST, INSTALL, USE or REMOVE", req.GetOp())
	}
	switch len(req.GetKey()) {
	case 16, 24, 32:
		return op, nil
	}
	return 0, status.Errorf(codes.InvalidArgument, "keyring: the key is %d bytes; a gossip key is 16, 24 or 32 bytes (robonode keyring generate)", len(req.GetKey()))
}

// localKeyring applies op (0: list) here.
func (s *meshAPI) localKeyring(op mesh.KeyringOp, key []byte) *robonetv1.NodeKeyring {
	out := &robonetv1.NodeKeyring{Node: s.self}
	if op != 0 {
		if err := s.mesh.ChangeKeyring(op, key); err != nil {
			out.Error = err.Error()
		}
	}
	for _, k := range s.mesh.GossipKeys() {
		out.Fingerprints = append(out.Fingerprints, mesh.Fingerprint(k))
	}
	if op == 0 && len(out.Fingerprints) == 0 {
		out.Error = mesh.ErrNotEncrypted.Error()
	}
	return out
}

// remoteKeyring asks member to apply req on itself.
func (s *meshAPI) remoteKeyring(ctx context.Context, m mesh.Member, req *robonetv1.KeyringRequest) *robonetv1.NodeKeyring {
	fail := func(err error) *robonetv1.NodeKeyring {
		return &robonetv1.NodeKeyring{Node: m.Name, Error: err.Error()}
	}
	if s.conn == nil || m.GRPCAddr == "" {
		return fail(fmt.Errorf("%s cannot be reached over gRPC", m.Name))
	}
	cc, err := s.conn(m.Name, m.GRPCAddr)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	local := &robonetv1.KeyringRequest{Op: req.GetOp(), Key: req.GetKey(), LocalOnly: true}
	resp, err := robonetv1.NewMeshServiceClient(cc).Keyring(ctx, local)
	if err != nil {
		return fail(fmt.Errorf("asking %s: %s", m.Name, status.Convert(err).Message()))
	}
	if len(resp.GetNodes()) != 1 {
		return fail(fmt.Errorf("%s answered for %d nodes", m.Name, len(resp.GetNodes())))
	}
	r := resp.GetNodes()[0]
	r.Node = m.Name
	return r
}
