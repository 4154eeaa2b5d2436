package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap/zaptest"
)

func applyCmd(t *testing.T, f *fsm, index uint64, c Command) error {
	t.Helper()
	res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: c.Encode()})
	if res == nil {
		return nil
	}
	err, ok := res.(error)
	if !ok {
		t.Fatalf("Apply returned %T, want error or nil", res)
	}
	return err
}

func TestFSMApply(t *testing.T) {
	t.Parallel()
	f := newFSM(zaptest.NewLogger(t))
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

	steps := []struct {
		cmd     Command
		wantErr error
	}{
		{AssignWaggler("code.exec", "n1", 1), nil},
		{AssignWaggler("code.exec", "n2", 1), ErrStaleEpoch}, // equal epoch
		{AssignWaggler("code.exec", "n2", 0), ErrStaleEpoch}, // lower epoch
		{AssignWaggler("code.exec", "n2", 5), nil},           // gaps are fine
		{AssignWaggler("net.scan", "n3", 1), nil},            // epochs are per capability
		{AssignWaggler("", "n3", 9), ErrInvalidCommand},
		{Quarantine("n4", "replayed heartbeats", at, false), nil},
		{Quarantine("n4", "chain broken", at.Add(time.Hour), false), nil}, // keeps since, updates reason
		{Quarantine("n5", "x", at, true), nil},
		{Release("n5"), nil},
		{Release("never-quarantined"), nil},
		{SetSetting("trust.tier", "established"), nil},
		{SetSetting("tmp", "1"), nil},
		{SetSetting("tmp", ""), nil}, // deletes
		{SetSetting("", "v"), ErrInvalidCommand},
		{RegisterAnchor("n1", bytes.Repeat([]byte{1}, 44)), nil},
		{RegisterAnchor("n1", bytes.Repeat([]byte{2}, 44)), nil}, // restarted: replaced
		{RegisterAnchor("n2", []byte{1, 2, 3}), ErrInvalidCommand},
		{RegisterAnchor("", bytes.Repeat([]byte{1}, 44)), ErrInvalidCommand},
	}
	for i, s := range steps {
		err := applyCmd(t, f, uint64(i+1), s.cmd)
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("step %d (type %d): got %v, want %v", i, s.cmd.Type(), err, s.wantErr)
		}
	}
	want := ControlState{
		Wagglers: map[string]WagglerAssignment{
			"code.exec": {Node: "n2", Epoch: 5},
			"net.scan":  {Node: "n3", Epoch: 1},
		},
		Quarantine: map[string]QuarantineEntry{"n4": {Reason: "chain broken", Since: at}},
		Settings:   map[string]string{"trust.tier": "established"},
		Anchors:    map[string][]byte{"n1": bytes.Repeat([]byte{2}, 44)},
		Partitions: map[int]PartitionAssignment{},
	}
	if got := f.State(); !reflect.DeepEqual(got, want) {
		t.Fatalf("state:\n got %+v\nwant %+v", got, want)
	}
	// State is a copy.
	s := f.State()
	s.Settings["x"] = "y"
	if _, ok := f.State().Settings["x"]; ok {
		t.Fatal("State shares its maps with the FSM")
	}
}

// A command of an unknown type that does not say it may be skipped stops
// the node rather than letting its control state diverge.
func TestFSMUnknownCommandStops(t *testing.T) {
	t.Parallel()
	f := newFSM(zaptest.NewLogger(t))
	cmd := RawCommand(72, []byte(`{"from":"the future"}`))
	if err := f.apply(1, cmd.Encode()); !errors.Is(err, ErrUnknownCommand) || !strings.Contains(err.Error(), "upgrade this node") {
		t.Fatalf("apply = %v, want ErrUnknownCommand", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "type 72 at index 2") {
			t.Fatalf("Apply recovered %v, want a panic naming the command", r)
		}
	}()
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: cmd.Encode()})
}

func TestFSMUnknownCommandIgnored(t *testing.T) {
	t.Parallel()
	f := newFSM(zaptest.NewLogger(t))
	if err := applyCmd(t, f, 1, SetSetting("a", "1")); err != nil {
		t.Fatal(err)
	}
	before := f.State()
	if err := applyCmd(t, f, 2, RawCommand(IgnoreUnknown|72, []byte(`{"from":"the future"}`))); err != nil {
		t.Fatalf("unknown command that may be ignored: %v, want ignored", err)
	}
	if got := f.State(); !reflect.DeepEqual(got, before) {
		t.Fatalf("unknown command changed the state: %+v", got)
	}
	if f.unknown.Load() != 1 {
		t.Fatalf("unknown counter = %d, want 1", f.unknown.Load())
	}
	// Log entries that are not commands (configuration, barriers) are no-ops.
	if res := f.Apply(&raft.Log{Index: 3, Type: raft.LogBarrier}); res != nil {
		t.Fatalf("barrier entry: %v", res)
	}
	// Empty and malformed entries are rejected, deterministically.
	if res := f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand}); !errors.Is(res.(error), ErrInvalidCommand) {
		t.Fatalf("empty entry: %v", res)
	}
	if err := applyCmd(t, f, 5, RawCommand(CmdAssignWaggler, []byte("{"))); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("malformed entry: %v", err)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func snapshotBytes(t *testing.T, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

func TestFSMSnapshotRestore(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	cmds := []Command{
		AssignWaggler("ai.inference", "gpu-1", 3), Quarantine("bad", "why", at, false),
		SetSetting("k1", "v1"), SetSetting("k2", "v2"), AssignWaggler("code.exec", "c", 1),
		RegisterAnchor("c", bytes.Repeat([]byte{7}, 44)),
		SetPartitionCount(2), AssignPartitions([]PartitionMove{
			{Partition: 0, Node: "c", Epoch: 4, Term: 3, At: at, Reason: "first placement"},
			{Partition: 1, Node: "gpu-1", Epoch: 4, Term: 3, At: at, Reason: "first placement"},
		}),
	}
	// Two FSMs fed the same commands produce identical snapshots.
	a, b := newFSM(log), newFSM(log)
	for i, c := range cmds {
		_ = applyCmd(t, a, uint64(i+1), c)
		_ = applyCmd(t, b, uint64(i+1), c)
	}
	sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ:\n%s\n%s", sa, sb)
	}

	restored := newFSM(log)
	_ = applyCmd(t, restored, 1, SetSetting("stale", "x")) // replaced by Restore
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sa))); err != nil {
		t.Fatal(err)
	}
	if got, want := restored.State(), a.State(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state:\n got %+v\nwant %+v", got, want)
	}
	if got := restored.State().Quarantine["bad"].Since; !got.Equal(at) {
		t.Fatalf("quarantine since %v, want %v", got, at)
	}
	if !bytes.Equal(snapshotBytes(t, restored), sa) {
		t.Fatal("snapshot of the restored state differs")
	}
	if got := restored.State(); got.PartitionCount != 2 || got.Partitions[1].Node != "gpu-1" || !got.Partitions[1].At.Equal(at) {
		t.Fatalf("restored partitions: %d %+v", got.PartitionCount, got.Partitions)
	}
	// The restored FSM keeps enforcing epochs and the count.
	if err := applyCmd(t, restored, 9, AssignWaggler("ai.inference", "gpu-2", 3)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch after restore: %v", err)
	}
	if err := applyCmd(t, restored, 10, AssignPartitions([]PartitionMove{{Partition: 0, Node: "x", Epoch: 4}})); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale partition epoch after restore: %v", err)
	}
	if err := applyCmd(t, restored, 11, SetPartitionCount(2)); !errors.Is(err, ErrPartitionCountSet) {
		t.Fatalf("count after restore: %v", err)
	}

	if err := restored.Restore(io.NopCloser(bytes.NewReader([]byte(`{"version":99}`)))); err == nil {
		t.Fatal("restoring an unknown snapshot version succeeded")
	}
}

func TestFSMPartitions(t *testing.T) {
	t.Parallel()
	f := newFSM(zaptest.NewLogger(t))
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("X", 3600))
	mv := func(p int, node string, epoch, term uint64) PartitionMove {
		return PartitionMove{Partition: p, Node: node, Epoch: epoch, Term: term, At: at, Reason: "test"}
	}
	steps := []struct {
		name    string
		cmd     Command
		wantErr error
	}{
		{"moves before the count", AssignPartitions([]PartitionMove{mv(0, "a", 2, 1)}), ErrInvalidCommand},
		{"count 0", SetPartitionCount(0), ErrInvalidCommand},
		{"count over the bound", SetPartitionCount(MaxPartitions + 1), ErrInvalidCommand},
		{"count", SetPartitionCount(4), nil},
		{"count again", SetPartitionCount(4), ErrPartitionCountSet},
		{"another count", SetPartitionCount(8), ErrPartitionCountSet},
		{"first moves", AssignPartitions([]PartitionMove{mv(0, "a", 2, 1), mv(1, "b", 2, 1), mv(2, "a", 2, 1)}), nil},
		{"no moves", AssignPartitions(nil), ErrInvalidCommand},
		{"a partition over the count refuses the batch", AssignPartitions([]PartitionMove{mv(3, "b", 2, 1), mv(4, "b", 2, 1)}), ErrInvalidCommand},
		{"a negative partition", AssignPartitions([]PartitionMove{mv(-1, "b", 2, 1)}), ErrInvalidCommand},
		{"a stale epoch refuses the batch", AssignPartitions([]PartitionMove{mv(3, "b", 2, 1), mv(0, "b", 2, 1)}), ErrStaleEpoch},
		{"a lower epoch", AssignPartitions([]PartitionMove{mv(1, "a", 1, 0)}), ErrStaleEpoch},
		{"an epoch not above the term", AssignPartitions([]PartitionMove{mv(3, "b", 5, 5)}), ErrInvalidCommand},
		{"a partition twice", AssignPartitions([]PartitionMove{mv(3, "b", 3, 1), mv(3, "a", 4, 1)}), ErrInvalidCommand},
		{"no node", AssignPartitions([]PartitionMove{mv(3, "", 3, 1)}), ErrInvalidCommand},
		{"a move and a first assignment", AssignPartitions([]PartitionMove{mv(0, "b", 7, 6), mv(3, "b", 7, 6)}), nil},
	}
	for i, s := range steps {
		err := applyCmd(t, f, uint64(i+1), s.cmd)
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.wantErr)
		}
	}
	utc := at.UTC()
	want := map[int]PartitionAssignment{
		0: {Node: "b", Epoch: 7, Term: 6, At: utc, Reason: "test"},
		1: {Node: "b", Epoch: 2, Term: 1, At: utc, Reason: "test"},
		2: {Node: "a", Epoch: 2, Term: 1, At: utc, Reason: "test"},
		3: {Node: "b", Epoch: 7, Term: 6, At: utc, Reason: "test"},
	}
	got := f.State()
	if got.PartitionCount != 4 || !reflect.DeepEqual(got.Partitions, want) {
		t.Fatalf("count %d, partitions\n got %+v\nwant %+v", got.PartitionCount, got.Partitions, want)
	}
	if f.PartitionCount() != 4 {
		t.Fatalf("PartitionCount() = %d", f.PartitionCount())
	}
	// State is a deep copy.
	got.Partitions[0] = PartitionAssignment{Node: "x"}
	if f.State().Partitions[0].Node != "b" {
		t.Fatal("State shares its partitions with the FSM")
	}
	for _, c := range []Command{SetPartitionCount(4), AssignPartitions([]PartitionMove{mv(0, "a", 9, 8)})} {
		if d := c.describe(); !strings.HasPrefix(d, "set-partition-count ") && !strings.HasPrefix(d, "assign-partitions ") {
			t.Fatalf("describe: %s", d)
		}
	}
}

func TestPartitionsOwnedBy(t *testing.T) {
	t.Parallel()
	s := newControlState()
	if got, ok := s.PartitionsOwnedBy("a", 0); ok || got != nil {
		t.Fatalf("no count: %v %v", got, ok)
	}
	s.PartitionCount = 3
	s.Partitions[0] = PartitionAssignment{Node: "a", Epoch: 5, Term: 4}
	s.Partitions[2] = PartitionAssignment{Node: "b", Epoch: 6, Term: 5}
	if _, ok := s.PartitionsOwnedBy("a", 0); ok {
		t.Fatal("complete with partition 1 unassigned")
	}
	s.Partitions[1] = PartitionAssignment{Node: "a", Epoch: 7, Term: 5}
	if got, ok := s.PartitionsOwnedBy("a", 0); !ok || !reflect.DeepEqual(got, map[int]uint64{0: 5, 1: 7}) {
		t.Fatalf("a, any term: %v %v", got, ok)
	}
	if got, ok := s.PartitionsOwnedBy("c", 4); !ok || len(got) != 0 {
		t.Fatalf("c owns none: %v %v", got, ok)
	}
	if _, ok := s.PartitionsOwnedBy("a", 5); ok {
		t.Fatal("complete in term 5 with partition 0 assigned in term 4")
	}
}
