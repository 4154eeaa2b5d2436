package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// processMesh is a mesh of robonode processes: servers on loopback with
// fixed ports (so that a restarted server comes back on its Raft address)
// and one Postgres schema, with robonode's default gossip and Raft
// timings.
type processMesh struct {
	t           testing.TB
	bin         string
	dsn, schema string
	args        map[string][]string // name → robonode arguments
	procs       map[string]*child
	gossip      string // the first server's gossip address
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// startProcessMesh starts n servers with --bootstrap-expect n, each after
// the first joining it.
func startProcessMesh(t testing.TB, n int) *processMesh {
	t.Helper()
	m := &processMesh{t: t, bin: buildRobonode(t), args: map[string][]string{}, procs: map[string]*child{}}
	var dsn, schema string
	dsn, schema = pgtest.Schema(t)
	m.dsn, m.schema = dsn, schema
	pg := withSearchPath(t, dsn, schema)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("s%d", i)
		gossip := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		args := []string{"--name", name, "--data-dir", t.TempDir(), "--postgres", pg,
			"--grpc", strconv.Itoa(freePort(t)), "--http", "off", "--gossip", gossip, "--raft", strconv.Itoa(freePort(t)),
			"--bootstrap-expect", strconv.Itoa(n), "--capability", "code.exec=4", "--capability", "core=4",
			"--log-format", "json", "--shutdown-timeout", "10s"}
		if i == 1 {
			m.gossip = gossip
		} else {
			args = append(args, "--join", m.gossip, "--server")
		}
		m.args[name] = args
		m.procs[name] = startChild(t, m.bin, args...)
	}
	return m
}

// api returns a client of a running node's WorkflowService.
func (m *processMesh) api(name string) robonetv1.WorkflowServiceClient {
	return robonetv1.NewWorkflowServiceClient(dial(m.t, m.procs[name].addr))
}

// leader waits until every running node names the same leader, other
// than not, and returns its name and term.
func (m *processMesh) leader(not string, timeout time.Duration) (string, uint64) {
	m.t.Helper()
	var name string
	var term uint64
	eventually(m.t, timeout, "a leader every server agrees on", func() bool {
		name, term = "", 0
		for _, c := range m.procs {
			if c.cmd.ProcessState != nil {
				continue // killed
			}
			resp, err := robonetv1.NewMeshServiceClient(dial(m.t, c.addr)).GetLeader(ctxFor(m.t, 5*time.Second), &robonetv1.GetLeaderRequest{})
			if err != nil || resp.GetName() == "" || resp.GetName() == not || (name != "" && resp.GetName() != name) {
				return false
			}
			name, term = resp.GetName(), resp.GetTerm()
		}
		return name != ""
	})
	return name, term
}

// converged waits until every running node lists every running node
// alive, so that the next run starts from a mesh whose gossip settled (a
// restarted node knows every other's API address again).
func (m *processMesh) converged(timeout time.Duration) {
	m.t.Helper()
	eventually(m.t, timeout, "every node seeing every other alive", func() bool {
		running := 0
		for _, c := range m.procs {
			if c.cmd.ProcessState == nil {
				running++
			}
		}
		for _, c := range m.procs {
			if c.cmd.ProcessState != nil {
				continue
			}
			resp, err := robonetv1.NewMeshServiceClient(dial(m.t, c.addr)).ListMembers(ctxFor(m.t, 5*time.Second), &robonetv1.ListMembersRequest{})
			if err != nil {
				return false
			}
			alive := 0
			for _, mem := range resp.GetMembers() {
				if mem.GetStatus() == "alive" {
					alive++
				}
			}
			if alive != running {
				return false
			}
		}
		return true
	})
}

// survivor returns a running node other than not.
func (m *processMesh) survivor(not string) string {
	names := make([]string, 0, len(m.procs))
	for n, c := range m.procs {
		if n != not && c.cmd.ProcessState == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names[0]
}

// TestProcessMeshKill9Leader: three robonode processes on loopback with
// --join and one Postgres; the leader process is killed with SIGKILL in
// the middle of a workflow, another server takes over and the workflow
// completes with the right outputs, each task completion recorded once.
func TestProcessMeshKill9Leader(t *testing.T) {
	m := startProcessMesh(t, 3)
	leader, term := m.leader("", 60*time.Second)
	follower := m.survivor(leader)
	api := m.api(follower)
	logFile := filepath.Join(t.TempDir(), "runs.log")
	// Submitted through the leader: the instance is in one of its
	// partitions, so its engine is the one that dies.
	id := submitSpec(t, m.api(leader), crashSpec, fmt.Sprintf(`{"log": %q}`, logFile))
	waitUnderway(t, api, id)
	killed := time.Now()
	m.procs[leader].kill9(t)
	next, nextTerm := m.leader(leader, 30*time.Second)
	t.Logf("killed leader %s (term %d); %s leads in term %d after %s", leader, term, next, nextTerm,
		time.Since(killed).Round(time.Millisecond))

	in := waitDone(t, api, id, 60*time.Second)
	wantOutputs(t, in, `{"work": [10, 20, 30, 40, 50, 60, 70, 80], "sum": 360}`)
	t.Logf("completed %s after the kill", time.Since(killed).Round(time.Millisecond))
	checkOncePerExecution(t, id, taskHistory(t, postgresStore, "", m.dsn, m.schema, id), 9)
}

// TestProcessMeshKill9PartitionOwner: three robonode processes with
// balanced partitions; a workflow submitted through a server that owns
// partitions but does not lead (so it lives in one of that server's
// partitions), and that server killed with SIGKILL mid-run: its
// partitions move to the others at higher epochs, the new owner takes the
// workflow over, and it completes with the right outputs, each task
// completion recorded once. Workflows submitted through the other servers
// meanwhile complete too.
func TestProcessMeshKill9PartitionOwner(t *testing.T) {
	m, leader, victim, other, id := ownerUnderway(t, func(api robonetv1.WorkflowServiceClient) string {
		return submitSpec(t, api, crashSpec, fmt.Sprintf(`{"log": %q}`, filepath.Join(t.TempDir(), "other.log")))
	})
	otherID := id[1]
	api := m.api(other)
	killed := time.Now()
	m.procs[victim].kill9(t)
	at := m.ownedAgain(other, victim)
	t.Logf("killed partition owner %s (the leader is %s); its partitions owned again after %s", victim, leader,
		at.Sub(killed).Round(time.Millisecond))

	for _, run := range []string{id[0], otherID} {
		in := waitDone(t, api, run, 90*time.Second)
		wantOutputs(t, in, `{"work": [10, 20, 30, 40, 50, 60, 70, 80], "sum": 360}`)
		checkOncePerExecution(t, run, taskHistory(t, postgresStore, "", m.dsn, m.schema, run), 9)
	}
	t.Logf("completed %s after the kill", time.Since(killed).Round(time.Millisecond))
}

// TestProcessMeshPausedPartitionOwner: a server that owns partitions but
// does not lead is paused (SIGSTOP) mid-workflow for longer than its
// partitions take to move, then resumed (SIGCONT). It wakes believing it
// still owns them, with its engine's writes in flight; the store refuses
// them (the partitions were fenced at higher epochs: engine's
// TestAPartitionsNewOwnerFencesTheEarlierOne is the check that fails
// without the epoch check), it stops its engine once it reads the new
// assignment (its last writes refused too), and the workflow completes
// once, each task recorded once.
func TestProcessMeshPausedPartitionOwner(t *testing.T) {
	m, leader, victim, other, ids := ownerUnderway(t, nil)
	id, api := ids[0], m.api(other)

	p := m.procs[victim].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	m.ownedAgain(other, victim)
	moved := time.Since(paused)
	time.Sleep(2 * time.Second) // the new owner writes meanwhile
	logged := len(m.procs[victim].logText())
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("paused partition owner %s (the leader is %s); its partitions moved after %s; resumed after %s",
		victim, leader, moved.Round(time.Millisecond), time.Since(paused).Round(time.Millisecond))

	in := waitDone(t, api, id, 90*time.Second)
	wantOutputs(t, in, `{"work": [10, 20, 30, 40, 50, 60, 70, 80], "sum": 360}`)
	checkOncePerExecution(t, id, taskHistory(t, postgresStore, "", m.dsn, m.schema, id), 9)
	eventually(t, 30*time.Second, "the resumed server to stop its stale engine", func() bool {
		since := m.procs[victim].logText()[logged:]
		return strings.Contains(since, `"msg":"engine abandoned"`) || strings.Contains(since, `"msg":"engine released its instances"`)
	})
}

// ownerUnderway starts three servers with balanced partitions, submits
// crashSpec through a partition owner that does not lead (so the instance
// is in one of its partitions) and, when also is set, another workflow
// through another server; and waits until the first is underway. It
// returns the mesh, the leader, that owner, the other server and the
// instances (the owner's first).
func ownerUnderway(t *testing.T, also func(robonetv1.WorkflowServiceClient) string) (m *processMesh, leader, victim, other string, ids []string) {
	t.Helper()
	m = startProcessMesh(t, 3)
	leader, _ = m.leader("", 60*time.Second)
	m.balanced(60 * time.Second)
	victim = m.partitionOwner(leader)
	ids = []string{submitSpec(t, m.api(victim), crashSpec, fmt.Sprintf(`{"log": %q}`, filepath.Join(t.TempDir(), "runs.log")))}
	other = m.survivor(victim)
	if also != nil {
		ids = append(ids, also(m.api(other)))
	}
	waitUnderway(t, m.api(other), ids[0])
	return m, leader, victim, other, ids
}

// waitUnderway waits until two of crashSpec's spread instances completed,
// failing if the instance finished before (nothing would be tested).
func waitUnderway(t *testing.T, api robonetv1.WorkflowServiceClient, id string) {
	t.Helper()
	eventually(t, 60*time.Second, "two spread instances to complete", func() bool {
		resp, err := api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatalf("GetInstance: %v", err)
		}
		if isTerminal(resp.GetInstance().GetState()) {
			t.Fatal("the instance finished before the kill; nothing was tested")
		}
		return resp.GetInstance().GetProgress().GetDone() >= 2
	})
}

// failoverBenchSpec: four long tasks that log when they start, so that
// attempts are in flight when the leader dies and the first start after
// the kill marks the new leader's first dispatch.
const failoverBenchSpec = `
name: failover-bench
version: 1
inputs:
  log: {type: string}
  run: {type: int}
tasks:
  work:
    spread: ${{ [1, 2, 3, 4] }}
    capability: code.exec
    action: exec
    with:
      argv: [sh, -c, 'echo "$(date +%s%N)" >> "$1"; sleep 10; echo 1', work, "${{ inputs.log }}"]
`

// BenchmarkFailover measures the failover of a partition owner with
// robonode's default timings (balanced placement): three robonode
// processes, a workflow submitted through the victim (so it lives in one
// of the victim's partitions) with attempts in flight, the victim killed
// with SIGKILL, and the time from the kill until every partition is owned
// by a live server again, and until the first task start logged after the
// kill (the attempts that ran on the victim's own workers, run again
// elsewhere once memberlist declares it failed). The killed server is
// restarted on its data directory before the next run, so each run kills
// a server of a full three-server mesh. Sub-benchmarks: "leader" kills the
// Raft leader (an election comes first), "owner" a partition owner that
// is not the leader. Runs: $ROBONET_FAILOVER_RUNS (default 20). Reports
// p50, p99 and max in milliseconds.
//
//	scripts/with-postgres go test -run '^$' -bench Failover -benchtime 1x ./e2e/
func BenchmarkFailover(b *testing.B) {
	runs := 20
	if v, err := strconv.Atoi(os.Getenv("ROBONET_FAILOVER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	b.Run("leader", func(b *testing.B) { benchFailover(b, runs, false) })
	b.Run("owner", func(b *testing.B) { benchFailover(b, runs, true) })
}

// benchFailover runs failoverRuns and reports its figures.
func benchFailover(b *testing.B, runs int, notLeader bool) {
	for b.Loop() {
		samples, owned := failoverRuns(b, runs, notLeader)
		for _, s := range []struct {
			what, unit string
			d          []time.Duration
		}{{"first dispatch", "", samples}, {"partitions owned again", "-owned", owned}} {
			if len(s.d) == 0 {
				continue
			}
			slices.Sort(s.d)
			pct := func(p float64) time.Duration { return s.d[min(len(s.d)-1, int(p*float64(len(s.d))))] }
			b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50"+s.unit+"-ms")
			b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99"+s.unit+"-ms")
			b.ReportMetric(float64(s.d[len(s.d)-1].Milliseconds()), "max"+s.unit+"-ms")
			b.Logf("failover, %s, over %d runs: p50 %s, p99 %s, max %s; all: %v", s.what, len(s.d), pct(0.5), pct(0.99),
				s.d[len(s.d)-1], s.d)
		}
	}
}

// ownedAgain waits until every partition is owned, as a server other
// than dead answers, by a server other than dead, and returns when it saw
// that.
func (m *processMesh) ownedAgain(via, dead string) time.Time {
	mc := robonetv1.NewMeshServiceClient(dial(m.t, m.procs[via].addr))
	var at time.Time
	eventually(m.t, 30*time.Second, "every partition owned again", func() bool {
		resp, err := mc.ListPartitions(ctxFor(m.t, time.Second), &robonetv1.ListPartitionsRequest{})
		if err != nil || resp.GetCount() == 0 || len(resp.GetPartitions()) != int(resp.GetCount()) {
			return false
		}
		for _, p := range resp.GetPartitions() {
			if p.GetOwner() == "" || p.GetOwner() == dead {
				return false
			}
		}
		at = time.Now()
		return true
	})
	return at
}

// failoverRuns runs the failover measurement runs times on one mesh,
// killing the leader, or with notLeader a partition owner that is not the
// leader. The first task start after the kill is measured for the leader
// only: a partition owner's workflow may have no attempt on the owner's
// own workers, and then none starts again.
func failoverRuns(b *testing.B, runs int, notLeader bool) (firstDispatch, partitionsOwned []time.Duration) {
	m := startProcessMesh(b, 3)
	logFile := filepath.Join(b.TempDir(), "starts.log")
	var samples, owned []time.Duration
	leader, _ := m.leader("", 60*time.Second)
	for run := range runs {
		victim := leader
		if notLeader {
			victim = m.partitionOwner(leader)
		}
		api := m.api(victim)
		before := countLines(b, logFile) // before the submission: its first tasks may start as it is acknowledged
		id := submitSpec(b, api, failoverBenchSpec, fmt.Sprintf(`{"log": %q, "run": %d}`, logFile, run))
		eventually(b, 30*time.Second, "four tasks to start", func() bool { return countLines(b, logFile) >= before+4 })
		api = m.api(m.survivor(victim))
		killed := time.Now()
		m.procs[victim].kill9(b)
		owned = append(owned, m.ownedAgain(m.survivor(victim), victim).Sub(killed))
		first := killed
		if !notLeader {
			eventually(b, 60*time.Second, "a task start after the kill", func() bool {
				for _, ts := range startsAfter(b, logFile, before+4) {
					if ts.After(killed) {
						first = ts
						return true
					}
				}
				return false
			})
			samples = append(samples, first.Sub(killed))
		}
		next, nextTerm := m.leader(victim, 30*time.Second)
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "failover run %d: %s killed; %s leads in term %d; partitions owned again after %s; first dispatch after %s\n",
				run+1, victim, next, nextTerm, owned[len(owned)-1].Round(time.Millisecond), first.Sub(killed).Round(time.Millisecond))
		}
		if _, err := api.CancelInstance(ctxFor(b, 30*time.Second), &robonetv1.CancelInstanceRequest{InstanceId: id}); err != nil {
			b.Fatalf("cancelling run %d: %v", run+1, err)
		}
		// Bring the killed server back on its data directory and wait
		// until it follows the new leader, so the next run kills the
		// leader of a full mesh.
		m.procs[victim] = startChild(b, m.bin, m.args[victim]...)
		m.leader("", 60*time.Second)
		m.converged(60 * time.Second)
		m.balanced(60 * time.Second)
		leader = next
	}
	return samples, owned
}

// partitionOwner returns a running server other than not that owns
// partitions, as the answering server's ListPartitions says.
func (m *processMesh) partitionOwner(not string) string {
	m.t.Helper()
	mc := robonetv1.NewMeshServiceClient(dial(m.t, m.procs[not].addr))
	var owner string
	eventually(m.t, 30*time.Second, "a partition owner other than "+not, func() bool {
		resp, err := mc.ListPartitions(ctxFor(m.t, 5*time.Second), &robonetv1.ListPartitionsRequest{})
		if err != nil {
			return false
		}
		for _, p := range resp.GetPartitions() {
			if o := p.GetOwner(); o != "" && o != not && m.procs[o].cmd.ProcessState == nil && (owner == "" || o < owner) {
				owner = o
			}
		}
		return owner != ""
	})
	return owner
}

// balanced waits until every running server owns partitions, as each
// says (a restarted server is given its share back by a rebalance).
func (m *processMesh) balanced(timeout time.Duration) {
	m.t.Helper()
	eventually(m.t, timeout, "every server owning partitions", func() bool {
		for name, c := range m.procs {
			if c.cmd.ProcessState != nil {
				continue
			}
			resp, err := robonetv1.NewMeshServiceClient(dial(m.t, c.addr)).ListPartitions(ctxFor(m.t, 5*time.Second), &robonetv1.ListPartitionsRequest{})
			if err != nil {
				return false
			}
			owns := false
			for _, p := range resp.GetPartitions() {
				owns = owns || (p.GetOwner() == name && p.GetHasStats())
			}
			if !owns {
				return false
			}
		}
		return true
	})
}

// countLines counts the lines of a file (0 if it does not exist).
func countLines(t testing.TB, path string) int {
	return len(readLines(t, path))
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// startsAfter returns the start times logged from line skip on.
func startsAfter(t testing.TB, path string, skip int) []time.Time {
	var out []time.Time
	lines := readLines(t, path)
	for _, l := range lines[min(skip, len(lines)):] {
		ns, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64)
		if err != nil {
			continue // a line being written
		}
		out = append(out, time.Unix(0, ns))
	}
	return out
}

// BenchmarkLeaderStability runs three robonode servers (one Postgres,
// robonode's default timings) at full load — clients on every server
// submitting spreads of 500 echo tasks back to back, as fast as the mesh
// completes them — for $ROBONET_STABILITY_DURATION (default 1m; the figure
// in docs/benchmarks.md is of 10m), and counts the elections it saw: the
// Raft term at the end minus the term at the start (every election, won
// or not, raises it). Reports elections and the tasks completed per
// second.
//
//	ROBONET_STABILITY_DURATION=10m scripts/with-postgres go test -run '^$' -bench LeaderStability -benchtime 1x -timeout 30m ./e2e/
func BenchmarkLeaderStability(b *testing.B) {
	duration := time.Minute
	if v, err := time.ParseDuration(os.Getenv("ROBONET_STABILITY_DURATION")); err == nil && v > 0 {
		duration = v
	}
	spread := testdataSpec("mesh_echo_spread.yaml")
	for b.Loop() {
		m := startProcessMesh(b, 3)
		leader, startTerm := m.leader("", 60*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), duration)
		var done atomic.Int64
		var wg sync.WaitGroup
		for name := range m.procs {
			api := m.api(name)
			for range 2 { // two clients per server: one waits while the other's spread runs
				wg.Go(func() {
					for ctx.Err() == nil {
						resp, err := api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
							Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(spread), Filename: "spread.yaml"}}})
						if err != nil {
							continue // leadership moved mid-call, or the run ended
						}
						if in := waitFinished(ctx, api, resp.GetInstanceId()); in == robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
							done.Add(500)
						}
					}
				})
			}
		}
		wg.Wait()
		cancel()
		endLeader, endTerm := m.leader("", 60*time.Second)
		elections := endTerm - startTerm
		b.ReportMetric(float64(elections), "elections")
		b.ReportMetric(float64(done.Load())/duration.Seconds(), "tasks/s")
		b.Logf("%s at full load: term %d → %d (%d elections), leader %s → %s, %d tasks completed (%.0f/s)",
			duration, startTerm, endTerm, elections, leader, endLeader, done.Load(), float64(done.Load())/duration.Seconds())
	}
}

// waitFinished polls an instance until it finishes or ctx ends, and
// returns its last state.
func waitFinished(ctx context.Context, api robonetv1.WorkflowServiceClient, id string) robonetv1.InstanceState {
	var st robonetv1.InstanceState
	for ctx.Err() == nil {
		resp, err := api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
		if err == nil {
			st = resp.GetInstance().GetState()
			if isTerminal(st) {
				return st
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return st
}

// waitSpec waits two seconds between two echo tasks.
const waitSpec = `
name: cool-down
version: 1
tasks:
  deploy:
    capability: core
    action: echo
    with: {v: 1}
  cool_down:
    needs: deploy
    wait: {for: 2s}
  verify:
    needs: cool_down
    capability: core
    action: echo
    with: {after: "${{ tasks.cool_down.output }}"}
outputs:
  ended: ${{ tasks.cool_down.output }}
`

// TestProcessMeshWaitAcrossLeaderKill: a wait: {for: 2s} begun on the
// leader, which is killed with SIGKILL while the instance waits: the
// server that takes the instance over ends the wait once, at the time the
// first one set (or, if the takeover comes later, at once), and the
// instance completes with each execution recorded once.
func TestProcessMeshWaitAcrossLeaderKill(t *testing.T) {
	m := startProcessMesh(t, 3)
	leader, _ := m.leader("", 60*time.Second)
	api := m.api(m.survivor(leader))
	id := submitSpec(t, m.api(leader), waitSpec, "")
	var due time.Time
	eventually(t, 30*time.Second, "cool_down to wait", func() bool {
		got, err := api.GetInstance(ctxFor(t, 5*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			return false
		}
		cd := task(t, got.GetInstance(), "cool_down")
		due = cd.GetWaitUntil().AsTime()
		return cd.GetWaiting()
	})
	// The due time is durable with the snapshot the wait's start writes,
	// one group commit after the wait is shown (docs/workflows.md): kill
	// once the store has it.
	st, err := postgres.Open(ctxFor(t, 30*time.Second), postgres.Config{DSN: m.dsn, Schema: m.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eventually(t, 10*time.Second, "the wait's snapshot to be stored", func() bool {
		rec, err := st.GetInstance(ctxFor(t, 5*time.Second), uuid.MustParse(id))
		return err == nil && len(rec.State) > 0
	})
	killed := time.Now()
	m.procs[leader].kill9(t)
	in := waitDone(t, api, id, 60*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	ended, err := time.Parse(time.RFC3339Nano, strings.Trim(gjsonField(t, in.GetOutputsJson(), "ended"), `"`))
	if err != nil {
		t.Fatalf("outputs %s: %v", in.GetOutputsJson(), err)
	}
	if !ended.Equal(due) {
		t.Fatalf("the wait ended at %s, want the due time %s the first leader set", ended, due)
	}
	t.Logf("killed the leader %s with the wait due in %s; the instance completed %s after the kill",
		leader, due.Sub(killed).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	checkOncePerExecution(t, id, taskHistory(t, postgresStore, "", m.dsn, m.schema, id), 3)
}

// gjsonField returns the JSON text of one top-level field of obj.
func gjsonField(t *testing.T, obj, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	return string(m[field])
}
