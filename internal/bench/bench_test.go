package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// robonode builds the robonode binary for the test.
func robonode(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "robonode")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/robonet/robonet/cmd/robonode").CombinedOutput()
	if err != nil {
		t.Fatalf("go build robonode: %v\n%s", err, out)
	}
	return bin
}

// TestRunEveryScenario runs each scenario small on real processes and
// checks what it reports: every task counted, rates positive, each
// process's usage read, the mesh compared with its single-node twin, and
// on Postgres (when the tests have one) the COPY reference, the ratios to
// it and the write-ahead log per task.
func TestRunEveryScenario(t *testing.T) {
	bin := robonode(t)
	cfg := Config{
		Robonode: []string{bin}, SpreadWidth: 300, Chains: 40, ChainClients: 4, BatchSize: 16, Diamonds: 5,
		Rates: []int{50}, RateDuration: 500 * time.Millisecond, CopyRows: 12_000, Slots: 8,
		Postgres: os.Getenv("ROBONET_TEST_POSTGRES"),
	}
	var progress strings.Builder
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	want := map[string]int{Spread: 300, Chains: 400, ChainsBatch: 400, Diamonds: 5 * diamondTasks, Latency: 25, MeshSpread: 300, MeshChains: 400}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(want))
	}
	for _, r := range rep.Results {
		if r.Tasks != want[r.Scenario] || r.TasksPerS <= 0 || r.SubmitsPerS <= 0 || r.Seconds <= 0 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
		procs := 1
		if strings.HasPrefix(r.Scenario, "mesh-") {
			procs = 4
			if r.OfSingle <= 0 {
				t.Errorf("%s: no share of its single-node twin", r.Scenario)
			}
		}
		if len(r.Nodes) != procs || r.Nodes[0].PeakRSSMiB <= 0 || r.Nodes[0].CPUSeconds <= 0 {
			t.Errorf("%s: usage %+v", r.Scenario, r.Nodes)
		}
		if r.Scenario == Latency && (r.Submit == nil || r.Dispatch == nil || r.Record == nil || r.Submit.P50 <= 0 || r.Record.P50 <= 0) {
			t.Errorf("latency: %+v", r)
		}
		if cfg.Postgres != "" && r.Rate == 0 && (r.OfCopy <= 0 || r.WALBytesPerTask <= 0 || r.ResultRowBytes <= 0) {
			t.Errorf("%s on Postgres: of COPY %.3f, WAL %.0f B/task, row %.0f B", r.Scenario, r.OfCopy, r.WALBytesPerTask, r.ResultRowBytes)
		}
	}
	if cfg.Postgres != "" {
		runs := slices.Clone(rep.CopyRuns)
		slices.Sort(runs)
		if len(runs) != referenceRuns || runs[0] <= 0 || rep.CopyRowsPerSec != runs[len(runs)/2] {
			t.Errorf("COPY reference %.0f rows/s from runs %v: want the median of %d", rep.CopyRowsPerSec, rep.CopyRuns, referenceRuns)
		}
	}

	// The baseline round trip: the run passes its own check, and one
	// where it did better fails it.
	file := filepath.Join(t.TempDir(), "baseline.json")
	if err := SaveBaseline(file, rep); err != nil {
		t.Fatal(err)
	}
	if lines, err := Check(file, rep); err != nil || len(lines) == 0 {
		t.Fatalf("a run against its own baseline: %v %v", lines, err)
	}
	for i := range rep.Results {
		rep.Results[i].OfSingle /= 2
		rep.Results[i].OfCopy /= 2
	}
	if lines, err := Check(file, rep); err == nil || !strings.Contains(strings.Join(lines, "\n"), "REGRESSION") {
		t.Fatalf("ratios halved passed the check: %v", lines)
	}
}

// TestProfilesAndLogs: with a profile directory, every node of a
// scenario writes its CPU profile there (a gzipped pprof file) when it is
// stopped; with a log directory, its whole log goes there.
func TestProfilesAndLogs(t *testing.T) {
	bin := robonode(t)
	dir := filepath.Join(t.TempDir(), "profiles") // created by Run
	logs := filepath.Join(t.TempDir(), "logs")
	cfg := Config{Robonode: []string{bin}, Scenarios: []string{Spread, MeshSpread}, SpreadWidth: 100, Slots: 4, ProfileDir: dir, LogDir: logs}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"spread-server", "mesh-spread-server", "mesh-spread-w1", "mesh-spread-w2", "mesh-spread-w3"} {
		b, err := os.ReadFile(filepath.Join(dir, node+".pprof"))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s.pprof: %d bytes, %v; want a gzipped profile", node, len(b), err)
		}
		b, err = os.ReadFile(filepath.Join(logs, node+".log"))
		if err != nil || !bytes.Contains(b, []byte(`"msg":"node started"`)) || !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("%s.log: %v; want its whole log, from its start:\n%s", node, err, b)
		}
	}
}

// TestConfigRefused: a bad configuration is refused before anything runs.
func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{Robonode: []string{"robonode"}, Scenarios: []string{"nope"}},
		{Robonode: []string{"robonode"}, BatchSize: 1001},
		{Scenarios: []string{Spread}},
		{Robonode: []string{"robonode"}, Rates: []int{0}},
		{Robonode: []string{"robonode"}, Rounds: -1},
		{Robonode: []string{"robonode"}, WorkerProcs: -1},
	} {
		if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), ErrConfig.Error()) {
			t.Errorf("%+v: %v, want a configuration error", c, err)
		}
	}
}

// TestRounds runs a scenario and its mesh twin twice on real processes:
// the scenarios alternate, each mesh run is compared with the single node
// of its own round, and the report gives the medians.
func TestRounds(t *testing.T) {
	bin := robonode(t)
	cfg := Config{Robonode: []string{bin}, Scenarios: []string{Spread, MeshSpread}, SpreadWidth: 100, Slots: 4, Rounds: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, fmt.Sprintf("%s/%d", r.Scenario, r.Round))
	}
	if want := "spread/1 mesh-spread/1 spread/2 mesh-spread/2"; strings.Join(got, " ") != want {
		t.Fatalf("runs %v, want %s", got, want)
	}
	for i := 1; i < len(rep.Results); i += 2 {
		single, mesh := rep.Results[i-1], rep.Results[i]
		if want := mesh.TasksPerS / single.TasksPerS; math.Abs(mesh.OfSingle-want) > 1e-9 {
			t.Errorf("round %d: mesh at %.3f of one node, want %.3f (its own round's)", mesh.Round, mesh.OfSingle, want)
		}
	}
	if rep.Rounds != 2 || len(rep.Medians) != 2 || rep.Medians[1].Scenario != MeshSpread || rep.Medians[1].Rounds != 2 {
		t.Fatalf("rounds %d, medians %+v", rep.Rounds, rep.Medians)
	}
	m := rep.Medians[1].OfSingle
	if lo, hi := min(rep.Results[1].OfSingle, rep.Results[3].OfSingle), max(rep.Results[1].OfSingle, rep.Results[3].OfSingle); m.Min != lo || m.Max != hi || math.Abs(m.Median-(lo+hi)/2) > 1e-9 {
		t.Errorf("mesh's share of one node over the rounds: %+v, want %.3f to %.3f", m, lo, hi)
	}
}

// TestMediansOverRounds: a figure's median and range over the rounds,
// and the baseline's ratios are the medians.
func TestMediansOverRounds(t *testing.T) {
	for _, c := range []struct {
		vs   []float64
		want Range
	}{
		{nil, Range{}},
		{[]float64{3}, Range{3, 3, 3}},
		{[]float64{5, 1, 3}, Range{3, 1, 5}},
		{[]float64{4, 1, 3, 10}, Range{3.5, 1, 10}},
	} {
		if got := rangeOf(c.vs); got != c.want {
			t.Errorf("rangeOf(%v) = %+v, want %+v", c.vs, got, c.want)
		}
	}
	rep := &Report{Results: []Result{
		{Scenario: Chains, Round: 1, TasksPerS: 100, OfCopy: 0.5},
		{Scenario: MeshChains, Round: 1, TasksPerS: 60, OfSingle: 0.6},
		{Scenario: Chains, Round: 2, TasksPerS: 120, OfCopy: 0.7},
		{Scenario: MeshChains, Round: 2, TasksPerS: 96, OfSingle: 0.8},
		{Scenario: Chains, Round: 3, TasksPerS: 110, OfCopy: 0.6},
		{Scenario: MeshChains, Round: 3, TasksPerS: 99, OfSingle: 0.9},
	}}
	got := ratios(rep)
	if want := map[string]float64{"chains/copy": 0.6, "mesh-chains/one-node": 0.8}; !maps.Equal(got, want) {
		t.Errorf("ratios %v, want the medians %v", got, want)
	}
	sum := summarise(rep.Results)
	if len(sum) != 2 || sum[0].Scenario != Chains || sum[0].TasksPerS != (Range{110, 100, 120}) ||
		sum[1].OfSingle != (Range{0.8, 0.6, 0.9}) || sum[1].Rounds != 3 {
		t.Errorf("summary %+v", sum)
	}
}

// Worker nodes get GOMAXPROCS when it is set, on top of the common
// environment, which stays as it was.
func TestWorkerEnv(t *testing.T) {
	c := Config{Env: []string{"A=1"}}
	if got := c.workerEnv(); !slices.Equal(got, []string{"A=1"}) {
		t.Fatalf("default: %q", got)
	}
	c.WorkerProcs = 1
	if got := c.workerEnv(); !slices.Equal(got, []string{"A=1", "GOMAXPROCS=1"}) || !slices.Equal(c.Env, []string{"A=1"}) {
		t.Fatalf("GOMAXPROCS 1: %q (common %q)", got, c.Env)
	}
}
