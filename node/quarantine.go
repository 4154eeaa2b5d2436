package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc"
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

// Quarantine lists, adds or releases a quarantine: of a node, or of a
// worker program, named NODE/PROGRAM (a trust subject of its own: its
// node's other workers keep working). Changes go through
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
		if node, program, ok := strings.Cut(n, "/"); node == "" || len(n) > 256 || ok && (program == "" || strings.Contains(program, "/")) {
			return nil, status.Errorf(codes.InvalidArgument, "quarantine: node %s: name a node of the mesh (roboctl members) or a worker program as NODE/PROGRAM (roboctl trust)", value.QuoteClipped(n, 64))
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
			cmd = mesh.Quarantine(n, reason, s.now(), true)
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
			if req.GetOp() == robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE && s.trust != nil {
				s.trust.Released(req.GetNode()) // its trust starts again from zero
			}
			return s.quarantineList(), nil
		}
		if !errors.Is(err, mesh.ErrNotLeader) {
			return nil, status.Errorf(codes.Unavailable, "quarantine: committing the change: %v", err)
		}
		l = s.mesh.Leader()
	}
	cc, fctx, err := s.toLeader(ctx, l, "quarantine", "to commit it or answer it")
	if err != nil {
		return nil, err
	}
	return robonetv1.NewMeshServiceClient(cc).Quarantine(fctx, req)
}

// toLeader is a connection to the engine leader l, and the context that
// marks a call forwarded to it once (a call already forwarded is not
// forwarded again); what and why name the call for its errors.
func (s *meshAPI) toLeader(ctx context.Context, l mesh.Leadership, what, why string) (grpc.ClientConnInterface, context.Context, error) {
	if isForwarded(ctx) || l.Leader == "" || l.Leader == s.self || l.LeaderGRPC == "" || s.conn == nil {
		return nil, nil, status.Errorf(codes.Unavailable, "%s: no engine leader %s: retry when one is elected (roboctl leader)", what, why)
	}
	cc, err := s.conn(l.Leader, l.LeaderGRPC)
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "%s: reaching the leader %s: %v", what, l.Leader, err)
	}
	return cc, metadata.AppendToOutgoingContext(ctx, forwardedHeader, s.self), nil
}

// ListTrust answers with the leader's trust in each node and worker
// program (NODE/PROGRAM): this node's when it leads, else forwarded once
// to the leader.
func (s *meshAPI) ListTrust(ctx context.Context, req *robonetv1.ListTrustRequest) (*robonetv1.ListTrustResponse, error) {
	if s.trust == nil {
		return nil, status.Error(codes.Unimplemented, "trust: this node does not report trust")
	}
	l := s.mesh.Leader()
	if l.IsLeader {
		resp := &robonetv1.ListTrustResponse{AnsweredBy: s.self, DispatchTier: s.trust.MinTier().String()}
		for _, v := range s.trust.View() {
			nt := &robonetv1.NodeTrust{Node: v.Name, Tier: v.Tier, Score: v.Score, Good: v.Good, Bad: v.Bad, Evidence: v.Evidence,
				Betrayed: v.Betrayed, Pretrusted: v.PreTrusted, Self: v.Self}
			if !v.Since.IsZero() {
				nt.Since = timestamppb.New(v.Since)
			}
			resp.Nodes = append(resp.Nodes, nt)
		}
		return resp, nil
	}
	cc, fctx, err := s.toLeader(ctx, l, "trust", "to answer it")
	if err != nil {
		return nil, err
	}
	return robonetv1.NewMeshServiceClient(cc).ListTrust(fctx, req)
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
