package engine_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
)

// Instance ids sort in the order they were made (their tables' B-trees
// grow at one edge) and still spread evenly over the shards.
func TestNewInstanceIDsSortByCreationAndSpreadOverShards(t *testing.T) {
	const n = 8192
	before := time.Now().Add(-time.Millisecond)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = engine.NewInstanceID()
	}
	after := time.Now().Add(time.Millisecond)
	for i, id := range ids {
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("id %s: version %d, variant %s; want version 7, RFC 4122", id, id.Version(), id.Variant())
		}
		if at := time.Unix(id.Time().UnixTime()); at.Before(before) || at.After(after) {
			t.Fatalf("id %s carries the time %s, made between %s and %s", id, at, before, after)
		}
		if i > 0 && bytes.Compare(ids[i-1][:], id[:]) >= 0 {
			t.Fatalf("id %d (%s) does not sort after id %d (%s)", i, id, i-1, ids[i-1])
		}
	}
	for _, shards := range []int{2, 3, 4, 8, 16} {
		count := make([]int, shards)
		for _, id := range ids {
			count[engine.ShardIndex(id, shards)]++
		}
		// A binomial count's standard deviation is below √(n/shards):
		// 5 of them is a bound a fair spread fails about once in 10⁶ runs.
		mean := n / shards
		for s, c := range count {
			if d := c - mean; d*d > 25*mean {
				t.Errorf("%d shards: shard %d owns %d ids, the mean is %d: %v", shards, s, c, mean, count)
			}
		}
	}
}
