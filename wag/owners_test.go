package wag

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// startedHost is a running Waggler host with no workers, stopped at the
// test's end.
func startedHost(t *testing.T) *WagglerHost {
	t.Helper()
	host, err := NewWagglerHost(testConfig(t, newSink(), nil).Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	return host
}

// recUplink records the results a session is sent.
type recUplink struct {
	mu      sync.Mutex
	results []SeqResult
	started []Started
}

func (u *recUplink) Results(rs []SeqResult) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.results = append(u.results, rs...)
	return nil
}
func (u *recUplink) Progress([]port.TaskProgress) {}
func (u *recUplink) Started(ss []Started) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.started = append(u.started, ss...)
}

// instances returns the instances of the results u was sent, in order.
func (u *recUplink) instances() []uuid.UUID {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]uuid.UUID, len(u.results))
	for i, r := range u.results {
		out[i] = r.InstanceID
	}
	return out
}

func (u *recUplink) lastSeq() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.results[len(u.results)-1].Seq
}

// A host serves several owners at once, each for its partitions: results
// go to the owner of their instance's partition and are kept until it
// acknowledges them; a newer epoch takes a partition over with what its
// owner had not acknowledged, and the older owner can no longer dispatch
// or cancel there, nor acknowledge for the new one. A follower's session
// cannot set roles, and a session naming an older epoch is refused.
func TestHostServesOwnersByPartition(t *testing.T) {
	host := startedHost(t)

	const count = 2
	leaderUp, otherUp := &recUplink{}, &recUplink{}
	leader, err := host.OpenOwner(Owner{Term: 3, Count: count, Partitions: map[int]uint64{0: 4}}, leaderUp)
	if err != nil {
		t.Fatal(err)
	}
	other, err := host.OpenOwner(Owner{Term: 3, Follower: true, Count: count, Partitions: map[int]uint64{1: 4}}, otherUp)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetRoles(map[string]uint64{"code.exec": 1}, nil); err == nil {
		t.Fatal("a follower's session set the roles")
	}
	if err := leader.SetRoles(map[string]uint64{"code.exec": 1}, nil); err != nil {
		t.Fatal(err)
	}

	in0, in1 := port.NewIDIn(0, count), port.NewIDIn(1, count)
	result := func(id uuid.UUID) {
		hostUplink{host}.TaskResult(context.Background(), port.TaskResult{AttemptKey: port.AttemptKey{InstanceID: id, ExecutionID: "a", Attempt: 1}, OK: true})
	}
	result(in0)
	result(in1)
	result(in1)
	if got := leaderUp.instances(); !slices.Equal(got, []uuid.UUID{in0}) {
		t.Fatalf("the leader's session got %v, want partition 0's result", got)
	}
	if got := otherUp.instances(); !slices.Equal(got, []uuid.UUID{in1, in1}) {
		t.Fatalf("the other owner's session got %v, want partition 1's two results", got)
	}
	hostUplink{host}.TaskStarted([]Started{{Key: port.AttemptKey{InstanceID: in1, ExecutionID: "a", Attempt: 1}}})
	if len(otherUp.started) != 1 || len(leaderUp.started) != 0 {
		t.Fatalf("starts: leader %d, other %d; want the start at partition 1's owner", len(leaderUp.started), len(otherUp.started))
	}

	// The leader acknowledges everything it was sent: partition 1's
	// results stay kept for their owner.
	leader.Ack(leaderUp.lastSeq() + 10)
	// Partition 1 moves to a new owner before its old owner acknowledged.
	movedUp := &recUplink{}
	moved, err := host.OpenOwner(Owner{Term: 3, Follower: true, Count: count, Partitions: map[int]uint64{1: 5}}, movedUp)
	if err != nil {
		t.Fatal(err)
	}
	if got := movedUp.instances(); !slices.Equal(got, []uuid.UUID{in1, in1}) {
		t.Fatalf("the new owner of partition 1 got %v, want the two results its old owner did not acknowledge", got)
	}
	// The old owner's ack is not the new owner's: nothing is dropped.
	other.Ack(otherUp.lastSeq())
	if n := len(host.pending[1]); n != 2 {
		t.Fatalf("%d results of partition 1 kept after the old owner's ack, want 2", n)
	}
	d := Handoff{TaskDispatch: port.TaskDispatch{AttemptKey: port.AttemptKey{InstanceID: in1, ExecutionID: "b", Attempt: 1}, Capability: "code.exec", Action: "echo"}, Epoch: 1}
	if errs := other.Dispatch([]Handoff{d}); len(errs) != 1 || !errors.Is(errs[0], port.ErrStaleTerm) {
		t.Fatalf("dispatch by partition 1's old owner: %v, want ErrStaleTerm", errs)
	}
	if err := other.Cancel([]port.AttemptKey{d.AttemptKey}); !errors.Is(err, port.ErrStaleTerm) {
		t.Fatalf("cancel by partition 1's old owner: %v, want ErrStaleTerm", err)
	}
	if errs := leader.Dispatch([]Handoff{d}); len(errs) != 1 || !errors.Is(errs[0], port.ErrStaleTerm) {
		t.Fatalf("dispatch by the owner of another partition: %v, want ErrStaleTerm", errs)
	}
	if errs := moved.Dispatch([]Handoff{d}); errs != nil {
		t.Fatalf("dispatch by partition 1's owner: %v", errs)
	}
	moved.Ack(movedUp.lastSeq())
	if n := len(host.pending[1]); n != 0 {
		t.Fatalf("%d results of partition 1 kept after its owner's ack, want 0", n)
	}
	if _, err := host.OpenOwner(Owner{Term: 4, Follower: true, Count: count, Partitions: map[int]uint64{1: 4}}, &recUplink{}); !errors.Is(err, port.ErrStaleTerm) {
		t.Fatalf("a session naming an older epoch of partition 1: %v, want ErrStaleTerm", err)
	}
	if _, err := host.OpenOwner(Owner{Term: 4, Count: 3, Partitions: map[int]uint64{2: 9}}, &recUplink{}); err == nil {
		t.Fatal("a session of another partition count was taken")
	}
}
