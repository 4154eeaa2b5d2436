package storeutil

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/robonet/robonet/engine/port"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMergeProgress(t *testing.T) {
	a, b, owner := uuid.New(), uuid.New(), uuid.New()
	later := time.Unix(100, 0)
	batch := []port.Progress{
		{InstanceID: a, Owner: owner, State: []byte("a1"), Results: []port.ActionResult{{ExecutionID: "x", Attempt: 1}}},
		{InstanceID: b, Owner: owner},
		{InstanceID: a, Owner: owner, ScheduledAt: &later, Results: []port.ActionResult{{ExecutionID: "y", Attempt: 1}}},
		{InstanceID: a, Owner: owner, State: []byte("a2")},
	}
	m, err := MergeProgress(batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Items) != 2 || m.Items[0].InstanceID != a || m.Items[1].InstanceID != b {
		t.Fatalf("items = %+v", m.Items)
	}
	got := m.Items[0]
	if string(got.State) != "a2" || got.ScheduledAt != &later || len(got.Results) != 2 ||
		got.Results[0].ExecutionID != "x" || got.Results[1].ExecutionID != "y" {
		t.Fatalf("merged a = %+v", got)
	}
	if len(batch[0].Results) != 1 {
		t.Fatalf("merging modified the caller's results")
	}
	lost := errors.New("lost")
	out := m.Expand([]error{nil, lost})
	if len(out) != 4 || out[0] != nil || !errors.Is(out[1], lost) || out[2] != nil || out[3] != nil {
		t.Fatalf("Expand = %v", out)
	}

	// Consumed signals append; the last park wins.
	p1, p2 := &port.Park{WakeSeen: 1}, &port.Park{WakeSeen: 2}
	uses := []port.SignalUse{{Seq: 1, By: "w#1"}}
	m, err = MergeProgress([]port.Progress{
		{InstanceID: a, Owner: owner, ConsumedSignals: uses, Park: p1},
		{InstanceID: a, Owner: owner, ConsumedSignals: []port.SignalUse{{Seq: 2, By: "w#2"}}, Park: p2},
		{InstanceID: a, Owner: owner},
	})
	if err != nil || len(m.Items) != 1 || m.Items[0].Park != p2 || len(m.Items[0].ConsumedSignals) != 2 || m.Items[0].ConsumedSignals[1].Seq != 2 {
		t.Fatalf("merged parks and signals = %+v, %v", m.Items, err)
	}
	if len(uses) != 1 {
		t.Fatalf("merging modified the caller's consumed signals")
	}

	if _, err := MergeProgress([]port.Progress{{InstanceID: a, Owner: owner}, {InstanceID: a, Owner: uuid.New()}}); err == nil {
		t.Fatalf("two owners for one instance were accepted")
	}
	if _, err := MergeProgress([]port.Progress{{InstanceID: a, Owner: owner, Results: []port.ActionResult{{InstanceID: b, ExecutionID: "x"}}}}); err == nil {
		t.Fatalf("a result filed under another instance was accepted")
	}
}

func TestDuplicateKeys(t *testing.T) {
	in := []port.NewInstance{
		{WorkflowVersionID: 1, IdempotencyKey: "k"},
		{WorkflowVersionID: 1},
		{WorkflowVersionID: 1, IdempotencyKey: "k"},
		{WorkflowVersionID: 1},
	}
	dup, err := DuplicateKeys(in)
	if err != nil || dup[0] != -1 || dup[1] != -1 || dup[2] != 0 || dup[3] != -1 {
		t.Fatalf("DuplicateKeys = %v, %v", dup, err)
	}
	in[2].WorkflowVersionID = 2
	if _, err := DuplicateKeys(in); !errors.Is(err, port.ErrIdempotencyConflict) {
		t.Fatalf("one key for two versions: %v", err)
	}
}

func TestPageToken(t *testing.T) {
	k := PageKey{CreatedAt: time.UnixMicro(1_700_000_000_123_456).UTC(), ID: uuid.New()}
	got, ok, err := DecodePageToken(EncodePageToken(k))
	if err != nil || !ok || got != k {
		t.Fatalf("round trip = %+v, %v, %v; want %+v", got, ok, err, k)
	}
	if _, ok, err := DecodePageToken(""); ok || err != nil {
		t.Fatalf("empty token = %v, %v", ok, err)
	}
	for _, bad := range []string{"!!", "bm90aGluZw", "MTIzL25vdC1hLXV1aWQ"} {
		if _, _, err := DecodePageToken(bad); !errors.Is(err, ErrInvalidPageToken) {
			t.Errorf("DecodePageToken(%q) = %v, want ErrInvalidPageToken", bad, err)
		}
	}
}

func TestPrepareInstances(t *testing.T) {
	now := time.Unix(50, 0)
	in := []port.NewInstance{{WorkflowVersionID: 1}}
	out, err := PrepareInstances(in, now)
	if err != nil || out[0].ID == uuid.Nil || !out[0].ScheduledAt.Equal(now) || out[0].Inputs == nil || out[0].State == nil {
		t.Fatalf("PrepareInstances = %+v, %v", out, err)
	}
	if in[0].ID != uuid.Nil {
		t.Fatalf("PrepareInstances modified its input")
	}
	id := uuid.New()
	if _, err := PrepareInstances([]port.NewInstance{{ID: id, WorkflowVersionID: 1}, {ID: id, WorkflowVersionID: 1}}, now); err == nil {
		t.Fatalf("a duplicate id was accepted")
	}
	if _, err := PrepareInstances([]port.NewInstance{{}}, now); err == nil {
		t.Fatalf("a missing workflow version was accepted")
	}
}

func TestJudgeFence(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	at := func(owner uuid.UUID, epoch uint64) *port.PartitionOwner {
		return &port.PartitionOwner{Partition: 3, Owner: owner, Epoch: epoch}
	}
	for _, tc := range []struct {
		name   string
		stored *port.PartitionOwner
		owner  uuid.UUID
		epoch  uint64
		want   FenceAction
	}{
		{"no row", nil, a, 0, FenceTake},
		{"a lower epoch of another", at(b, 4), a, 5, FenceTake},
		{"a lower epoch of its own", at(a, 4), a, 5, FenceTake},
		{"its own epoch again", at(a, 5), a, 5, FenceKeep},
		{"another's epoch", at(b, 5), a, 5, FenceStale},
		{"a higher epoch of another", at(b, 6), a, 5, FenceStale},
		{"a higher epoch of its own", at(a, 6), a, 5, FenceStale},
	} {
		if got := JudgeFence(tc.stored, tc.owner, tc.epoch); got != tc.want {
			t.Errorf("%s: JudgeFence = %d, want %d", tc.name, got, tc.want)
		}
	}
	if err := ErrStaleEpoch(*at(b, 6), 5); !errors.Is(err, port.ErrStaleEpoch) {
		t.Errorf("ErrStaleEpoch does not wrap port.ErrStaleEpoch: %v", err)
	}
}

func TestCheckFence(t *testing.T) {
	owner := uuid.New()
	parts, err := CheckFence(port.FenceRequest{Owner: owner, Epochs: map[int]uint64{9: 1, 0: 2, port.MaxPartitions - 1: 3, 4: 4}})
	if err != nil || len(parts) != 4 || parts[0] != 0 || parts[1] != 4 || parts[2] != 9 || parts[3] != port.MaxPartitions-1 {
		t.Fatalf("CheckFence = %v, %v; want the partitions in order", parts, err)
	}
	if parts, err := CheckFence(port.FenceRequest{Owner: owner}); err != nil || len(parts) != 0 {
		t.Fatalf("CheckFence of nothing = %v, %v", parts, err)
	}
	for _, bad := range []port.FenceRequest{
		{Epochs: map[int]uint64{1: 1}},
		{Owner: owner, Epochs: map[int]uint64{-1: 1}},
		{Owner: owner, Epochs: map[int]uint64{port.MaxPartitions: 1}},
		{Owner: owner, Epochs: map[int]uint64{1: 1 << 63}},
	} {
		if _, err := CheckFence(bad); err == nil {
			t.Errorf("CheckFence(%+v) accepted it", bad)
		}
	}
	if err := CheckClaim(port.ClaimRequest{Owner: owner, Lease: time.Second, Limit: 1, Partitions: []int{0, port.MaxPartitions}}); err == nil {
		t.Errorf("CheckClaim accepted a partition beyond MaxPartitions")
	}
	if _, err := PrepareInstances([]port.NewInstance{{WorkflowVersionID: 1, Partition: -1}}, time.Now()); err == nil {
		t.Errorf("PrepareInstances accepted partition -1")
	}
}
