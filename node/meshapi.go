package node

import (
	"context"
	"slices"
	"strings"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// meshAPI serves the MeshService from this node's own gossip view; it
// never asks the leader, so it answers during elections and on
// worker-only nodes.
type meshAPI struct {
	robonetv1.UnimplementedMeshServiceServer
	self string
	mesh meshNode
}

var _ robonetv1.MeshServiceServer = (*meshAPI)(nil)

func (s *meshAPI) ListMembers(context.Context, *robonetv1.ListMembersRequest) (*robonetv1.ListMembersResponse, error) {
	leader := s.mesh.Leader().Leader
	members := s.mesh.Members()
	resp := &robonetv1.ListMembersResponse{AnsweredBy: s.self, Members: make([]*robonetv1.Member, 0, len(members))}
	for _, m := range members {
		pm := &robonetv1.Member{
			Name:         m.Name,
			Status:       string(m.Status),
			Capabilities: make(map[string]int32, len(m.Capabilities)),
			GrpcAddr:     m.GRPCAddr,
			GossipAddr:   m.GossipAddr,
			RaftAddr:     m.RaftAddr,
			Leader:       m.Leader || (leader != "" && m.Name == leader),
			Voter:        m.Voter,
			Version:      m.Version,
		}
		for _, r := range m.Roles {
			pm.Roles = append(pm.Roles, string(r))
		}
		for c, n := range m.Capabilities {
			pm.Capabilities[c] = int32(min(n, 1<<31-1)) //nolint:gosec // clamped
		}
		resp.Members = append(resp.Members, pm)
	}
	slices.SortFunc(resp.Members, func(a, b *robonetv1.Member) int { return strings.Compare(a.GetName(), b.GetName()) })
	return resp, nil
}

func (s *meshAPI) GetLeader(context.Context, *robonetv1.GetLeaderRequest) (*robonetv1.GetLeaderResponse, error) {
	l := s.mesh.Leader()
	return &robonetv1.GetLeaderResponse{Name: l.Leader, GrpcAddr: l.LeaderGRPC, Term: l.Term, AnsweredBy: s.self}, nil
}
