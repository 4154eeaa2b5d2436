package client

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// MemberView is a mesh member for -o json/yaml.
type MemberView struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Role is the node's part in one word: "leader" (the server that
	// leads the engine), "server" or "worker" (a worker-only node).
	Role         string           `json:"role"`
	Roles        []string         `json:"roles"`
	Capabilities map[string]int32 `json:"capabilities,omitempty"`
	// Wagglers are the Waggler roles the node runs: capability → epoch.
	Wagglers   map[string]uint64 `json:"wagglers"`
	GRPCAddr   string            `json:"grpc_addr,omitempty"`
	GossipAddr string            `json:"gossip_addr,omitempty"`
	RaftAddr   string            `json:"raft_addr,omitempty"`
	Leader     bool              `json:"leader"`
	Voter      bool              `json:"voter"`
	Version    string            `json:"version,omitempty"`
}

// Member returns the view of a member.
func Member(m *robonetv1.Member) MemberView {
	v := MemberView{
		Name: m.GetName(), Status: m.GetStatus(), Role: "worker", Roles: m.GetRoles(), Capabilities: m.GetCapabilities(),
		Wagglers: m.GetWagglers(), GRPCAddr: m.GetGrpcAddr(), GossipAddr: m.GetGossipAddr(), RaftAddr: m.GetRaftAddr(),
		Leader: m.GetLeader(), Voter: m.GetVoter(), Version: m.GetVersion(),
	}
	switch {
	case m.GetLeader():
		v.Role = "leader"
	case slices.Contains(v.Roles, "server"):
		v.Role = "server"
	}
	if v.Wagglers == nil {
		v.Wagglers = map[string]uint64{}
	}
	return v
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
// a star. ROLE is leader, server or worker (every server also runs
// workers); WAGGLERS names the capabilities whose Waggler the node runs.
func PrintMembers(w io.Writer, members []*robonetv1.Member) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tROLE\tGRPC\tCAPABILITIES\tWAGGLERS")
	for _, m := range members {
		v := Member(m)
		name := v.Name
		if v.Leader {
			name += " *"
		}
		role := v.Role
		if slices.Contains(v.Roles, "server") && !v.Voter {
			role += " (non-voter)"
		}
		caps := make([]string, 0, len(v.Capabilities))
		for _, c := range slices.Sorted(maps.Keys(v.Capabilities)) {
			caps = append(caps, fmt.Sprintf("%s=%d", c, v.Capabilities[c]))
		}
		wagglers := "-"
		if len(v.Wagglers) > 0 {
			wagglers = "waggler of " + strings.Join(slices.Sorted(maps.Keys(v.Wagglers)), ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, v.Status, role, dash(v.GRPCAddr), dash(strings.Join(caps, " ")), wagglers)
	}
	_ = tw.Flush()
}

// WagglerView is the Waggler of one capability for -o json/yaml (see
// robonetv1.WagglerRole).
type WagglerView struct {
	Capability string `json:"capability"`
	// Node holds the role; empty while none does.
	Node  string `json:"node"`
	Epoch uint64 `json:"epoch"`
	// State is the Waggler's (IDLE, DISPATCHING, MONITORING, COLLECTING,
	// FAILOVER), "unassigned", or "unknown" when its holder could not be
	// asked (Note says why; the counts are then zero).
	State     string   `json:"state"`
	Workers   int32    `json:"workers"`
	InFlight  int32    `json:"in_flight"`
	Queued    int32    `json:"queued"`
	Standbys  []string `json:"standbys"`
	Failovers uint64   `json:"failovers"`
	Live      bool     `json:"live"`
	Note      string   `json:"note,omitempty"`
}

// Waggler returns the view of a Waggler role.
func Waggler(r *robonetv1.WagglerRole) WagglerView {
	v := WagglerView{
		Capability: r.GetCapability(), Node: r.GetNode(), Epoch: r.GetEpoch(), State: r.GetState(),
		Workers: r.GetWorkers(), InFlight: r.GetInFlight(), Queued: r.GetQueued(), Standbys: r.GetStandbys(),
		Failovers: r.GetFailovers(), Live: r.GetLive(), Note: r.GetNote(),
	}
	if v.Standbys == nil {
		v.Standbys = []string{}
	}
	return v
}

// PrintWagglers writes the Wagglers as a table; a row whose numbers its
// holder did not give is marked with a star and explained below.
func PrintWagglers(w io.Writer, resp *robonetv1.ListWagglersResponse) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPABILITY\tNODE\tEPOCH\tSTATE\tWORKERS\tIN FLIGHT\tQUEUED\tSTANDBYS")
	var notes []string
	for _, r := range resp.GetWagglers() {
		v := Waggler(r)
		state := v.State
		if v.Note != "" {
			state += " *"
			notes = append(notes, fmt.Sprintf("* %s: %s", v.Capability, v.Note))
		}
		counts := "-\t-\t-"
		if v.Live {
			counts = fmt.Sprintf("%d\t%d\t%d", v.Workers, v.InFlight, v.Queued)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", v.Capability, dash(v.Node), v.Epoch, state, counts, dash(strings.Join(v.Standbys, ", ")))
	}
	_ = tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// QuarantinedView is one quarantined node, for -o json and -o yaml.
type QuarantinedView struct {
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Manual bool      `json:"manual"`
}

// Quarantined is the view of q.
func Quarantined(q *robonetv1.QuarantinedNode) QuarantinedView {
	return QuarantinedView{Node: q.GetNode(), Reason: q.GetReason(), Since: q.GetSince().AsTime().UTC(), Manual: q.GetManual()}
}

// PrintQuarantine writes the quarantined nodes as a table.
func PrintQuarantine(w io.Writer, nodes []*robonetv1.QuarantinedNode) {
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no node is quarantined")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSINCE\tBY\tREASON")
	for _, q := range nodes {
		by := "sentinel"
		if q.GetManual() {
			by = "operator"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", q.GetNode(), q.GetSince().AsTime().UTC().Format(time.RFC3339), by, q.GetReason())
	}
	_ = tw.Flush()
}
