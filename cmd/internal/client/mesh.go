package client

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// MemberView is a mesh member for -o json/yaml.
type MemberView struct {
	Name         string           `json:"name"`
	Status       string           `json:"status"`
	Roles        []string         `json:"roles"`
	Capabilities map[string]int32 `json:"capabilities,omitempty"`
	GRPCAddr     string           `json:"grpc_addr,omitempty"`
	GossipAddr   string           `json:"gossip_addr,omitempty"`
	RaftAddr     string           `json:"raft_addr,omitempty"`
	Leader       bool             `json:"leader"`
	Voter        bool             `json:"voter"`
	Version      string           `json:"version,omitempty"`
}

// Member returns the view of a member.
func Member(m *robonetv1.Member) MemberView {
	return MemberView{
		Name: m.GetName(), Status: m.GetStatus(), Roles: m.GetRoles(), Capabilities: m.GetCapabilities(),
		GRPCAddr: m.GetGrpcAddr(), GossipAddr: m.GetGossipAddr(), RaftAddr: m.GetRaftAddr(),
		Leader: m.GetLeader(), Voter: m.GetVoter(), Version: m.GetVersion(),
	}
}

// LeaderView is the engine leader for -o json/yaml.
type LeaderView struct {
	Name       string `json:"name"`
	GRPCAddr   string `json:"grpc_addr"`
	Term       uint64 `json:"term"`
	AnsweredBy string `json:"answered_by"`
}

// Leader returns the view of a GetLeader answer.
func Leader(r *robonetv1.GetLeaderResponse) LeaderView {
	return LeaderView{Name: r.GetName(), GRPCAddr: r.GetGrpcAddr(), Term: r.GetTerm(), AnsweredBy: r.GetAnsweredBy()}
}

// PrintMembers writes the members as a table; the leader is marked with
// a star.
func PrintMembers(w io.Writer, members []*robonetv1.Member) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tROLES\tGRPC\tCAPABILITIES")
	for _, m := range members {
		v := Member(m)
		name := v.Name
		if v.Leader {
			name += " *"
		}
		roles := strings.Join(v.Roles, ",")
		if slices.Contains(v.Roles, "server") && !v.Voter {
			roles += " (non-voter)"
		}
		caps := make([]string, 0, len(v.Capabilities))
		for _, c := range slices.Sorted(maps.Keys(v.Capabilities)) {
			caps = append(caps, fmt.Sprintf("%s=%d", c, v.Capabilities[c]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, v.Status, roles, dash(v.GRPCAddr), dash(strings.Join(caps, " ")))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
