package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// These tests run a mesh of real robonode processes on loopback — a
// server that serves no capability and four worker-only nodes serving
// code.exec with two slots each, heartbeats every 200 ms — and kill or
// pause nodes with signals while a spread of exec tasks runs.

// sleepSpec's tasks log where they start and end ("start|end INSTANCE
// EXEC ATTEMPT WORKER UNIXNANOS"), sleep between — secs the first time an
// execution runs, three times as long when it runs again, so that a re-run
// is still running when the first run's late result comes — and output
// the worker they ran on.
const sleepSpec = `
name: sleepers
version: 1
inputs:
  n: {type: int}
  secs: {type: int}
  log: {type: string}
tasks:
  s:
    spread: ${{ lists.range(inputs.n) }}
    capability: code.exec
    action: exec
    with:
      argv:
        - sh
        - -c
        - |
          run="$ROBONET_INSTANCE_ID $ROBONET_EXECUTION_ID"
          n=$(cat "$1" 2>/dev/null | grep -cF "start $run ")
          echo "start $run $ROBONET_ATTEMPT $ROBONET_WORKER $(date +%s%N)" >> "$1"
          sleep $(( $2 * (1 + 2 * n) ))
          echo "end $run $ROBONET_ATTEMPT $ROBONET_WORKER $(date +%s%N)" >> "$1"
          echo "\"$ROBONET_WORKER\""
        - s
        - ${{ inputs.log }}
        - ${{ string(inputs.secs) }}
outputs:
  workers: ${{ tasks.s.output }}
`

// wagProcs is a server (SQLite, no capability) and worker nodes as child
// processes.
type wagProcs struct {
	t       testing.TB
	bin     string
	common  []string // every node's arguments
	dataDir string
	server  *child
	workers map[string]*child
	api     robonetv1.WorkflowServiceClient
	log     string // sleepSpec's log
}

// startWagProcs starts the server and workers w1…wN, heartbeating every
// interval.
func startWagProcs(t testing.TB, workers int, interval string) *wagProcs {
	t.Helper()
	m := &wagProcs{t: t, bin: buildRobonode(t), dataDir: t.TempDir(), workers: map[string]*child{}, log: filepath.Join(t.TempDir(), "starts.log"),
		common: []string{"--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0", "--log-format", "json",
			"--heartbeat-interval", interval, "--shutdown-timeout", "10s",
			"--trust-peer", "*"}} // failover, not trust, is tested here: no node starts on probation
	m.server = startChild(t, m.bin, append(m.common, "--name", "server", "--data-dir", m.dataDir, "--capability", "none")...)
	for i := 1; i <= workers; i++ {
		m.startWorker(fmt.Sprintf("w%d", i))
	}
	m.api = robonetv1.NewWorkflowServiceClient(dial(t, m.server.addr))
	return m
}

// startWorker starts a worker-only node serving code.exec with two slots.
func (m *wagProcs) startWorker(name string) *child {
	c := startChild(m.t, m.bin, append(m.common, "--name", name, "--data-dir", m.t.TempDir(),
		"--join", m.server.gossip, "--capability", "code.exec=2")...)
	m.workers[name] = c
	return c
}

// holder is the running worker node that holds the Waggler role of
// code.exec (from the nodes' logs: it took the role and has not given it
// up).
func (m *wagProcs) holder() string {
	m.t.Helper()
	var h string
	eventually(m.t, 60*time.Second, "a waggler for code.exec", func() bool {
		h = ""
		for name, c := range m.workers {
			logs := c.logText()
			if c.cmd.ProcessState == nil && strings.LastIndex(logs, `"msg":"waggler role taken"`) > strings.LastIndex(logs, `"msg":"waggler role given up"`) {
				h = name
			}
		}
		return h != ""
	})
	return h
}

// mark is a line of sleepSpec's log: a run's start or end.
type mark struct {
	instance, exec, attempt, worker string
	at                              time.Time
}

// node is the node of the worker ("w1/code.exec/2" → "w1").
func (r mark) node() string { return strings.SplitN(r.worker, "/", 2)[0] }

// marks reads the log's lines of kind ("start" or "end") for instance, in
// the order written.
func (m *wagProcs) marks(kind, instance string) []mark {
	var out []mark
	for _, l := range readLines(m.t, m.log) {
		fs := strings.Fields(l)
		if len(fs) != 6 || fs[0] != kind || fs[1] != instance {
			continue // another kind or instance, or a line being written
		}
		ns, err := strconv.ParseInt(fs[5], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, mark{fs[1], fs[2], fs[3], fs[4], time.Unix(0, ns)})
	}
	return out
}

// waitStarts waits until cond holds of instance's starts.
func (m *wagProcs) waitStarts(instance, what string, cond func([]mark) bool) []mark {
	m.t.Helper()
	var got []mark
	eventually(m.t, 120*time.Second, what, func() bool {
		got = m.marks("start", instance)
		return cond(got)
	})
	return got
}

// finish waits for the instance, stops the nodes and returns the instance
// and the worker of each execution's recorded output, having checked that
// each execution was recorded once.
func (m *wagProcs) finish(t *testing.T, id string) (*robonetv1.Instance, map[string]string) {
	t.Helper()
	in := waitDone(t, m.api, id, 90*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	var out struct{ Workers []string }
	if err := json.Unmarshal([]byte(in.GetOutputsJson()), &out); err != nil {
		t.Fatalf("outputs %s: %v", in.GetOutputsJson(), err)
	}
	recorded := map[string]string{} // execution → worker of its recorded output
	for i, w := range out.Workers {
		recorded[fmt.Sprintf("s[%d]", i)] = w
	}
	for _, c := range m.workers {
		if c.cmd.ProcessState == nil {
			c.stop(t)
		}
	}
	if code := m.server.stop(t); code != 0 {
		t.Errorf("the server exited %d after SIGTERM, want 0", code)
	}
	checkOncePerExecution(t, id, taskHistory(t, sqliteStore, m.dataDir, "", "", id), len(out.Workers))
	return in, recorded
}

// A worker node and the Waggler's node SIGKILLed together while a spread
// runs: the leader places a successor, the attempts on live workers are
// inherited and not run again, the dead nodes' attempts run once more on
// live nodes, and every execution is recorded once.
func TestProcessesWorkerAndWagglerKilled(t *testing.T) {
	m := startWagProcs(t, 4, "200ms") // eight slots
	holder := m.holder()
	id := submitSpec(t, m.api, sleepSpec, fmt.Sprintf(`{"n": 6, "secs": 4, "log": %q}`, m.log))
	before := m.waitStarts(id, "six tasks running", func(s []mark) bool { return len(s) == 6 })
	// The other victim: a worker that runs something and is not the
	// holder; the survivors run at least one task between them.
	runsOn := map[string]int{}
	for _, s := range before {
		runsOn[s.node()]++
	}
	victim := ""
	for name, n := range runsOn {
		if name != holder && n > 0 && (victim == "" || name < victim) {
			victim = name
		}
	}
	if victim == "" || runsOn[holder]+runsOn[victim] == 6 {
		t.Skipf("placement left nothing to tell apart (runs per node %v, holder %s)", runsOn, holder)
	}
	m.workers[holder].kill9(t)
	m.workers[victim].kill9(t)
	killed := time.Now()
	dead := map[string]bool{holder: true, victim: true}
	var lost []string
	for _, s := range before {
		if dead[s.node()] {
			lost = append(lost, s.exec)
		}
	}
	after := m.waitStarts(id, "the dead nodes' attempts to start again", func(s []mark) bool { return len(s) == 6+len(lost) })
	t.Logf("killed waggler %s and worker %s; %d attempts moved within %v", holder, victim, len(lost), time.Since(killed).Round(time.Millisecond))
	_, recorded := m.finish(t, id)

	startsOf := map[string][]mark{}
	for _, s := range after {
		startsOf[s.exec] = append(startsOf[s.exec], s)
	}
	for _, s := range before {
		got := startsOf[s.exec]
		switch {
		case dead[s.node()] && (len(got) != 2 || dead[got[1].node()]):
			t.Errorf("%s ran on dead node %s: it must start once more, on a live node: %v", s.exec, s.node(), got)
		case !dead[s.node()] && len(got) != 1:
			t.Errorf("%s ran on live node %s: it must be inherited, not run again: %v", s.exec, s.node(), got)
		}
		if w := recorded[s.exec]; dead[strings.SplitN(w, "/", 2)[0]] {
			t.Errorf("%s: the recorded output came from %s, a killed node", s.exec, w)
		}
	}
}

// A worker node paused (SIGSTOP) past its heartbeat deadline: its attempts
// move to other workers; when it resumes (SIGCONT) its programs have
// finished and it reports them, late — those results are refused, and each
// execution is recorded once, from the worker that took it over.
func TestProcessesWorkerPaused(t *testing.T) {
	m := startWagProcs(t, 3, "200ms") // six slots
	holder := m.holder()
	id := submitSpec(t, m.api, sleepSpec, fmt.Sprintf(`{"n": 3, "secs": 2, "log": %q}`, m.log))
	before := m.waitStarts(id, "three tasks running", func(s []mark) bool { return len(s) == 3 })
	paused := ""
	for _, s := range before {
		if s.node() != holder && (paused == "" || s.node() < paused) {
			paused = s.node()
		}
	}
	if paused == "" {
		t.Skipf("every task runs on the Waggler's node %s", holder)
	}
	var moved []string
	for _, s := range before {
		if s.node() == paused {
			moved = append(moved, s.exec)
		}
	}
	p := m.workers[paused].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	m.waitStarts(id, "the paused node's attempts to start elsewhere", func(s []mark) bool { return len(s) == 3+len(moved) })
	// The heartbeat ladder moved them, through the network path (the
	// paused node's Work stream went silent): every rung, before
	// memberlist's failure detector would have.
	hl := m.workers[holder].logText()
	for _, rung := range []string{`"msg":"missed a heartbeat"`, `"msg":"worker silent: backup pre-selected"`, `"missed":3`} {
		if !strings.Contains(hl, rung) {
			t.Errorf("the Waggler's log (%s) lacks the ladder's %s", holder, rung)
		}
	}
	// Its programs (in sessions of their own) end while it is stopped:
	// when it resumes it has results to report, for attempts that moved.
	eventually(t, 60*time.Second, "the paused node's programs to end", func() bool {
		ended := 0
		for _, e := range m.marks("end", id) {
			if e.node() == paused {
				ended++
			}
		}
		return ended == len(moved)
	})
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_, recorded := m.finish(t, id)
	for _, exec := range moved {
		if w := recorded[exec]; strings.HasPrefix(w, paused+"/") {
			t.Errorf("%s: the recorded output came from %s, the paused node, whose attempt had moved", exec, w)
		}
	}
	t.Logf("paused %s (%v moved); recorded %v", paused, moved, recorded)
}
