package node

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/trust/center"
	"github.com/robonet/robonet/wag"
)

// wagglerAskTimeout bounds how long ListWagglers waits for one holder's
// live numbers: a holder that does not answer in time is shown "unknown"
// rather than holding up the whole listing.
const wagglerAskTimeout = 2 * time.Second

// Sources of the Waggler roles ListWagglers reports.
const (
	rolesFromControlState = "control-state"
	rolesFromGossip       = "gossip"
)

// Waggler states ListWagglers reports besides the Waggler's own.
const (
	wagglerUnassigned = "unassigned"
	wagglerUnknown    = "unknown"
)

// wagglerStatuses is what the MeshService needs of the node's Waggler
// host; *wag.WagglerHost implements it.
type wagglerStatuses interface {
	Status() []wag.WagglerStatus
}

var _ wagglerStatuses = (*wag.WagglerHost)(nil)

// poolStatuses is what LocalPools needs of the node's worker host.
type poolStatuses interface {
	PoolStats() []wag.PoolStats
}

var _ poolStatuses = (*wag.WorkerHost)(nil)

// meshAPI serves the MeshService from this node's own view; it never asks
// the leader, so it answers during elections and on worker-only nodes.
// ListWagglers asks the nodes that hold Waggler roles for their live
// numbers.
type meshAPI struct {
	robonetv1.UnimplementedMeshServiceServer
	self  string
	clock clock.Clock // nil: the system's (tests)
	mesh  meshNode
	// wagglers is this node's Waggler host, which LocalWagglers reports.
	// nil: the node does not report its Wagglers; LocalWagglers answers
	// UNIMPLEMENTED, as a node of an older version does.
	wagglers wagglerStatuses
	// pools is this node's worker host, which LocalPools reports. nil:
	// LocalPools answers UNIMPLEMENTED.
	pools poolStatuses
	// storedPools reads the pool statistics the leader collected (on
	// servers): ListMembers shows them for a member that does not answer.
	// nil: none.
	storedPools func(context.Context) ([]port.PoolStatus, error)
	// conn returns a cached connection to another node's gRPC API. nil:
	// ListWagglers asks no other node.
	conn func(node, addr string) (grpc.ClientConnInterface, error)
	// askTimeout bounds asking one holder; 0: wagglerAskTimeout.
	askTimeout time.Duration
	// trust is this node's trust in the others, which ListTrust reports
	// when this node leads. nil: ListTrust answers UNIMPLEMENTED.
	trust *center.Center
	// engine is this node's running engine (nil: none), whose counts
	// ListPartitions reports with rates from rates.
	engine func() *engine.Engine
	rates  *partitionRates
	// server: the node replicates the control state (ListPartitions
	// answers from it); placement is how its leader places partitions.
	server    bool
	placement mesh.PartitionPlacement
	// auditPath is this node's audit trail, which ListAudit reads; "":
	// ListAudit answers UNIMPLEMENTED.
	auditPath string
}

var _ robonetv1.MeshServiceServer = (*meshAPI)(nil)

// newMeshAPI is n's MeshService, with its Waggler host and its
// connection cache.
// now reads the node's clock.
func (s *meshAPI) now() time.Time {
	if s.clock == nil {
		return clock.System().Now()
	}
	return s.clock.Now()
}

func newMeshAPI(n *Node) *meshAPI {
	api := &meshAPI{
		self: n.cfg.Name, clock: n.cfg.Clock, mesh: n.mesh, wagglers: n.wagglers, pools: n.workers, trust: n.trust,
		engine: n.active.Load, rates: &n.partRates, server: n.cfg.IsServer(), placement: n.cfg.Mesh.PartitionPlacement,
		conn: func(node, addr string) (grpc.ClientConnInterface, error) { return n.conns.conn(node, addr) },
	}
	api.auditPath = n.cfg.auditPath()
	if n.store != nil {
		api.storedPools = n.store.ListPoolStats
	}
	return api
}

func (s *meshAPI) ListMembers(ctx context.Context, req *robonetv1.ListMembersRequest) (*robonetv1.ListMembersResponse, error) {
	leader := s.mesh.Leader().Leader
	members := s.mesh.Members()
	var (
		pools  map[string]poolReport
		stored map[string][]port.PoolStatus // read once, if a member does not answer
	)
	if req.GetPools() {
		pools = s.askPools(ctx, members)
		for _, rep := range pools {
			if rep.err != nil && s.storedPools != nil {
				stored = s.readStoredPools(ctx)
				break
			}
		}
	}
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
		if len(m.Wagglers) > 0 {
			pm.Wagglers = maps.Clone(m.Wagglers)
		}
		if req.GetPools() {
			switch rep, ok := pools[m.Name]; {
			case !ok:
				pm.PoolsNote = "not asked: the node is " + string(m.Status)
			case status.Code(rep.err) == codes.Unimplemented:
				pm.PoolsNote = m.Name + " does not report its pools"
			case rep.err != nil:
				pm.PoolsNote = rep.err.Error()
				if rows := stored[m.Name]; len(rows) > 0 {
					pm.PoolsNote += "; the pools as last collected, at " + rows[0].UpdatedAt.Format(time.RFC3339)
					pm.PoolsAt = timestamppb.New(rows[0].UpdatedAt)
					for _, r := range rows {
						pm.Pools = append(pm.Pools, poolStatusToProto(r))
					}
				}
			default:
				pm.Pools, pm.PoolsAt = rep.pools, timestamppb.New(rep.at)
			}
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

// LocalWagglers reports the Wagglers of this node's host.
func (s *meshAPI) LocalWagglers(context.Context, *robonetv1.LocalWagglersRequest) (*robonetv1.LocalWagglersResponse, error) {
	if s.wagglers == nil {
		return nil, status.Error(codes.Unimplemented, "this node does not report its Wagglers")
	}
	sts := s.wagglers.Status()
	resp := &robonetv1.LocalWagglersResponse{AnsweredBy: s.self, Wagglers: make([]*robonetv1.LocalWaggler, 0, len(sts))}
	for _, st := range sts {
		resp.Wagglers = append(resp.Wagglers, &robonetv1.LocalWaggler{
			Capability: st.Capability, Epoch: st.Epoch, State: st.State.String(),
			Queued: clampInt32(st.Queued), Running: clampInt32(st.Running), Workers: clampInt32(st.Workers),
			Failovers: st.Failovers, ReplaysIgnored: st.ReplaysIgnored,
		})
	}
	slices.SortFunc(resp.Wagglers, func(a, b *robonetv1.LocalWaggler) int { return strings.Compare(a.GetCapability(), b.GetCapability()) })
	return resp, nil
}

// ListWagglers lists the Waggler of every capability this node knows of:
// the roles of the control state on a server (what members advertise on
// a worker-only node), every holder asked for its live numbers at once
// (unless the request asks for the roles only), and the standbys from
// membership.
func (s *meshAPI) ListWagglers(ctx context.Context, req *robonetv1.ListWagglersRequest) (*robonetv1.ListWagglersResponse, error) {
	members := s.mesh.Members()
	roles, source := s.wagglerRoles(members)
	serving := servingMembers(members)
	byName := make(map[string]mesh.Member, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	caps := slices.Sorted(maps.Keys(roles))
	for c := range serving {
		if _, ok := roles[c]; !ok {
			caps = append(caps, c) // served, but not placed yet
		}
	}
	slices.Sort(caps)

	holders := map[string]bool{}
	for _, r := range roles {
		if r.Node != "" {
			holders[r.Node] = true
		}
	}
	var reports map[string]holderReport
	if !req.GetRolesOnly() {
		reports = s.askHolders(ctx, holders, byName)
	}

	resp := &robonetv1.ListWagglersResponse{AnsweredBy: s.self, Source: source, Wagglers: make([]*robonetv1.WagglerRole, 0, len(caps))}
	for _, c := range caps {
		r := roles[c]
		row := &robonetv1.WagglerRole{Capability: c, Node: r.Node, Epoch: r.Epoch, State: wagglerUnassigned}
		for _, n := range serving[c] {
			if n != r.Node {
				row.Standbys = append(row.Standbys, n)
			}
		}
		slices.Sort(row.Standbys)
		switch {
		case r.Node == "":
		case req.GetRolesOnly():
			row.State, row.Note = wagglerUnknown, "not asked (roles only)"
		default:
			fillLive(row, reports[r.Node])
		}
		resp.Wagglers = append(resp.Wagglers, row)
	}
	return resp, nil
}

// wagglerRoles returns the Waggler role of each capability and where the
// roles come from: the control state when this node is a server (it has
// one), otherwise the members' advertisements, resolved as the node's
// pools resolve them (wag.Holders).
func (s *meshAPI) wagglerRoles(members []mesh.Member) (map[string]mesh.WagglerAssignment, string) {
	if s.isServer() {
		return s.mesh.State().Wagglers, rolesFromControlState
	}
	holders := wag.Holders(roleMembers(members), nil)
	roles := make(map[string]mesh.WagglerAssignment, len(holders))
	for c, h := range holders {
		roles[c] = mesh.WagglerAssignment{Node: h.Node, Epoch: h.Epoch}
	}
	return roles, rolesFromGossip
}

// holderReport is what one holder said of its Wagglers, or why it said
// nothing.
type holderReport struct {
	node     string
	wagglers []*robonetv1.LocalWaggler
	err      error
}

// askHolders asks every holder for its Wagglers, concurrently, each within
// askTimeout.
func (s *meshAPI) askHolders(ctx context.Context, holders map[string]bool, members map[string]mesh.Member) map[string]holderReport {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = make(map[string]holderReport, len(holders))
	)
	for node := range holders {
		wg.Go(func() {
			ws, err := s.askHolder(ctx, node, members)
			mu.Lock()
			out[node] = holderReport{node: node, wagglers: ws, err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// askHolder returns node's Wagglers: this node's from its own host,
// another's through LocalWagglers.
func (s *meshAPI) askHolder(ctx context.Context, node string, members map[string]mesh.Member) ([]*robonetv1.LocalWaggler, error) {
	resp, err := askNode(ctx, s, node, members, s.LocalWagglers, robonetv1.MeshServiceClient.LocalWagglers)
	return resp.GetWagglers(), err
}

// LocalPools reports the pools of this node's worker host.
func (s *meshAPI) LocalPools(context.Context, *robonetv1.LocalPoolsRequest) (*robonetv1.LocalPoolsResponse, error) {
	if s.pools == nil {
		return nil, status.Error(codes.Unimplemented, "this node does not report its pools")
	}
	stats := s.pools.PoolStats()
	resp := &robonetv1.LocalPoolsResponse{AnsweredBy: s.self, Pools: make([]*robonetv1.PoolStats, 0, len(stats))}
	for _, st := range stats {
		resp.Pools = append(resp.Pools, poolStatsToProto(st))
	}
	return resp, nil
}

// readStoredPools reads the collected pool statistics by node; nil if it
// cannot (the members' notes say what the live call said).
func (s *meshAPI) readStoredPools(ctx context.Context) map[string][]port.PoolStatus {
	rows, err := s.storedPools(ctx)
	if err != nil {
		return nil
	}
	out := map[string][]port.PoolStatus{}
	for _, r := range rows {
		out[r.Node] = append(out[r.Node], r)
	}
	return out
}

// poolReport is what one member said of its pools, or why it said
// nothing.
type poolReport struct {
	pools []*robonetv1.PoolStats
	at    time.Time // when it answered
	err   error
}

// askPools asks every up member for its pools, concurrently, each within
// askTimeout.
func (s *meshAPI) askPools(ctx context.Context, members []mesh.Member) map[string]poolReport {
	byName := make(map[string]mesh.Member, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = make(map[string]poolReport, len(members))
	)
	for _, m := range members {
		if !memberUp(m) {
			continue
		}
		wg.Go(func() {
			resp, err := askNode(ctx, s, m.Name, byName, s.LocalPools, robonetv1.MeshServiceClient.LocalPools)
			mu.Lock()
			out[m.Name] = poolReport{pools: resp.GetPools(), at: s.now(), err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// askNode calls one of node's MeshService calls: this node's own answer
// (local), another's through its gRPC API within askTimeout.
func askNode[Req any, Resp any, PReq interface{ *Req }](ctx context.Context, s *meshAPI, node string, members map[string]mesh.Member,
	local func(context.Context, PReq) (Resp, error),
	remote func(robonetv1.MeshServiceClient, context.Context, PReq, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	var zero Resp
	if node == s.self {
		return local(ctx, new(Req))
	}
	m, ok := members[node]
	switch {
	case !ok:
		return zero, fmt.Errorf("%s is not a member of the mesh", node)
	case !memberUp(m):
		return zero, fmt.Errorf("%s is %s", node, m.Status)
	case m.GRPCAddr == "":
		return zero, fmt.Errorf("%s advertises no gRPC address", node)
	case s.conn == nil:
		return zero, fmt.Errorf("this node does not ask other nodes")
	}
	cc, err := s.conn(node, m.GRPCAddr)
	if err != nil {
		return zero, fmt.Errorf("connecting to %s: %w", node, err)
	}
	timeout := s.timeout()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := remote(robonetv1.NewMeshServiceClient(cc), actx, new(Req))
	switch status.Code(err) {
	case codes.OK:
		return resp, nil
	case codes.DeadlineExceeded:
		if ctx.Err() == nil {
			return zero, fmt.Errorf("%s did not answer within %s", node, timeout)
		}
	}
	return zero, fmt.Errorf("asking %s: %w", node, err)
}

// fillLive puts the holder's numbers for row's capability into row, or
// says why there are none.
func fillLive(row *robonetv1.WagglerRole, rep holderReport) {
	row.State = wagglerUnknown
	switch {
	case status.Code(rep.err) == codes.Unimplemented:
		row.Note = rep.node + " does not report its Wagglers"
		return
	case rep.err != nil:
		row.Note = rep.err.Error()
		return
	}
	i := slices.IndexFunc(rep.wagglers, func(w *robonetv1.LocalWaggler) bool { return w.GetCapability() == row.GetCapability() })
	if i < 0 {
		row.Note = rep.node + " does not run this Waggler (yet)"
		return
	}
	w := rep.wagglers[i]
	if w.GetEpoch() != row.GetEpoch() {
		row.Note = fmt.Sprintf("%s runs it at epoch %d, not %d (the role is moving)", rep.node, w.GetEpoch(), row.GetEpoch())
		return
	}
	row.State, row.Live = w.GetState(), true
	row.Workers, row.InFlight, row.Queued, row.Failovers = w.GetWorkers(), w.GetRunning(), w.GetQueued(), w.GetFailovers()
}

// timeout bounds asking one other node.
func (s *meshAPI) timeout() time.Duration { return cmp.Or(s.askTimeout, wagglerAskTimeout) }

// servingMembers maps each capability to the up members that serve it
// (with at least one slot).
func servingMembers(members []mesh.Member) map[string][]string {
	serving := map[string][]string{}
	for _, m := range members {
		if !memberUp(m) {
			continue
		}
		for c, size := range m.Capabilities {
			if size > 0 {
				serving[c] = append(serving[c], m.Name)
			}
		}
	}
	return serving
}

// memberUp reports whether a member counts as up: alive, or suspect
// (not declared dead yet).
func memberUp(m mesh.Member) bool {
	return m.Status == mesh.StatusAlive || m.Status == mesh.StatusSuspect
}

func clampInt32(n int) int32 {
	return int32(max(min(n, 1<<31-1), -1<<31)) //nolint:gosec // clamped
}
