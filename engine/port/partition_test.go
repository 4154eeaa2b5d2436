package port

import (
	"testing"

	"github.com/google/uuid"
)

func TestNewIDInLandsInItsPartition(t *testing.T) {
	for _, count := range []int{1, 2, 3, 7, 16, 1000, MaxPartitions} {
		for p := range min(count, 40) {
			seen := map[uint16]bool{}
			for range 50 {
				id := NewIDIn(p, count)
				if got := PartitionOf(id, count); got != p {
					t.Fatalf("count %d: NewIDIn(%d) = %s is in partition %d", count, p, id, got)
				}
				if id.Version() != 4 || id.Variant() != uuid.RFC4122 {
					t.Fatalf("NewIDIn(%d, %d) = %s is not a version 4 UUID", p, count, id)
				}
				seen[uint16(id[0])<<8|uint16(id[1])] = true
			}
			if count <= 16 && len(seen) < 10 {
				t.Fatalf("count %d partition %d: 50 ids share %d prefixes: the prefix is not random", count, p, len(seen))
			}
		}
	}
}

func TestPartitionOfOneIsZero(t *testing.T) {
	for range 100 {
		if p := PartitionOf(uuid.New(), 1); p != 0 {
			t.Fatalf("PartitionOf(_, 1) = %d", p)
		}
		if p := PartitionOf(uuid.New(), 0); p != 0 {
			t.Fatalf("PartitionOf(_, 0) = %d", p)
		}
	}
}

// A child's id is its parent's attempt's: the same for the same attempt,
// another for another attempt or execution, always in the parent's
// partition, and a version 5 UUID.
func TestChildIDIsTheAttemptsInTheParentsPartition(t *testing.T) {
	for _, count := range []int{0, 1, 2, 7, 16, MaxPartitions} {
		for range 50 {
			parent := NewIDIn(int(uuid.New()[0])%max(count, 1), count)
			key := AttemptKey{InstanceID: parent, ExecutionID: "scan[3]", Attempt: 2}
			id := ChildID(key, count)
			if got, want := PartitionOf(id, count), PartitionOf(parent, count); got != want {
				t.Fatalf("count %d: child %s is in partition %d, its parent %s in %d", count, id, got, parent, want)
			}
			if id != ChildID(key, count) {
				t.Fatal("the same attempt names two children")
			}
			if id.Version() != 5 || id.Variant() != uuid.RFC4122 || id == parent {
				t.Fatalf("ChildID = %s", id)
			}
			for _, other := range []AttemptKey{{parent, "scan[3]", 3}, {parent, "scan[4]", 2}, {uuid.New(), "scan[3]", 2}} {
				if ChildID(other, count) == id {
					t.Fatalf("%+v and %+v name the same child", key, other)
				}
			}
		}
	}
}
