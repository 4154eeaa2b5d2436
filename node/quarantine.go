package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// maxQuarantineReason bounds the reason an operator gives.
const maxQuarantineReason = 1024

// Quarantine lists, adds or releases a quarantine. Changes go through
// Raft on the leader: this node applies them when it leads and forwards
// them once to the leader otherwise; a list comes from this node's
// control state when it is a server, from the leader's otherwise.
func (s *meshAPI) Quarantine(ctx context.Context, req *robonetv1.QuarantineRequest) (*robonetv1.QuarantineResponse, error) {
	var (
		cmd    mesh.Command
		change bool
	)
	switch req.GetOp() {
	case robonetv1.QuarantineOp_QUARANTINE_OP_LIST:
		if s.isServer() {
			return s.quarantineList(), nil
		}
	case robonetv1.QuarantineOp_QUARANTINE_OP_ADD, robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE:
		n := req.GetNode()
		if n == "" || len(n) > 256 {
			return nil, status.Errorf(codes.InvalidArgument, "quarantine: node %s: name a node of the mesh (roboctl members)", value.QuoteClipped(n, 64))
		}
		if len(req.GetReason()) > maxQuarantineReason {
			return nil, status.Errorf(codes.InvalidArgument, "quarantine: the reason is %d bytes, the limit is %d", len(req.GetReason()), maxQuarantineReason)
		}
		change = true
		if req.GetOp() == robonetv1.QuarantineOp_QUARANTINE_OP_ADD {
			reason := strings.TrimSpace(req.GetReason())
			if reason == "" {
				reason = "quarantined by an operator"
			}
			cmd = mesh.Quarantine(n, reason, time.Now(), true)
		} else {
			cmd = mesh.Release(n)
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "quarantine: op %s: want LIST, ADD or RELEASE", req.GetOp())
	}

	l := s.mesh.Leader()
	if change && l.IsLeader {
		err := s.mesh.Apply(ctx, cmd)
		if err == nil {
			return s.quarantineList(), nil
		}
		if !errors.Is(err, mesh.ErrNotLeader) {
			return nil, status.Errorf(codes.Unavailable, "quarantine: committing the change: %v", err)
		}
		l = s.mesh.Leader()
	}
	if isForwarded(ctx) || l.Leader == "" || l.Leader == s.self || l.LeaderGRPC == "" || s.conn == nil {
		return nil, status.Error(codes.Unavailable, "quarantine: no engine leader to commit it or answer it: retry when one is elected (roboctl leader)")
	}
	cc, err := s.conn(l.Leader, l.LeaderGRPC)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "quarantine: reaching the leader %s: %v", l.Leader, err)
	}
	fctx := metadata.AppendToOutgoingContext(ctx, forwardedHeader, s.self)
	return robonetv1.NewMeshServiceClient(cc).Quarantine(fctx, req)
}

// quarantineList is this server's control state's quarantine.
func (s *meshAPI) quarantineList() *robonetv1.QuarantineResponse {
	q := s.mesh.State().Quarantine
	resp := &robonetv1.QuarantineResponse{AnsweredBy: s.self, Nodes: make([]*robonetv1.QuarantinedNode, 0, len(q))}
	for _, n := range slices.Sorted(maps.Keys(q)) {
		e := q[n]
		resp.Nodes = append(resp.Nodes, &robonetv1.QuarantinedNode{Node: n, Reason: e.Reason, Since: timestamppb.New(e.Since), Manual: e.Manual})
	}
	return resp
}

// isServer reports whether this node is a Raft server (it has the control
// state).
func (s *meshAPI) isServer() bool {
	for _, m := range s.mesh.Members() {
		if m.Name == s.self {
			return slices.Contains(m.Roles, mesh.RoleServer)
		}
	}
	return false
}
