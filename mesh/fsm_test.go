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
	// The restored FSM keeps enforcing epochs.
	if err := applyCmd(t, restored, 9, AssignWaggler("ai.inference", "gpu-2", 3)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch after restore: %v", err)
	}

	if err := restored.Restore(io.NopCloser(bytes.NewReader([]byte(`{"version":99}`)))); err == nil {
		t.Fatal("restoring an unknown snapshot version succeeded")
	}
}
