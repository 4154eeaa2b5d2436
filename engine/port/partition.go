package port

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/google/uuid"
)

// MaxPartitions bounds a mesh's partition count: a partition is read from
// the first 16 bits of an instance id.
const MaxPartitions = 1024

// PartitionOf returns the partition of the instance id in a mesh of count
// partitions: the id's first two bytes, big-endian, modulo count. Any node
// derives it without a lookup, so it routes a call about an instance to the
// partition's owner in one hop. A count below 2 has one partition, 0, which
// every id (those minted before partitions existed included) belongs to.
func PartitionOf(id uuid.UUID, count int) int {
	if count < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(id[:2])) % count
}

// NewIDIn mints a random (version 4) instance id of partition p in a mesh of
// count partitions. The first 16 bits are p plus a random multiple of count
// (so ids of one partition do not share a visible prefix, and a prefix a
// user types still narrows a search); the rest is random as uuid.New's.
func NewIDIn(p, count int) uuid.UUID {
	id := uuid.New()
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	placeIn(&id, p, count, binary.BigEndian.Uint16(b[:]))
	return id
}

// ChildID is the id of the child instance that attempt of a task whose
// body is a workflow starts: a name-based (version 5) id derived from the
// attempt, so that a replay, or the same attempt dispatched again by the
// engine that takes the parent over, names the same child; and in the
// parent's partition of a mesh of count partitions, so that a parent and
// its children always have one owner.
func ChildID(attempt AttemptKey, count int) uuid.UUID {
	id := uuid.NewSHA1(attempt.InstanceID, []byte(attempt.ExecutionID+"#"+itoa(attempt.Attempt)))
	placeIn(&id, PartitionOf(attempt.InstanceID, count), count, binary.BigEndian.Uint16(id[:2]))
	return id
}

// placeIn sets the first 16 bits of id to partition p of a mesh of count
// partitions: p plus a multiple of count picked by r (so ids of one
// partition do not share a visible prefix). A count below 2 leaves id as
// it is.
func placeIn(id *uuid.UUID, p, count int, r uint16) {
	if count < 2 {
		return
	}
	span := (65536 - p + count - 1) / count // multiples k with p+k·count < 65536
	k := int(r) % span
	binary.BigEndian.PutUint16(id[:2], uint16(p+k*count))
}
