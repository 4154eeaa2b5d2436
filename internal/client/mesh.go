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
	// Pools are the node's worker pools (asked for with --pools or -o
	// wide), or why they are missing.
	Pools     []PoolView `json:"pools,omitempty"`
	PoolsNote string     `json:"pools_note,omitempty"`
}

// PoolView is one worker pool's recent work.
type PoolView struct {
	Capability  string  `json:"capability"`
	Pool        string  `json:"pool"`
	Slots       int32   `json:"slots"`
	Busy        int32   `json:"busy"`
	Utilisation float64 `json:"utilisation"`
	Completed   uint64  `json:"completed"`
	Failed      uint64  `json:"failed"`
	PerMinute   int32   `json:"per_minute"`
	RunP50      string  `json:"run_p50"`
	RunP99      string  `json:"run_p99"`
}

// Pool returns the view of a pool.
func Pool(p *robonetv1.PoolStats) PoolView {
	v := PoolView{
		Capability: p.GetCapability(), Pool: p.GetPool(), Slots: p.GetSlots(), Busy: p.GetBusy(),
		Completed: p.GetCompleted(), Failed: p.GetFailed(), PerMinute: p.GetPerMinute(),
		RunP50: p.GetLatencyP50().AsDuration().String(), RunP99: p.GetLatencyP99().AsDuration().String(),
	}
	if v.Slots > 0 {
		v.Utilisation = float64(v.Busy) / float64(v.Slots)
	}
	return v
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
	for _, p := range m.GetPools() {
		v.Pools = append(v.Pools, Pool(p))
	}
	v.PoolsNote = m.GetPoolsNote()
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
//
// wide adds a table of every node's worker pools: busy slots, attempts
// done and failed, finishes in the last minute, run-time percentiles.
func PrintMembers(w io.Writer, members []*robonetv1.Member, wide bool) {
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
	if wide {
		printPools(w, members)
	}
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

// TrustView is one node's or worker program's trust as the leader sees
// it, for -o json and -o yaml. A program is named NODE/PROGRAM; Via is
// its node.
type TrustView struct {
	Node       string            `json:"node"`
	Via        string            `json:"via,omitempty"`
	Tier       string            `json:"tier"`
	Score      float64           `json:"score"`
	Good       float64           `json:"good"`
	Bad        float64           `json:"bad"`
	Evidence   map[string]uint64 `json:"evidence"`
	Betrayed   string            `json:"betrayed,omitempty"`
	PreTrusted bool              `json:"pretrusted,omitempty"`
	Self       bool              `json:"self,omitempty"`
	Since      *time.Time        `json:"since,omitempty"`
}

// Trust is the view of n.
func Trust(n *robonetv1.NodeTrust) TrustView {
	v := TrustView{Node: n.GetNode(), Tier: n.GetTier(), Score: n.GetScore(), Good: n.GetGood(), Bad: n.GetBad(),
		Evidence: n.GetEvidence(), Betrayed: n.GetBetrayed(), PreTrusted: n.GetPretrusted(), Self: n.GetSelf()}
	if v.Evidence == nil {
		v.Evidence = map[string]uint64{}
	}
	if node, _, ok := strings.Cut(v.Node, "/"); ok {
		v.Via = node
	}
	if n.GetSince() != nil {
		t := n.GetSince().AsTime().UTC()
		v.Since = &t
	}
	return v
}

// PrintTrust writes each node's and worker program's trust as a table.
func PrintTrust(w io.Writer, resp *robonetv1.ListTrustResponse) {
	fmt.Fprintf(w, "as the leader %s sees it; dispatch tier %s (below it a node or program is on probation)\n", resp.GetAnsweredBy(), resp.GetDispatchTier())
	if len(resp.GetNodes()) == 0 {
		fmt.Fprintln(w, "no evidence about any node yet")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTIER\tSCORE\tGOOD\tBAD\tEVIDENCE\tNOTE")
	for _, n := range resp.GetNodes() {
		var ev []string
		for _, k := range slices.Sorted(maps.Keys(n.GetEvidence())) {
			ev = append(ev, fmt.Sprintf("%s=%d", k, n.GetEvidence()[k]))
		}
		note := ""
		switch {
		case n.GetBetrayed() != "":
			note = "betrayed: " + n.GetBetrayed()
		case n.GetSelf():
			note = "the leader itself"
		case n.GetPretrusted():
			note = "trusted by an operator"
		}
		if node, _, ok := strings.Cut(n.GetNode(), "/"); ok {
			note = strings.TrimSuffix("worker program via "+node+"; "+note, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.1f\t%.1f\t%s\t%s\n", n.GetNode(), n.GetTier(), n.GetScore(), n.GetGood(), n.GetBad(),
			dash(strings.Join(ev, " ")), dash(note))
	}
	_ = tw.Flush()
}

// printPools writes every member's worker pools as a second table, then a
// line for each member whose pools are missing, saying why.
func printPools(w io.Writer, members []*robonetv1.Member) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOOL\tCAPABILITY\tBUSY\tDONE\tFAILED\tPER MIN\tRUN P50\tRUN P99")
	var notes []string
	for _, m := range members {
		v := Member(m)
		for _, p := range v.Pools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d (%.0f%%)\t%d\t%d\t%d\t%s\t%s\n", v.Name, p.Pool, p.Capability,
				p.Busy, p.Slots, 100*p.Utilisation, p.Completed, p.Failed, p.PerMinute, p.RunP50, p.RunP99)
		}
		if v.PoolsNote != "" {
			notes = append(notes, v.Name+": "+v.PoolsNote)
		}
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// PartitionView is one partition as roboctl partitions -o json shows it.
type PartitionView struct {
	Partition uint32 `json:"partition"`
	// Owner is the server that owns it; empty while none does.
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	Term  uint64 `json:"term"`
	// MovedAt is when it last moved (RFC 3339; empty: never), Reason why.
	MovedAt string `json:"moved_at,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Live says the owner's counts below were given.
	Live           bool    `json:"live"`
	InstancesHeld  uint64  `json:"instances_held"`
	TasksTotal     uint64  `json:"tasks_total"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	WritesRefused  uint64  `json:"writes_refused"`
}

// Partition returns the view of a partition.
func Partition(p *robonetv1.PartitionInfo) PartitionView {
	v := PartitionView{
		Partition: p.GetPartition(), Owner: p.GetOwner(), Epoch: p.GetEpoch(), Term: p.GetTerm(), Reason: p.GetReason(),
		Live: p.GetHasStats(), InstancesHeld: p.GetInstancesHeld(), TasksTotal: p.GetTasksTotal(),
		TasksPerSecond: p.GetTasksPerSecond(), WritesRefused: p.GetWritesRefused(),
	}
	if at := p.GetMovedAtUnixNanos(); at != 0 {
		v.MovedAt = time.Unix(0, at).UTC().Format(time.RFC3339Nano)
	}
	return v
}

// PrintPartitions writes the partitions as a table, with the count and the
// placement above it.
func PrintPartitions(w io.Writer, resp *robonetv1.ListPartitionsResponse, now time.Time) {
	fmt.Fprintf(w, "%d partitions, placed on the %s (answered by %s)\n\n", resp.GetCount(), placementName(resp.GetPlacement()), resp.GetAnsweredBy())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tEPOCH\tHELD\tTASKS/S\tTASKS\tREFUSED\tMOVED\tWHY")
	for _, p := range resp.GetPartitions() {
		v := Partition(p)
		counts := "-\t-\t-\t-"
		if v.Live {
			counts = fmt.Sprintf("%d\t%.1f\t%d\t%d", v.InstancesHeld, v.TasksPerSecond, v.TasksTotal, v.WritesRefused)
		}
		moved := "never"
		if at := p.GetMovedAtUnixNanos(); at != 0 {
			moved = ago(now.Sub(time.Unix(0, at)))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", v.Partition, dash(v.Owner), v.Epoch, counts, moved, dash(v.Reason))
	}
	_ = tw.Flush()
}

func placementName(p string) string {
	switch p {
	case "leader":
		return "Raft leader"
	case "balanced":
		return "servers, balanced"
	}
	return dash(p)
}

// ago renders how long ago something happened, to the second.
func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return d.Truncate(time.Second).String() + " ago"
}
