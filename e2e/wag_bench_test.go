package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/robonet/robonet/internal/childproc"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// BenchmarkWagFailover measures, with real robonode processes (a server
// serving no capability and four worker-only nodes with code.exec=2):
//
//   - worker/…: a worker node running attempts is SIGKILLed; from the kill
//     to each of its attempts starting again on a live node (memberlist's
//     failure detection or the heartbeat ladder, whichever comes first);
//   - waggler/…: the node holding the Waggler role of code.exec is
//     SIGKILLed and a one-task workflow submitted at once; from the kill to
//     that task's start, which only a successor Waggler can dispatch.
//
// "default" is robonode's default heartbeat interval (5 s, so memberlist
// is first), "tight" 200 ms. Each run kills one node and starts a new one
// in its place. Runs per case: $ROBONET_WAG_FAILOVER_RUNS (default 10).
// Reports p50, p99 and max in milliseconds.
//
//	go test -run '^$' -bench WagFailover -benchtime 1x ./e2e/
func BenchmarkWagFailover(b *testing.B) {
	runs := 10
	if v, err := strconv.Atoi(os.Getenv("ROBONET_WAG_FAILOVER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	for _, c := range []struct {
		name, interval string
		waggler        bool
	}{
		{"worker/default", "5s", false},
		{"worker/tight", "200ms", false},
		{"waggler/default", "5s", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				samples := wagFailoverRuns(b, runs, c.interval, c.waggler)
				slices.Sort(samples)
				pct := func(p float64) time.Duration { return samples[min(len(samples)-1, int(p*float64(len(samples))))] }
				b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50-ms")
				b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
				b.ReportMetric(float64(samples[len(samples)-1].Milliseconds()), "max-ms")
				b.Logf("%s: %d samples: p50 %s, p99 %s, max %s; all: %v", c.name, len(samples), pct(0.5), pct(0.99),
					samples[len(samples)-1], samples)
			}
		})
	}
}

func wagFailoverRuns(b *testing.B, runs int, interval string, waggler bool) []time.Duration {
	m := startWagProcs(b, 4, interval)
	next := 5 // the name of the next replacement node
	var samples []time.Duration
	for run := range runs {
		holder := m.holder()
		id := submitSpec(b, m.api, sleepSpec, fmt.Sprintf(`{"n": 4, "secs": 60, "log": %q}`, m.log))
		before := m.waitStarts(id, "four tasks running", func(s []mark) bool { return len(s) == 4 })
		victim := ""
		if waggler {
			victim = holder
		} else {
			for _, s := range before {
				if s.node() != holder && (victim == "" || s.node() < victim) {
					victim = s.node()
				}
			}
			if victim == "" {
				b.Fatalf("run %d: every task runs on the Waggler's node %s", run+1, holder)
			}
		}
		killed := time.Now()
		m.workers[victim].kill9(b)
		delete(m.workers, victim)
		if waggler {
			probe := submitSpec(b, m.api, sleepSpec, fmt.Sprintf(`{"n": 1, "secs": 0, "log": %q}`, m.log))
			first := m.waitStarts(probe, "the probe task to start", func(s []mark) bool { return len(s) > 0 })
			samples = append(samples, first[0].at.Sub(killed))
		} else {
			lost := map[string]bool{}
			for _, s := range before {
				if s.node() == victim {
					lost[s.exec] = true
				}
			}
			var again []mark
			m.waitStarts(id, "the lost attempts to start again", func(s []mark) bool {
				again = again[:0]
				for _, r := range s[4:] {
					if lost[r.exec] {
						again = append(again, r)
					}
				}
				return len(again) == len(lost)
			})
			for _, s := range again {
				samples = append(samples, s.at.Sub(killed))
			}
		}
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "run %d: killed %s (waggler %s): %v\n", run+1, victim, holder, samples[len(samples)-1].Round(time.Millisecond))
		}
		if _, err := m.api.CancelInstance(ctxFor(b, 30*time.Second), &robonetv1.CancelInstanceRequest{InstanceId: id}); err != nil {
			b.Fatalf("cancelling run %d: %v", run+1, err)
		}
		m.startWorker(fmt.Sprintf("w%d", next))
		next++
	}
	return samples
}

// meshEchoChain is a 10-task chain of echo tasks.
var meshEchoChain = func() string {
	s := "name: chain\nversion: 1\ntasks:\n  t0: {capability: core, action: echo, with: {v: 0}}\n"
	for i := 1; i < 10; i++ {
		s += fmt.Sprintf("  t%d: {needs: [t%d], capability: core, action: echo, with: {v: \"${{ tasks.t%d.output.v + 1 }}\"}}\n", i, i-1, i-1)
	}
	return s + "outputs:\n  v: ${{ tasks.t9.output.v }}\n"
}()

// meshEchoSpread is a 500-wide spread of echo tasks.
var meshEchoSpread = testdataSpec("mesh_echo_spread.yaml")

// BenchmarkMeshEcho measures echo throughput through the public gRPC API,
// submissions included, with the tasks on three worker-only nodes (the
// server serves no capability, so every task crosses nodes: leader →
// Waggler node → worker node and back) against the reference, the same
// workload on one robonode running its tasks itself — both real processes
// on SQLite, measured in the same run. Two workloads: chains, 3,000
// instances of a 10-task chain submitted by 8 concurrent clients (bound by
// how fast instances are submitted and started); spreads, 100 instances of
// a 500-wide spread (bound by how fast tasks are dispatched and their
// results recorded). The clock runs from the first submission until every
// instance is COMPLETE. Reports tasks/s for each and the mesh's share of
// the single node's figure, submissions answered per second, and the CPU
// used per 1,000 tasks by all processes and by the mesh's server alone
// (with split placement below, the server is the process on the single
// node's CPUs: its figure against the single node's is the cost of
// crossing nodes).
//
// Every process shares every CPU unless ROBONET_BENCH_PLACEMENT=split: then
// the single node and the mesh's server run on the first half of the CPUs
// and the worker nodes on the other half, as worker nodes on machines of
// their own would (robonode bench's --placement split; Linux).
//
// ROBONET_BENCH_PROFILE=DIR writes a CPU profile of every process to DIR
// (go tool pprof FILE), one file per workload, iteration and node; the
// processes are then stopped cleanly rather than killed, so that the
// profiles are written (their CPU figures include the shutdown).
//
//	go test -run '^$' -bench MeshEcho -benchtime 3x ./e2e/
//	ROBONET_BENCH_PLACEMENT=split go test -run '^$' -bench MeshEcho -benchtime 3x ./e2e/
func BenchmarkMeshEcho(b *testing.B) {
	for _, w := range []struct {
		name                 string
		spec                 string
		instances, tasksEach int
	}{
		{"chains3000x10", meshEchoChain, 3000, 10},
		{"spreads100x500", meshEchoSpread, 100, 500},
	} {
		b.Run(w.name, func(b *testing.B) {
			bin := buildRobonode(b)
			serverCPUs, workerCPUs := echoPlacement(b)
			common := []string{"--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0", "--log-format", "json"}
			var single, mesh echoTimes
			var singleCPU, meshCPU, serverCPU time.Duration
			cpu := func(c *child) time.Duration { return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime() }
			profiles := echoProfiles(b)
			iteration := 0
			// args are a node's arguments: common, its own, and a CPU
			// profile when asked for.
			args := func(node string, own ...string) []string {
				a := append(slices.Clone(common), own...)
				if profiles != "" {
					a = append(a, "--cpu-profile", filepath.Join(profiles, fmt.Sprintf("%s-%d-%s.pprof", w.name, iteration, node)))
				}
				return a
			}
			end := func(c *child) time.Duration {
				if profiles != "" {
					if code := c.stop(b); code != 0 {
						b.Fatalf("a node exited with %d at a clean stop:\n%s", code, c.logText())
					}
				} else {
					c.kill9(b)
				}
				return cpu(c)
			}
			for b.Loop() {
				iteration++
				// The reference: one node, its own pools.
				one := startChildOn(b, nil, serverCPUs, bin, args("single", "--data-dir", b.TempDir(), "--capability", "core=32")...)
				single = single.add(echoRun(b, one.addr, w.spec, w.instances))
				singleCPU += end(one)

				// The mesh: a server with no capability and three worker nodes.
				server := startChildOn(b, nil, serverCPUs, bin, args("server", "--name", "server", "--data-dir", b.TempDir(), "--capability", "none")...)
				var ws []*child
				for i := 1; i <= 3; i++ {
					name := fmt.Sprintf("w%d", i)
					ws = append(ws, startChildOn(b, workerEnv(), workerCPUs, bin, args(name, "--name", name, "--data-dir", b.TempDir(),
						"--join", server.gossip, "--capability", "core=32")...))
				}
				mesh = mesh.add(echoRun(b, server.addr, w.spec, w.instances))
				for _, c := range ws {
					meshCPU += end(c)
				}
				s := end(server)
				meshCPU += s
				serverCPU += s
			}
			n := float64(b.N * w.instances * w.tasksEach)
			b.ReportMetric(n/single.done.Seconds(), "single-tasks/s")
			b.ReportMetric(n/mesh.done.Seconds(), "mesh-tasks/s")
			b.ReportMetric(100*single.done.Seconds()/mesh.done.Seconds(), "mesh-%-of-single")
			// How fast the node answered submissions: the chains are bound
			// by it (their last task ends moments after the last submission).
			subs := float64(b.N * w.instances)
			b.ReportMetric(subs/single.submitted.Seconds(), "single-submits/s")
			b.ReportMetric(subs/mesh.submitted.Seconds(), "mesh-submits/s")
			// CPU of every process over its whole life (start-up and the
			// warm-up instance included), per 1,000 tasks.
			b.ReportMetric(1000*singleCPU.Seconds()*1000/n, "single-cpu-ms/ktask")
			b.ReportMetric(1000*meshCPU.Seconds()*1000/n, "mesh-cpu-ms/ktask")
			b.ReportMetric(1000*serverCPU.Seconds()*1000/n, "mesh-server-cpu-ms/ktask")
		})
	}
}

// echoRun registers spec on the node at addr, submits instances of it from
// 8 clients and returns the time until all are COMPLETE. One instance runs
// alone first, so that the mesh has its Waggler in place and both runs
// start warm.
func echoRun(b testing.TB, addr, spec string, instances int) echoTimes {
	api := robonetv1.NewWorkflowServiceClient(dial(b, addr))
	warm := submitSpec(b, api, spec, "")
	eventually(b, 60*time.Second, "the warm-up instance", func() bool {
		resp, err := api.GetInstance(ctxFor(b, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: warm})
		return err == nil && resp.GetInstance().GetState() == robonetv1.InstanceState_INSTANCE_STATE_COMPLETE
	})
	resp, err := api.GetInstance(ctxFor(b, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: warm})
	if err != nil {
		b.Fatal(err)
	}
	name := resp.GetInstance().GetWorkflow()
	start := time.Now()
	clients := echoClients()
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for i := c; i < instances; i += clients {
				_, err := api.SubmitWorkflow(ctxFor(b, 30*time.Second), &robonetv1.SubmitWorkflowRequest{
					Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: name}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			b.Fatalf("submit: %v", err)
		}
	}
	submitted := time.Since(start)
	eventually(b, 5*time.Minute, "every instance finished", func() bool { return !anyUnfinished(b, api) })
	took := time.Since(start)
	if n := countComplete(b, api); n != instances+1 {
		b.Fatalf("%d instances COMPLETE, want %d", n, instances+1)
	}
	return echoTimes{submitted: submitted, done: took}
}

// echoTimes are the times from the first submission until the last was
// answered and until every instance was COMPLETE.
type echoTimes struct{ submitted, done time.Duration }

// anyUnfinished reports whether an instance is still pending, running or
// gathering: one indexed row at most, so that polling it costs the node
// little while it is being measured.
func anyUnfinished(b testing.TB, api robonetv1.WorkflowServiceClient) bool {
	resp, err := api.ListInstances(ctxFor(b, 30*time.Second), &robonetv1.ListInstancesRequest{
		States: []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_PENDING,
			robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_GATHERING},
		PageSize: 1,
	})
	if err != nil {
		b.Fatalf("list: %v", err)
	}
	return len(resp.GetInstances()) > 0
}

// countComplete counts COMPLETE instances.
func countComplete(b testing.TB, api robonetv1.WorkflowServiceClient) int {
	n, token := 0, ""
	for {
		resp, err := api.ListInstances(ctxFor(b, 30*time.Second), &robonetv1.ListInstancesRequest{
			States: []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_COMPLETE}, PageSize: 1000, PageToken: token,
		})
		if err != nil {
			b.Fatalf("list: %v", err)
		}
		n += len(resp.GetInstances())
		if token = resp.GetNextPageToken(); token == "" {
			return n
		}
	}
}

func (t echoTimes) add(u echoTimes) echoTimes {
	return echoTimes{submitted: t.submitted + u.submitted, done: t.done + u.done}
}

// echoClients is how many clients submit concurrently in echoRun:
// ROBONET_BENCH_CLIENTS, default 8.
func echoClients() int {
	if n, err := strconv.Atoi(os.Getenv("ROBONET_BENCH_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 8
}

// echoPlacement returns the CPUs of the node measured (the single node, the
// mesh's server) and of the worker nodes, from ROBONET_BENCH_PLACEMENT:
// "shared" or unset, every CPU for every process (nil, nil); "split", the
// first and the second half of this process's CPUs.
func echoPlacement(b *testing.B) (server, workers []int) {
	switch p := os.Getenv("ROBONET_BENCH_PLACEMENT"); p {
	case "", "shared":
		return nil, nil
	case "split":
		server, workers, err := childproc.Halves()
		if err != nil {
			b.Fatalf("ROBONET_BENCH_PLACEMENT=split: %v", err)
		}
		return server, workers
	default:
		b.Fatalf("ROBONET_BENCH_PLACEMENT=%q: want shared (the default) or split", p)
		return nil, nil
	}
}

// echoProfiles returns the directory ROBONET_BENCH_PROFILE names, made if
// it does not exist, or "" when it is unset.
func echoProfiles(b *testing.B) string {
	dir := os.Getenv("ROBONET_BENCH_PROFILE")
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatalf("ROBONET_BENCH_PROFILE=%q: %v", dir, err)
	}
	return dir
}

// workerEnv is what the worker nodes of the mesh get in their environment:
// GOMAXPROCS when ROBONET_BENCH_WORKER_GOMAXPROCS is a positive number, as
// a container CPU limit would set it (docs/operations.md, "Several nodes
// on one machine"); nothing by default.
func workerEnv() []string {
	if n, err := strconv.Atoi(os.Getenv("ROBONET_BENCH_WORKER_GOMAXPROCS")); err == nil && n > 0 {
		return []string{"GOMAXPROCS=" + strconv.Itoa(n)}
	}
	return nil
}
