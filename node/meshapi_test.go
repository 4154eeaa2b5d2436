package node

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// stateMesh is a fake mesh with a control state.
type stateMesh struct {
	*fakeMesh
	state mesh.ControlState
}

func (m *stateMesh) State() mesh.ControlState { return m.state }

// fakeHost is a Waggler host with fixed statuses.
type fakeHost []wag.WagglerStatus

func (h fakeHost) Status() []wag.WagglerStatus { return h }

// hangingMesh answers LocalWagglers only when the call ends.
type hangingMesh struct {
	robonetv1.UnimplementedMeshServiceServer
}

func (hangingMesh) LocalWagglers(ctx context.Context, _ *robonetv1.LocalWagglersRequest) (*robonetv1.LocalWagglersResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// serveMesh serves srv as the MeshService on a loopback port until the
// test ends and returns the address.
func serveMesh(t *testing.T, srv robonetv1.MeshServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	robonetv1.RegisterMeshServiceServer(gs, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

// testConns is a connection cache closed when the test ends.
func testConns(t *testing.T) func(string, string) (grpc.ClientConnInterface, error) {
	t.Helper()
	cc := newConnCache(1<<20, nil)
	t.Cleanup(func() { _ = cc.close() })
	return func(node, addr string) (grpc.ClientConnInterface, error) { return cc.conn(node, addr) }
}

func member(name string, st mesh.MemberStatus, grpcAddr string, caps map[string]int, roles ...mesh.Role) mesh.Member {
	return mesh.Member{NodeMeta: mesh.NodeMeta{Name: name, Roles: roles, Capabilities: caps, GRPCAddr: grpcAddr}, Status: st}
}

// rowLine renders a ListWagglers row for comparisons.
func rowLine(r *robonetv1.WagglerRole) string {
	s := fmt.Sprintf("%s %s@%d %s", r.GetCapability(), r.GetNode(), r.GetEpoch(), r.GetState())
	if r.GetLive() {
		s += fmt.Sprintf(" w%d f%d q%d", r.GetWorkers(), r.GetInFlight(), r.GetQueued())
	}
	return s + " [" + strings.Join(r.GetStandbys(), ",") + "]"
}

// TestListWagglers: roles from the control state on a server, the live
// numbers from each holder (this node's own host, another node over
// gRPC), "unknown" with the reason for a holder that cannot be asked —
// failed, too slow, not reporting, not running the role yet — and the
// standbys from membership.
func TestListWagglers(t *testing.T) {
	// n2 runs the Waggler of code.exec, and an older epoch of gpu.
	n2 := serveMesh(t, &meshAPI{self: "n2", mesh: newFakeMesh(), wagglers: fakeHost{
		{Capability: "code.exec", Epoch: 5, State: wag.StateMonitoring, Queued: 1, Running: 3, Workers: 4, Failovers: 2},
		{Capability: "gpu", Epoch: 1, State: wag.StateIdle},
	}})
	slow := serveMesh(t, hangingMesh{})
	older := serveMesh(t, &robonetv1.UnimplementedMeshServiceServer{})

	fm := newFakeMesh()
	fm.members = []mesh.Member{
		member("s1", mesh.StatusAlive, "127.0.0.1:1", map[string]int{"core": 2, "code.exec": 1}, mesh.RoleServer, mesh.RoleWorker),
		member("n2", mesh.StatusAlive, n2, map[string]int{"code.exec": 4, "gpu": 1, "core": 1}, mesh.RoleWorker),
		member("n3", mesh.StatusSuspect, slow, map[string]int{"net.scan": 2}, mesh.RoleWorker),
		member("n4", mesh.StatusFailed, "127.0.0.1:1", map[string]int{"ai.inference": 1, "core": 3}, mesh.RoleWorker),
		member("n5", mesh.StatusAlive, older, map[string]int{"net.http": 1, "core": 0}, mesh.RoleWorker),
		member("n6", mesh.StatusAlive, "127.0.0.1:1", map[string]int{"video": 1}, mesh.RoleWorker),
	}
	sm := &stateMesh{fakeMesh: fm, state: mesh.ControlState{Wagglers: map[string]mesh.WagglerAssignment{
		"core":         {Node: "s1", Epoch: 3},
		"code.exec":    {Node: "n2", Epoch: 5},
		"gpu":          {Node: "n2", Epoch: 2},
		"net.scan":     {Node: "n3", Epoch: 1},
		"ai.inference": {Node: "n4", Epoch: 7},
		"net.http":     {Node: "n5", Epoch: 1},
		"retired":      {Node: "", Epoch: 9},
	}}}
	api := &meshAPI{self: "s1", mesh: sm, conn: testConns(t), askTimeout: 200 * time.Millisecond,
		wagglers: fakeHost{{Capability: "core", Epoch: 3, State: wag.StateIdle, Workers: 2}}}

	began := time.Now()
	resp, err := api.ListWagglers(context.Background(), &robonetv1.ListWagglersRequest{})
	if err != nil {
		t.Fatalf("ListWagglers: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("took %s: holders are asked at once, each within 200ms", took)
	}
	if resp.GetSource() != "control-state" || resp.GetAnsweredBy() != "s1" {
		t.Errorf("source %q answered by %q", resp.GetSource(), resp.GetAnsweredBy())
	}
	var got []string
	notes := map[string]string{}
	for _, r := range resp.GetWagglers() {
		got = append(got, rowLine(r))
		notes[r.GetCapability()] = r.GetNote()
	}
	want := []string{
		"ai.inference n4@7 unknown []",
		"code.exec n2@5 MONITORING w4 f3 q1 [s1]",
		"core s1@3 IDLE w2 f0 q0 [n2]",
		"gpu n2@2 unknown []",
		"net.http n5@1 unknown []",
		"net.scan n3@1 unknown []",
		"retired @9 unassigned []",
		"video @0 unassigned [n6]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListWagglers:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	for c, want := range map[string]string{
		"ai.inference": "n4 is failed",
		"gpu":          "n2 runs it at epoch 1, not 2",
		"net.http":     "n5 does not report its Wagglers",
		"net.scan":     "n3 did not answer within 200ms",
		"code.exec":    "",
		"retired":      "",
	} {
		if !strings.Contains(notes[c], want) || (want == "" && notes[c] != "") {
			t.Errorf("note of %s: %q, want %q", c, notes[c], want)
		}
	}
	if f := resp.GetWagglers()[1].GetFailovers(); f != 2 {
		t.Errorf("code.exec failovers %d, want 2", f)
	}

	// Roles only (what worker nodes read to follow their Wagglers): the
	// same roles and standbys, no holder asked — not even the slow one.
	began = time.Now()
	resp, err = api.ListWagglers(context.Background(), &robonetv1.ListWagglersRequest{RolesOnly: true})
	if err != nil {
		t.Fatalf("ListWagglers roles only: %v", err)
	}
	if took := time.Since(began); took >= 200*time.Millisecond {
		t.Errorf("roles only took %s: it must not wait for the slow holder", took)
	}
	got = got[:0]
	for _, r := range resp.GetWagglers() {
		got = append(got, rowLine(r))
		if r.GetNode() != "" && r.GetNote() != "not asked (roles only)" {
			t.Errorf("roles only, note of %s: %q", r.GetCapability(), r.GetNote())
		}
	}
	want = []string{
		"ai.inference n4@7 unknown []",
		"code.exec n2@5 unknown [s1]",
		"core s1@3 unknown [n2]",
		"gpu n2@2 unknown []",
		"net.http n5@1 unknown []",
		"net.scan n3@1 unknown []",
		"retired @9 unassigned []",
		"video @0 unassigned [n6]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListWagglers roles only:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// TestListWagglersFromGossip: a worker-only node has no control state; it
// takes each capability's holder from what the members advertise, the
// highest epoch winning, and says so.
func TestListWagglersFromGossip(t *testing.T) {
	fm := newFakeMesh()
	adv := func(m mesh.Member, roles map[string]uint64) mesh.Member {
		m.Wagglers = roles
		return m
	}
	fm.members = []mesh.Member{
		member("w1", mesh.StatusAlive, "127.0.0.1:1", map[string]int{"core": 1}, mesh.RoleWorker),
		adv(member("s1", mesh.StatusAlive, "127.0.0.1:1", map[string]int{"core": 1}, mesh.RoleServer, mesh.RoleWorker), map[string]uint64{"core": 2}),
		adv(member("w2", mesh.StatusAlive, "127.0.0.1:1", map[string]int{"core": 1}, mesh.RoleWorker), map[string]uint64{"core": 4}),
		adv(member("w3", mesh.StatusFailed, "127.0.0.1:1", map[string]int{"core": 1}, mesh.RoleWorker), map[string]uint64{"core": 9}),
	}
	// The node reports nothing and asks nobody: every holder is unknown,
	// the roles still listed.
	api := &meshAPI{self: "w1", mesh: fm}
	resp, err := api.ListWagglers(context.Background(), &robonetv1.ListWagglersRequest{})
	if err != nil {
		t.Fatalf("ListWagglers: %v", err)
	}
	if resp.GetSource() != "gossip" || len(resp.GetWagglers()) != 1 {
		t.Fatalf("source %q, rows %v", resp.GetSource(), resp.GetWagglers())
	}
	if got := rowLine(resp.GetWagglers()[0]); got != "core w2@4 unknown [s1,w1]" {
		t.Fatalf("row %s, want core w2@4 unknown [s1,w1]", got)
	}
	if _, err := api.LocalWagglers(context.Background(), &robonetv1.LocalWagglersRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("LocalWagglers without a host: %v, want UNIMPLEMENTED", err)
	}
}

// TestMeshAPIOfANode: the MeshService of a real node reports its Waggler
// host's live numbers: a single server holds the role of each of its
// capabilities, with its pool's workers registered.
func TestMeshAPIOfANode(t *testing.T) {
	n, err := New(Config{
		Name: "solo", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", HTTPAddr: HTTPDisabled,
		GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Capabilities: map[string]int{"core": 3},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Engine: engine.Config{ClaimInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	api := newMeshAPI(n)
	var last string
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		resp, err := api.ListWagglers(context.Background(), &robonetv1.ListWagglersRequest{})
		if err != nil {
			t.Fatalf("ListWagglers: %v", err)
		}
		if ws := resp.GetWagglers(); len(ws) == 1 {
			last = rowLine(ws[0]) + " (" + ws[0].GetNote() + ")"
			if ws[0].GetLive() && ws[0].GetWorkers() == 3 {
				if ws[0].GetNode() != "solo" || ws[0].GetState() != "IDLE" || resp.GetSource() != "control-state" {
					t.Fatalf("core: %s from %s", last, resp.GetSource())
				}
				break
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("core never showed its 3 workers live; last: %s", last)
		}
	}
	members, err := api.ListMembers(context.Background(), &robonetv1.ListMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var advertised map[string]uint64
	for range 500 { // gossip metadata follows the roles shortly after
		if members.GetMembers()[0].GetWagglers()["core"] > 0 {
			break
		}
		<-tick.C
		members, _ = api.ListMembers(context.Background(), &robonetv1.ListMembersRequest{})
	}
	advertised = members.GetMembers()[0].GetWagglers()
	if advertised["core"] == 0 {
		t.Fatalf("the node does not list the role it advertises: %v", advertised)
	}
}
