package mesh_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/mesh/meshtest"
)

// BenchmarkConvergence measures a 100-node mesh in one process: the time
// from starting every node (all joining one seed) until every node sees
// all 100 alive, the gossip bytes that took, the steady-state gossip
// bandwidth per node, and the time from killing 10 nodes at once until
// every survivor sees all 10 as not alive, with memberlist's LAN defaults
// (probe 1 s, gossip 200 ms), what production runs. (Faster timings —
// mesh.TestConfig's probe of 100 ms, or the LAN ones divided by five — are
// for clusters of a handful of nodes: with 100 nodes in one process on two
// cores, UDP acks miss their probe timeouts, false failures keep coming and
// the mesh never holds still long enough to count as converged.)
//
//	go test -run '^$' -bench Convergence ./mesh/
func BenchmarkConvergence(b *testing.B) {
	for _, profile := range []struct {
		name   string
		tuning func(*mesh.Config)
	}{
		{"lan", func(c *mesh.Config) { c.Memberlist = nil }},
	} {
		b.Run(profile.name, func(b *testing.B) {
			const nodes, failures = 100, 10
			const steady = 3 * time.Second
			timeout := 2 * time.Minute
			for range b.N {
				start := time.Now()
				c := meshtest.NewTestCluster(b, 0, nodes,
					meshtest.WithLogger(zap.NewNop()), meshtest.WithConfig(profile.tuning))
				meshtest.Eventually(b, timeout, "100 nodes to converge", c.Converged)
				joined := time.Since(start)
				joinBytes, _ := c.Net.TotalBytesSent()

				// Steady state: nothing changes, gossip and probes go on.
				before, _ := c.Net.TotalBytesSent()
				wait := time.NewTimer(steady)
				<-wait.C // a measurement window, not synchronisation
				after, _ := c.Net.TotalBytesSent()

				killedAt := time.Now()
				for i := nodes - failures; i < nodes; i++ {
					c.Kill("w" + strconv.Itoa(i))
				}
				meshtest.Eventually(b, timeout, "survivors to see the failures", c.Converged)
				failed := time.Since(killedAt)
				failBytes, _ := c.Net.TotalBytesSent()
				c.Close()

				b.ReportMetric(float64(joined.Milliseconds()), "join-converge-ms")
				b.ReportMetric(float64(failed.Milliseconds()), "fail-converge-ms")
				b.ReportMetric(float64(joinBytes)/nodes/1024, "join-KiB/node")
				b.ReportMetric(float64(after-before)/nodes/steady.Seconds(), "steady-B/s/node")
				b.ReportMetric(float64(failBytes-after)/(nodes-failures)/1024, "fail-KiB/node")
			}
		})
	}
}

// BenchmarkRejoinAfterHeal measures convergence after a partition with the
// production timings (memberlist's LAN defaults, DefaultRaftTimings, the
// default graces): three servers, the leader cut off from the other two
// for $ROBONET_REJOIN_CUT (default 15 s: past memberlist's failure
// detection, so the others have declared it dead), then healed; reported
// is the time from the heal until it is a voter again, knows the leader
// and every node's gossip sees every node alive again, and whether it
// stayed in the Raft configuration throughout.
//
//	go test -run '^$' -bench RejoinAfterHeal -benchtime 3x ./mesh/
func BenchmarkRejoinAfterHeal(b *testing.B) {
	cut := 15 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ROBONET_REJOIN_CUT")); err == nil && v > 0 {
		cut = v
	}
	production := func(c *mesh.Config) {
		c.Memberlist, c.Raft = nil, nil
		c.ServerStabilization, c.DeadServerGrace, c.DeadServerTimeout = 0, 0, 0
		c.ReconcileInterval, c.ReconnectInterval, c.ReconnectTimeout = 0, 0, 0
	}
	var worst time.Duration
	for b.Loop() {
		c := meshtest.NewTestCluster(b, 3, 0, meshtest.WithLogger(zap.NewNop()), meshtest.WithConfig(production))
		leader, _ := c.WaitForLeader(time.Minute)
		meshtest.Eventually(b, time.Minute, "the members to converge", c.Converged)
		var others []string
		for _, n := range c.Running(true) {
			if n != leader {
				others = append(others, n)
			}
		}
		c.Partition(leader)
		end := time.Now().Add(cut)
		removed := false
		for time.Now().Before(end) {
			if name, _ := c.LeaderAmong(others); name != "" {
				found := false
				for _, s := range c.Mesh(name).RaftConfiguration() {
					found = found || s.Name == leader
				}
				removed = removed || !found
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.Heal()
		healed := time.Now()
		vm := c.Mesh(leader)
		meshtest.Eventually(b, time.Minute, "the healed server to be a voter that knows the leader", func() bool {
			name, _ := c.LeaderAmong(others)
			if name == "" || vm.Leader().Leader != name || !c.Converged() {
				return false // Converged: gossip on every node sees every node alive
			}
			for _, s := range c.Mesh(name).RaftConfiguration() {
				if s.Name == leader {
					return s.Voter
				}
			}
			return false
		})
		back := time.Since(healed)
		worst = max(worst, back)
		b.Logf("cut %v: removed from the configuration meanwhile: %v; back as a voter knowing the leader %v after the heal", cut, removed, back)
		c.Close()
	}
	b.ReportMetric(float64(worst.Milliseconds()), "max-rejoin-ms")
}
