package mesh

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap/zaptest"
)

func TestLeaderBroadcastCoalesces(t *testing.T) {
	t.Parallel()
	b := newLeaderBroadcast()
	b.publish(Leadership{Leader: "a", Term: 1})
	ch, cancel := b.subscribe()
	if got := <-ch; got.Leader != "a" {
		t.Fatalf("first value %+v, want the current one", got)
	}
	// A reader that does not keep up sees only the latest value.
	for term := uint64(2); term <= 100; term++ {
		b.publish(Leadership{IsLeader: term%2 == 0, Leader: "b", Term: term})
	}
	if got := <-ch; got.Term != 100 || !got.IsLeader {
		t.Fatalf("after a burst got %+v, want term 100", got)
	}
	select {
	case got := <-ch:
		t.Fatalf("unexpected extra value %+v", got)
	default:
	}
	if b.publish(Leadership{IsLeader: true, Leader: "b", Term: 100}) {
		t.Fatal("publishing the same value reported a change")
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel open after cancel")
	}
	cancel() // idempotent
	ch2, _ := b.subscribe()
	b.close()
	<-ch2
	if _, ok := <-ch2; ok {
		t.Fatal("channel open after close")
	}
}

// startSingle starts a single server (bootstrap-expect 1) on dir and
// waits until it leads with its partitions placed.
func startSingle(t *testing.T, dir string) *Mesh { return startSingleWith(t, dir, nil) }

// startSingleWith is startSingle with the configuration adjusted by
// configure.
func startSingleWith(t *testing.T, dir string, configure func(*Config)) *Mesh {
	t.Helper()
	cfg := TestConfig("solo")
	cfg.Server = true
	cfg.BootstrapExpect = 1
	cfg.DataDir = dir
	cfg.Logger = zaptest.NewLogger(t)
	cfg.ManualWagglers = true // the tests apply roles by hand
	if configure != nil {
		configure(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ch, stop := m.Leadership()
	defer stop()
	for {
		select {
		case l := <-ch:
			if !l.IsLeader {
				continue
			}
			if err := m.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			// Wait for the partitions of this term, so that the tests
			// see a state the reconciler leaves alone.
			for {
				changed := m.StateChanged()
				if _, ok := m.State().PartitionsOwnedBy("solo", l.Term); ok {
					return m
				}
				select {
				case <-changed:
				case <-ctx.Done():
					t.Fatal("partitions not placed on the single server")
				}
			}
		case <-ctx.Done():
			t.Fatal("single server did not become leader")
		}
	}
}

// TestSingleServerSnapshotAndRestart applies commands, takes a Raft
// snapshot, applies more, crashes and restarts from the data dir: the
// state comes back from the snapshot plus the log, and the server never
// bootstraps twice.
func TestSingleServerSnapshotAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	m := startSingle(t, dir)
	term1 := m.Leader().Term
	for _, c := range []Command{AssignWaggler("code.exec", "solo", 1), SetSetting("a", "1")} {
		if err := m.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := m.Apply(ctx, SetSetting("b", "2")); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, AssignWaggler("code.exec", "other", 1)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	want := m.State()
	if err := m.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx); err != nil { // after Halt: the same result
		t.Fatal(err)
	}
	if err := m.Apply(ctx, SetSetting("c", "3")); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Apply after stop: %v", err)
	}

	m2 := startSingle(t, dir)
	defer func() {
		if err := m2.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	if !m2.hasState {
		t.Fatal("restarted server did not find its raft state")
	}
	term2 := m2.Leader().Term
	if term2 <= term1 {
		t.Fatalf("term after restart %d, want > %d", term2, term1)
	}
	// The partitions were re-assigned in the new term, at higher epochs.
	got := m2.State()
	owned, ok := got.PartitionsOwnedBy("solo", term2)
	if !ok || len(owned) != DefaultPartitions {
		t.Fatalf("partitions after restart: %+v", got.Partitions)
	}
	for p, epoch := range owned {
		if epoch <= want.Partitions[p].Epoch || epoch <= term2 {
			t.Fatalf("partition %d at epoch %d after restart, before %d, term %d", p, epoch, want.Partitions[p].Epoch, term2)
		}
	}
	got.Partitions, want.Partitions = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state after restart:\n got %+v\nwant %+v", got, want)
	}
	if conf := m2.RaftConfiguration(); len(conf) != 1 || conf[0].Name != "solo" || !conf[0].Voter {
		t.Fatalf("configuration after restart: %+v", conf)
	}
}

// futureFunc is a raft.Future answered by a function.
type futureFunc func() error

func (f futureFunc) Error() error { return f() }

// TestHaltAnswersAdmittedCalls halts a leader while a call it admitted
// still waits for its Raft future, as a caller whose context ended leaves
// it. Raft answers a committed command from its state machine's loop,
// which a shutdown can end with the command still queued (hashicorp/raft's
// runFSM); the future here is answered the same way, only while Raft runs.
// The halt must let the call finish before it shuts Raft down, or it
// waits for the call for ever.
func TestHaltAnswersAdmittedCalls(t *testing.T) {
	t.Parallel()
	m := startSingle(t, t.TempDir())
	r, err := m.raftOrErr()
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // queued behind other work
		if r.State() != raft.Shutdown {
			answer <- nil
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller gives up at once; its command is still pending
	err = m.await(ctx, futureFunc(func() error { return <-answer }))
	m.calls.Done()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("await with an ended context: %v", err)
	}
	halted := make(chan error, 1)
	go func() { halted <- m.Halt() }()
	select {
	case err := <-halted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		answer <- errors.New("never answered") // let the waiter go
		<-halted
		t.Fatal("Halt shut Raft down before an admitted call's future was answered, and waited for it for ever")
	}
}
