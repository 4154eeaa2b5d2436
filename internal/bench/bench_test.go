package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	if cfg.Postgres != "" && rep.CopyRowsPerSec <= 0 {
		t.Errorf("no COPY reference: %+v", rep)
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

// TestProfiles: with a profile directory, every node of a scenario writes
// its CPU profile there (a gzipped pprof file) when it is stopped.
func TestProfiles(t *testing.T) {
	bin := robonode(t)
	dir := filepath.Join(t.TempDir(), "profiles") // created by Run
	cfg := Config{Robonode: []string{bin}, Scenarios: []string{Spread, MeshSpread}, SpreadWidth: 100, Slots: 4, ProfileDir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"spread-server.pprof", "mesh-spread-server.pprof", "mesh-spread-w1.pprof", "mesh-spread-w2.pprof", "mesh-spread-w3.pprof"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes, %v; want a gzipped profile", f, len(b), err)
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
	} {
		if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), ErrConfig.Error()) {
			t.Errorf("%+v: %v, want a configuration error", c, err)
		}
	}
}
