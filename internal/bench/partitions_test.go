package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPartitionsRefused: the partitions scenario refuses to start without
// Postgres, with caps that leave the uncapped processes nothing, and
// without a cpu controller.
func TestPartitionsRefused(t *testing.T) {
	empty := t.TempDir()
	v2NoCPU := layout(t, map[string]string{"cgroup.controllers": "memory pids"})
	for _, c := range []Config{
		{Robonode: []string{"robonode"}, Scenarios: []string{Partitions}},                                                       // no Postgres
		{Robonode: []string{"robonode"}, Scenarios: []string{Partitions}, Postgres: "postgres://x/y", cpus: 2, ServerCPUs: 0.7}, // 3 × 0.7 > 2
		{Robonode: []string{"robonode"}, Scenarios: []string{Partitions}, Postgres: "postgres://x/y", cgroupV1: empty, cgroupV2: v2NoCPU},
	} {
		c.defaults()
		if err := c.check(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want a configuration error", c, err)
		}
	}
}

// TestScale: the share of the CPU the caps left that the uncapped
// processes used, and the busiest server's CPU per 1,000 tasks.
func TestScale(t *testing.T) {
	s := &Scaling{Servers: 2, CapCPUs: 0.25, CPUs: 2}
	s.scale([]NodeUsage{{Node: "s1", CPUSeconds: 2.5}, {Node: "s2", CPUSeconds: 0.5},
		{Node: "w1", CPUSeconds: 4}, {Node: "w2", CPUSeconds: 1}, {Node: "postgres", CPUSeconds: 4}}, 20_000, 10)
	// Left: (2 − 2 × 0.25) × 10 s = 15 CPU s; used 4 + 1 + 4 = 9.
	if s.LeftCPUSeconds != 15 || s.UncappedCPUSeconds != 9 || math.Abs(s.UncappedShare-0.6) > 1e-9 {
		t.Errorf("left %.2f, uncapped %.2f, share %.3f; want 15, 9, 0.6", s.LeftCPUSeconds, s.UncappedCPUSeconds, s.UncappedShare)
	}
	if s.BusiestServer != "s1" || s.BusiestCPUPer1k != 0.125 {
		t.Errorf("busiest %s at %.3f s/1k, want s1 at 0.125", s.BusiestServer, s.BusiestCPUPer1k)
	}
	s.PostgresRead = true
	if s.Valid() || !strings.Contains(s.Warning(), "60%") {
		t.Errorf("a share of 60%% passed as valid: %q", s.Warning())
	}
	s.scale([]NodeUsage{{Node: "s1", CPUSeconds: 2.5}, {Node: "s2", CPUSeconds: 0.5}, {Node: "w1", CPUSeconds: 3}}, 20_000, 10)
	if !s.Valid() || s.Warning() != "" {
		t.Errorf("a share of %.2f flagged: %q", s.UncappedShare, s.Warning())
	}
	s.PostgresRead = false
	if s.Valid() || !strings.Contains(s.Warning(), "Postgres") {
		t.Errorf("a run without Postgres' CPU passed as valid: %q", s.Warning())
	}
}

// TestVerdict: each size against one server, and the verdict against
// the target of issue 34: met, missed, invalid, and incomplete.
func TestVerdict(t *testing.T) {
	run := func(servers int, tasksPerS, per1k, share float64) Result {
		return Result{Scenario: Partitions, TasksPerS: tasksPerS,
			Scaling: &Scaling{Servers: servers, BusiestCPUPer1k: per1k, UncappedShare: share, PostgresRead: true}}
	}
	round := func(rs ...Result) []Result {
		ptrs := make([]*Result, len(rs))
		for i := range rs {
			ptrs[i] = &rs[i]
		}
		compare(ptrs)
		return rs
	}
	met := round(run(1, 1000, 0.30, 0.3), run(2, 1800, 0.25, 0.4), run(3, 2500, 0.33, 0.5))
	if got := met[2].Scaling; math.Abs(got.OfOneServer-2.5) > 1e-9 || math.Abs(got.BusiestOfOneServer-1.1) > 1e-9 {
		t.Fatalf("3 servers: %.3f× tasks/s, %.3f× CPU per 1k; want 2.5, 1.1", got.OfOneServer, got.BusiestOfOneServer)
	}
	for _, c := range []struct {
		rs        []Result
		want, not string
	}{
		{met, ": MET", "valid"},
		{round(run(1, 1000, 0.30, 0.3), run(2, 1050, 0.30, 0.3), run(3, 1100, 0.30, 0.3)), "NOT MET — 2 servers 1.05×, 3 servers 1.10×", "valid"},
		{round(run(1, 1000, 0.30, 0.3), run(2, 1800, 0.25, 0.4), run(3, 2500, 0.40, 0.5)), "NOT MET", "valid"}, // CPU 1.33×
		{round(run(1, 1000, 0.30, 0.3), run(2, 1800, 0.25, 0.4), run(3, 2500, 0.33, 0.7)), "not a valid measurement at 3 server(s)", "NOT"},
		{round(run(1, 1000, 0.30, 0.3), run(3, 2500, 0.33, 0.5)), "not measured", "MET"},
	} {
		got := verdict(c.rs)
		if !strings.HasPrefix(got, "target of issue 34") || !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("verdict %q: want %q, not %q", got, c.want, c.not)
		}
	}
	// Over several rounds: a line per round.
	var rs []Result
	for r := 1; r <= 2; r++ {
		for _, x := range round(run(1, 1000, 0.3, 0.3), run(2, 1000, 0.3, 0.3), run(3, 1000, 0.3, 0.3)) {
			x.Round = r
			rs = append(rs, x)
		}
	}
	rs = append(rs, Result{Scenario: Chains, Round: 1})
	if v := verdicts(rs); len(v) != 2 || !strings.HasPrefix(v[1], "round 2: target of issue 34") {
		t.Errorf("verdicts %q", v)
	}
}

// TestParseStat: /proc/PID/stat, a command name with spaces and ')' in
// it included.
func TestParseStat(t *testing.T) {
	line := "4242 (post gres) x) S 17 4242 4242 0 -1 4194560 900 0 0 0 120 30 7 3 20 0 1 0 5000 1000 200\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != "post gres) x" || st.ppid != 17 || st.ticks != 150 || st.childTicks != 10 {
		t.Errorf("%+v", st)
	}
	if _, err := parseStat([]byte("12 (x) S 1 2")); err == nil {
		t.Error("a short stat line parsed")
	}
	if st, err := readStat(os.Getpid()); err != nil || st.ppid != os.Getppid() {
		t.Errorf("this process's stat: %+v, %v", st, err)
	}
}

// TestPartitionsScenario runs the partitions scenario small on real
// processes, where the tests have Postgres and a cgroup cpu controller
// they may write (root): every size measured, each server capped and
// compared with one server, Postgres' CPU read, a verdict, and no cap
// left behind.
func TestPartitionsScenario(t *testing.T) {
	dsn := os.Getenv("ROBONET_TEST_POSTGRES")
	if dsn == "" || testing.Short() {
		t.Skip("needs ROBONET_TEST_POSTGRES (scripts/with-postgres), and not -short")
	}
	root, err := findCgroupRoot(cgroupV1CPU, cgroupV2)
	if err != nil {
		t.Skipf("no cgroup to cap the servers with: %v", err)
	}
	cfg := Config{Robonode: []string{robonode(t)}, Postgres: dsn, Scenarios: []string{Partitions},
		Chains: 60, BatchSize: 20, Spreads: 3, SpreadsWidth: 100, Slots: 8, CopyRows: 5000}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(partitionSizes) || len(rep.Verdicts) != 1 || !strings.HasPrefix(rep.Verdicts[0], "target of issue 34") {
		t.Fatalf("%d results, verdicts %q", len(rep.Results), rep.Verdicts)
	}
	for i, r := range rep.Results {
		sc := r.Scaling
		if r.Tasks != 60*10+3*100 || r.TasksPerS <= 0 || sc == nil || sc.Servers != partitionSizes[i] || sc.CapCPUs != 0.25 ||
			sc.OfOneServer <= 0 || sc.BusiestCPUPer1k <= 0 || sc.LeftCPUSeconds <= 0 || len(sc.Owners) == 0 {
			t.Errorf("%s: %+v, scaling %+v", r.Label(), r, sc)
			continue
		}
		if want := sc.Servers + partitionWorkers + 1; len(r.Nodes) != want || r.Nodes[len(r.Nodes)-1].Node != "postgres" {
			t.Errorf("%s: processes %+v, want the servers, %d worker nodes and Postgres", r.Label(), r.Nodes, partitionWorkers)
		}
		for _, n := range r.Nodes[:sc.Servers] {
			if n.CapCPUs != 0.25 {
				t.Errorf("%s: server %s not capped: %+v", r.Label(), n.Node, n)
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root.dir, fmt.Sprintf("robonet-bench-%d-*", os.Getpid()))); len(left) > 0 {
		t.Errorf("caps left behind: %v", left)
	}
}
