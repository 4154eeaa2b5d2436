package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/mesh/meshtest"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// gatedSpec is failoverSpec with a gate: when inputs.gate names a file,
// inc waits for that file to exist, so the test decides when the instance
// may finish; with an empty gate it runs like failoverSpec.
var gatedSpec = testdataSpec("gated.yaml")

// withNetwork routes every node's outgoing gossip and Raft traffic through
// net (mesh.Config.Interceptor), so that the test can partition the mesh.
// Call registerWith once the mesh runs so that net knows whose addresses
// they are.
func withNetwork(net *meshtest.Network) meshOption {
	return func(cfg *node.Config) { cfg.Mesh.Interceptor = net.Interceptor(cfg.Name) }
}

// registerWith tells net which gossip and Raft addresses belong to which
// node: each node's own gossip address and the Raft address it advertises.
func (m *testMesh) registerWith(net *meshtest.Network) {
	m.t.Helper()
	for _, n := range m.nodes {
		i := slices.IndexFunc(n.node.Members(), func(mem mesh.Member) bool { return mem.Name == n.name })
		if i < 0 {
			m.t.Fatalf("%s does not list itself among the members", n.name)
		}
		raftAddr := n.node.Members()[i].RaftAddr
		if n.server && raftAddr == "" {
			m.t.Fatalf("server %s advertises no Raft address", n.name)
		}
		net.Register(n.name, n.node.GossipAddr(), raftAddr)
	}
}

// waitLeaderAmong waits until one of nodes runs its engine and every one
// of them names it leader, and returns it.
func waitLeaderAmong(t *testing.T, nodes []*meshNode, timeout time.Duration) *meshNode {
	t.Helper()
	var l *meshNode
	eventually(t, timeout, "an engine leader the majority agrees on", func() bool {
		l = nil
		for _, n := range nodes {
			if n.node.Term() > 0 {
				l = n
			}
		}
		if l == nil {
			return false
		}
		for _, n := range nodes {
			if n.node.Leadership().Leader != l.name {
				return false
			}
		}
		return true
	})
	return l
}

// lease is the lease on an instance's queue row.
type lease struct {
	owner     uuid.UUID // uuid.Nil: not leased
	term      uint64
	scheduled time.Time
}

// leaseReader reads leases straight from the Postgres schema: the Store
// interface has no read of them, and a node does not expose the owner id
// of its engine.
type leaseReader struct {
	t     *testing.T
	conn  *pgx.Conn
	table string
}

func openLeaseReader(t *testing.T, dsn, schema string) *leaseReader {
	t.Helper()
	conn, err := pgx.Connect(ctxFor(t, 10*time.Second), dsn)
	if err != nil {
		t.Fatalf("connecting to Postgres: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(ctxFor(t, 10*time.Second)) })
	return &leaseReader{t: t, conn: conn, table: pgx.Identifier{schema, "queued_instances"}.Sanitize()}
}

// get returns the lease on id; false when id has no queue row (it
// finished).
func (r *leaseReader) get(id uuid.UUID) (lease, bool) {
	r.t.Helper()
	var (
		owner pgtype.UUID
		term  int64
		l     lease
	)
	err := r.conn.QueryRow(ctxFor(r.t, 10*time.Second),
		"SELECT lock_uuid, term, scheduled_at FROM "+r.table+" WHERE instance_id = $1", id).Scan(&owner, &term, &l.scheduled)
	if errors.Is(err, pgx.ErrNoRows) {
		return lease{}, false
	}
	if err != nil {
		r.t.Fatalf("reading the lease on %s: %v", id, err)
	}
	if owner.Valid {
		l.owner = owner.Bytes
	}
	l.term = uint64(term) //nolint:gosec // terms are positive
	return l, true
}

// heldBy counts the queue rows leased to owner.
func (r *leaseReader) heldBy(owner uuid.UUID) int {
	r.t.Helper()
	var n int
	if err := r.conn.QueryRow(ctxFor(r.t, 10*time.Second),
		"SELECT count(*) FROM "+r.table+" WHERE lock_uuid = $1", owner).Scan(&n); err != nil {
		r.t.Fatalf("counting the leases of %s: %v", owner, err)
	}
	return n
}

// TestMeshMinorityLeaderStopsWriting: three servers on one Postgres run 20
// workflows; the leader is cut off from the other two (gossip and Raft)
// while they run. The isolated leader steps down and abandons its engine;
// the majority elects a leader in a higher term whose engine takes the
// instances over; writes made with the old engine's owner id and term —
// which can still reach the store — are refused with ErrOwnershipLost and
// write nothing; every workflow completes once with the right outputs; and
// after the partition heals the old leader follows the one leader.
//
// One instance's second task waits for a gate file, so that the instance is
// certainly still running under the new leader when the stale writes are
// made.
func TestMeshMinorityLeaderStopsWriting(t *testing.T) {
	net := meshtest.NewNetwork()
	m := startMesh(t, 3, 0, withNetwork(net))
	m.registerWith(net)
	t.Cleanup(net.Heal) // before the nodes stop: they leave gracefully

	api := m.follower().api // it forwards to the leader of the day

	s, err := postgres.Open(ctxFor(t, 10*time.Second), postgres.Config{DSN: m.dsn, Schema: m.schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	leases := openLeaseReader(t, m.dsn, m.schema)

	gate := filepath.Join(t.TempDir(), "gate")
	openGate := func() {
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Errorf("opening the gate: %v", err)
		}
	}
	t.Cleanup(openGate) // the gated task ends before the nodes stop, whatever happened

	const count = 20
	ids := make([]string, count)
	for i := range ids {
		g := ""
		if i == 0 {
			g = gate
		}
		inputs, err := json.Marshal(map[string]any{"n": i, "gate": g})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = submitSpec(t, api, gatedSpec, string(inputs))
	}
	probe := uuid.MustParse(ids[0]) // gated: still running until openGate

	// Before the partition: the leader's engine holds the probe under its
	// term (the engine of that term, hence oldOwner, runs on old), and
	// some, not all, workflows completed.
	var (
		old      *meshNode
		oldTerm  uint64
		oldOwner uuid.UUID
		done     int
	)
	eventually(t, 30*time.Second, "the leader to lease the instances and complete some", func() bool {
		if old = m.leader(); old == nil {
			return false // an election (a loaded machine): wait for its outcome
		}
		oldTerm = old.node.Term()
		l, ok := leases.get(probe)
		if !ok {
			t.Fatalf("the gated instance %s finished before its gate opened", probe)
		}
		if l.owner == uuid.Nil || l.term != oldTerm {
			return false
		}
		oldOwner = l.owner
		resp, err := api.ListInstances(ctxFor(t, 10*time.Second), &robonetv1.ListInstancesRequest{
			States: []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_COMPLETE}, PageSize: count,
		})
		if err != nil {
			t.Fatalf("ListInstances: %v", err)
		}
		done = len(resp.GetInstances())
		return done >= 3
	})
	var majority []*meshNode
	for _, n := range m.nodes {
		if n != old {
			majority = append(majority, n)
		}
	}

	net.Partition([]string{old.name})
	cut := time.Now()
	t.Logf("partitioned the leader %s (term %d, engine owner %s) from the others with %d of %d workflows complete",
		old.name, oldTerm, oldOwner, done, count)

	// 1. The isolated leader steps down and abandons its engine: no engine
	// runs there (the leader loop unpublishes it only after Abandon).
	eventually(t, 20*time.Second, "the isolated leader to step down and abandon its engine", func() bool {
		if old.node.Leadership().IsLeader || old.node.Term() != 0 {
			return false
		}
		resp, err := old.mesh.GetLeader(ctxFor(t, 10*time.Second), &robonetv1.GetLeaderRequest{})
		if err != nil {
			t.Fatalf("%s: GetLeader: %v", old.name, err)
		}
		return resp.GetName() != old.name
	})
	t.Logf("%s stepped down after %s", old.name, time.Since(cut).Round(time.Millisecond))

	// 2. The majority elects a leader in a higher term.
	second := waitLeaderAmong(t, majority, 20*time.Second)
	newTerm := second.node.Term()
	t.Logf("%s leads in term %d after %s", second.name, newTerm, time.Since(cut).Round(time.Millisecond))
	if newTerm <= oldTerm {
		t.Fatalf("the new term %d is not above the old one (%d)", newTerm, oldTerm)
	}

	// Its engine takes the instances over: nothing is leased to the old
	// engine any more, and the probe's first task is recorded (so nothing
	// writes the probe until the gate opens).
	var (
		newOwner  uuid.UUID
		leaseTerm uint64 // newTerm, unless the majority elected again meanwhile
	)
	eventually(t, 20*time.Second, "the new leader's engine to take the instances over", func() bool {
		l, ok := leases.get(probe)
		if !ok {
			t.Fatalf("the gated instance %s finished before its gate opened", probe)
		}
		if l.owner == uuid.Nil || l.owner == oldOwner || l.term <= oldTerm {
			return false
		}
		newOwner, leaseTerm = l.owner, l.term
		if leases.heldBy(oldOwner) != 0 {
			return false
		}
		h, err := s.TaskHistory(ctxFor(t, 10*time.Second), probe)
		if err != nil {
			t.Fatalf("TaskHistory: %v", err)
		}
		return slices.ContainsFunc(h, func(r port.ActionResult) bool { return r.ExecutionID == "double" && r.OK })
	})
	t.Logf("engine %s of term %d holds every live instance after %s", newOwner, leaseTerm, time.Since(cut).Round(time.Millisecond))

	// 4. The old engine's writes are refused and write nothing, although the
	// old leader still reaches the store.
	checkStaleWritesRefused(t, s, leases, probe, oldOwner, oldTerm, newOwner, leaseTerm)
	if old.node.Leadership().IsLeader || old.node.Term() != 0 {
		t.Fatalf("%s leads again while it is cut off", old.name)
	}

	// 3. Every workflow completes with the right outputs, every task
	// completion recorded once.
	openGate()
	var wg sync.WaitGroup
	results := make([]*robonetv1.Instance, count)
	for i, id := range ids {
		wg.Go(func() { results[i] = waitDoneT(t, second.api, id, 30*time.Second) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, in := range results {
		wantOutputs(t, in, fmt.Sprintf(`{"v": %d}`, 2*i+1))
	}
	for _, id := range ids {
		checkHistory(t, s, id, 2)
	}
	t.Logf("all %d workflows completed %s after the partition", count, time.Since(cut).Round(time.Millisecond))
	if leases.heldBy(oldOwner) != 0 {
		t.Errorf("the old engine %s holds leases again", oldOwner)
	}

	// 5. After the heal, the old leader follows the one leader and is a
	// voter again, its engine off; a workflow submitted there runs. The
	// majority noticed it was gone first, so it really rejoins.
	eventually(t, 20*time.Second, "the majority to see "+old.name+" gone", func() bool {
		for _, mem := range second.node.Members() {
			if mem.Name == old.name {
				return mem.Status != mesh.StatusAlive
			}
		}
		return true
	})
	net.Heal()
	healed := time.Now()
	final := m.waitLeader("", 30*time.Second)
	if final == old {
		t.Fatalf("%s, whose log is behind, leads again after the heal", old.name)
	}
	if final.node.Term() < newTerm {
		t.Fatalf("the leader after the heal has term %d, below %d", final.node.Term(), newTerm)
	}
	eventually(t, 30*time.Second, old.name+" to be an alive voter again", func() bool {
		for _, mem := range final.node.Members() {
			if mem.Name == old.name {
				return mem.Status == mesh.StatusAlive && mem.Voter
			}
		}
		return false
	})
	if old.node.Term() != 0 || old.node.Leadership().IsLeader {
		t.Fatalf("%s runs an engine after the heal; %s leads", old.name, final.name)
	}
	t.Logf("healed: %s leads in term %d, %s follows, after %s", final.name, final.node.Term(), old.name,
		time.Since(healed).Round(time.Millisecond))
	in := waitDone(t, old.api, submitSpec(t, old.api, gatedSpec, `{"n": 100, "gate": ""}`), 30*time.Second)
	wantOutputs(t, in, `{"v": 201}`)
}

// checkStaleWritesRefused makes the writes a deposed engine (oldOwner,
// oldTerm) could still attempt on probe, now leased to newOwner in
// newTerm, and checks that each is refused and changes nothing. The same
// gate accepts the current owner, so the refusals are the fence at work.
func checkStaleWritesRefused(t *testing.T, s port.Store, leases *leaseReader, probe, oldOwner uuid.UUID, oldTerm uint64,
	newOwner uuid.UUID, newTerm uint64) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	before, err := s.TaskHistory(ctx, probe)
	if err != nil {
		t.Fatalf("TaskHistory: %v", err)
	}
	now := time.Now()
	later := now.Add(time.Hour)
	stale := func(attempt uint32) []port.ActionResult {
		return []port.ActionResult{{ExecutionID: "inc", Attempt: attempt, OK: true, Output: []byte("666"),
			WorkerID: "stale-leader", StartedAt: now, FinishedAt: now}}
	}

	errs, err := s.PersistProgress(ctx, []port.Progress{{InstanceID: probe, Owner: oldOwner, Results: stale(98),
		ScheduledAt: &later}})
	if err != nil {
		t.Fatalf("stale PersistProgress: %v", err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], port.ErrOwnershipLost) {
		t.Errorf("stale PersistProgress: %v, want ErrOwnershipLost", errs)
	}
	errs, err = s.CompleteInstances(ctx, []port.Completion{{InstanceID: probe, Owner: oldOwner,
		Status: port.StateComplete, Results: stale(99), Output: []byte(`{"v": 666}`)}})
	if err != nil {
		t.Fatalf("stale CompleteInstances: %v", err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], port.ErrOwnershipLost) {
		t.Errorf("stale CompleteInstances: %v, want ErrOwnershipLost", errs)
	}
	st, err := s.RefreshLeases(ctx, port.LeaseRefresh{Owner: oldOwner, Term: oldTerm, Lease: time.Hour, IDs: []uuid.UUID{probe}})
	if err != nil {
		t.Fatalf("stale RefreshLeases: %v", err)
	}
	if !slices.Contains(st.Lost, probe) {
		t.Errorf("stale RefreshLeases kept the lease: %+v", st)
	}
	claimed, err := s.ClaimInstances(ctx, port.ClaimRequest{Owner: oldOwner, Term: oldTerm, Lease: time.Hour, Limit: 100})
	if err != nil {
		t.Fatalf("stale ClaimInstances: %v", err)
	}
	if len(claimed) != 0 {
		t.Errorf("a claim in the old term %d took %d instances leased in term %d", oldTerm, len(claimed), newTerm)
	}

	// Nothing of it was written.
	after, err := s.TaskHistory(ctx, probe)
	if err != nil {
		t.Fatalf("TaskHistory: %v", err)
	}
	if !slices.EqualFunc(before, after, func(a, b port.ActionResult) bool {
		return a.ExecutionID == b.ExecutionID && a.Attempt == b.Attempt && a.OK == b.OK && a.WorkerID == b.WorkerID
	}) {
		t.Errorf("the stale writes changed the task history:\nbefore %+v\nafter  %+v", before, after)
	}
	rec, err := s.GetInstance(ctx, probe)
	if err != nil {
		t.Fatalf("GetInstance: %v", err)
	}
	if rec.Status.Terminal() || len(rec.Output) != 0 {
		t.Errorf("the stale completion was written: status %s, output %s", rec.Status, rec.Output)
	}
	l, ok := leases.get(probe)
	switch {
	case !ok:
		t.Errorf("the stale completion dequeued the instance")
	case l.owner != newOwner:
		t.Errorf("the instance is leased to %s after the stale writes, want %s", l.owner, newOwner)
	case !l.scheduled.Before(later.Add(-time.Minute)):
		t.Errorf("the stale progress rescheduled the instance to %s", l.scheduled)
	}

	// The control: the same gate lets the current owner through.
	errs, err = s.PersistProgress(ctx, []port.Progress{{InstanceID: probe, Owner: newOwner}})
	if err != nil || len(errs) != 1 || errs[0] != nil {
		t.Errorf("PersistProgress as the current owner: %v %v, want success", errs, err)
	}
	st, err = s.RefreshLeases(ctx, port.LeaseRefresh{Owner: newOwner, Term: newTerm, Lease: 5 * time.Second, IDs: []uuid.UUID{probe}})
	if err != nil || len(st.Lost) != 0 {
		t.Errorf("RefreshLeases as the current owner: %+v %v, want the lease kept", st, err)
	}
}
