package mesh_test

import (
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
