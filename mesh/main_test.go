package mesh_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: Stop and Halt
// must stop everything memberlist, Raft and the mesh started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// memberlist's probeNode waits for the ack (or its timer, up to the
		// probe interval times the Lifeguard multiplier: seconds with the
		// LAN profile) without watching for shutdown, so a probe in flight
		// when Shutdown returns ends on its own a little later. It holds
		// nothing of ours; memberlist has no way to wait for it.
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
	)
}
