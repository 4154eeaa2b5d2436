package mesh_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/mesh/meshtest"
)

// ownership returns how many partitions each server owns in s.
func ownership(s mesh.ControlState) map[string]int {
	out := map[string]int{}
	for _, a := range s.Partitions {
		out[a.Node]++
	}
	return out
}

// TestPartitionsOnTheLeader: with leader placement, the leader of a new
// mesh sets the configured count and owns every partition at epochs above
// its term; after it dies, the next leader owns them all at higher epochs.
func TestPartitionsOnTheLeader(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 0, meshtest.WithConfig(func(c *mesh.Config) {
		c.Partitions, c.PartitionsSet = 8, true
		c.PartitionPlacement = mesh.PlaceOnLeader
	}))
	leader, term := c.WaitForLeader(wait)
	var first map[int]uint64
	meshtest.Eventually(t, wait, "every partition on "+leader, func() bool {
		var ok bool
		first, ok = c.Mesh(leader).State().PartitionsOwnedBy(leader, term)
		return ok && len(first) == 8
	})
	for p, e := range first {
		if e <= term {
			t.Fatalf("partition %d at epoch %d in term %d", p, e, term)
		}
	}
	meshtest.Eventually(t, wait, "every server to see the count and the owners", func() bool {
		for _, name := range c.Running(true) {
			m := c.Mesh(name)
			if m.PartitionCount() != 8 || m.CheckPartitions() != nil {
				return false
			}
			if owned, ok := m.State().PartitionsOwnedBy(leader, term); !ok || len(owned) != 8 {
				return false
			}
		}
		return true
	})

	c.Kill(leader)
	next, nextTerm := c.WaitForLeader(wait)
	meshtest.Eventually(t, wait, "every partition on "+next, func() bool {
		owned, ok := c.Mesh(next).State().PartitionsOwnedBy(next, nextTerm)
		if !ok || len(owned) != 8 {
			return false
		}
		for p, e := range owned {
			if e <= first[p] || e <= nextTerm {
				t.Fatalf("partition %d at epoch %d in term %d, before %d", p, e, nextTerm, first[p])
			}
		}
		return true
	})
	s := c.Mesh(next).State()
	if s.PartitionCount != 8 {
		t.Fatalf("count %d after failover", s.PartitionCount)
	}
	for p, a := range s.Partitions {
		if a.Term != nextTerm || !strings.Contains(a.Reason, leader) {
			t.Fatalf("partition %d: %+v, want term %d and a reason naming %s", p, a, nextTerm, leader)
		}
	}
}

// TestPartitionsBalanced: with balanced placement, 16 partitions spread
// 6/5/5 over three servers; the partitions of a server that stops go to
// the other two, at higher epochs, and the others stay.
func TestPartitionsBalanced(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 3, 0, meshtest.WithConfig(func(c *mesh.Config) {
		c.PartitionPlacement = mesh.PlaceBalanced
	}))
	leader, _ := c.WaitForLeader(wait)
	var before mesh.ControlState
	meshtest.Eventually(t, wait, "16 partitions spread 6/5/5", func() bool {
		lm := currentLeader(c)
		if lm == nil {
			return false
		}
		before = lm.State()
		var sizes []int
		for _, n := range ownership(before) {
			sizes = append(sizes, n)
		}
		slices.Sort(sizes)
		return before.PartitionCount == mesh.DefaultPartitions && len(before.Partitions) == 16 && slices.Equal(sizes, []int{5, 5, 6})
	})
	if owned := ownership(before); owned["s0"]+owned["s1"]+owned["s2"] != 16 {
		t.Fatalf("owners %v", owned)
	}
	victim := "s0"
	if victim == leader {
		victim = "s1"
	}
	c.Stop(victim)
	var after mesh.ControlState
	meshtest.Eventually(t, wait, victim+"'s partitions to move", func() bool {
		lm := currentLeader(c)
		if lm == nil {
			return false
		}
		after = lm.State()
		return ownership(after)[victim] == 0
	})
	sizes := ownership(after)
	if len(sizes) != 2 || sizes[victim] != 0 || sizes[leader] != 8 {
		t.Fatalf("after %s stopped: %v", victim, sizes)
	}
	for p, a := range after.Partitions {
		b := before.Partitions[p]
		switch {
		case b.Node == victim && (a.Epoch <= b.Epoch || !strings.Contains(a.Reason, victim)):
			t.Fatalf("partition %d moved off %s: %+v, before %+v", p, victim, a, b)
		case b.Node != victim && a != b:
			t.Fatalf("partition %d of %s moved: %+v, before %+v", p, b.Node, a, b)
		}
	}
}

// TestPartitionCountMismatch: a server started with an explicit count
// other than the mesh's is told by CheckPartitions, once it has the state.
func TestPartitionCountMismatch(t *testing.T) {
	t.Parallel()
	c := meshtest.NewTestCluster(t, 1, 0, meshtest.WithConfig(func(c *mesh.Config) {
		if c.Name == "s1" {
			c.Partitions, c.PartitionsSet = 8, true
		}
	}))
	c.AddServer("s1")
	if err := c.Mesh("s0").CheckPartitions(); err != nil {
		t.Fatalf("s0 (no flag): %v", err)
	}
	var err error
	meshtest.Eventually(t, wait, "s1 to have the count", func() bool {
		known := c.Mesh("s1").PartitionCount() != 0
		err = c.Mesh("s1").CheckPartitions()
		return known
	})
	if !errors.Is(err, mesh.ErrPartitionCountMismatch) ||
		!strings.Contains(err.Error(), "this mesh was created with 16 partitions; this node was started with --partitions 8") {
		t.Fatalf("CheckPartitions on s1: %v", err)
	}
}
