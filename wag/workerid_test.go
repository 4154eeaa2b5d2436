package wag

import "testing"

func TestParseWorkerID(t *testing.T) {
	for _, c := range []struct{ id, node, capability, slot string }{
		{"worker-1/code.exec/2", "worker-1", "code.exec", "2"},
		{"w1/text/ext-pool-3", "w1", "text", "ext-pool-3"},
		{"n/c/odd/slot", "n", "c", "odd/slot"},
		{"n/c", "n", "c", ""},
		{"n", "n", "", ""},
		{"", "", "", ""},
	} {
		node, capability, slot := ParseWorkerID(c.id)
		if node != c.node || capability != c.capability || slot != c.slot {
			t.Errorf("ParseWorkerID(%q) = %q, %q, %q; want %q, %q, %q", c.id, node, capability, slot, c.node, c.capability, c.slot)
		}
		if got := WorkerNode(c.id); got != c.node {
			t.Errorf("WorkerNode(%q) = %q, want %q", c.id, got, c.node)
		}
	}
}
