package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout writes files (name → content) under a new directory laid out
// like a cgroup hierarchy.
func layout(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCgroupV1: a cap on a cgroup v1 cpu controller writes the CFS period
// and quota, takes a process into cgroup.procs, reads the throttling of
// cpu.stat and is removed; the probe leaves nothing, and the sweep
// removes an ended bench's cap but not a running one's.
func TestCgroupV1(t *testing.T) {
	root := layout(t, map[string]string{"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cgroup.procs": ""})
	stale := filepath.Join(root, "robonet-bench-2147483647-s1") // no such process
	mine := filepath.Join(root, fmt.Sprintf("robonet-bench-%d-s9", os.Getpid()))
	for _, d := range []string{stale, mine} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := findCgroupRoot(root, filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	if r.version != 1 || r.dir != root || !strings.Contains(r.String(), "cgroup v1") {
		t.Fatalf("root %+v (%s), want v1 at %s", r, r, root)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an ended bench's cap is still there: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("this bench's cap was swept: %v", err)
	}
	if probes, _ := filepath.Glob(filepath.Join(root, "*probe*")); len(probes) > 0 {
		t.Errorf("the probe was left behind: %v", probes)
	}

	g, err := r.newGroup("robonet-bench-test-s1", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(g.dir, "cpu.cfs_period_us")); got != "100000" {
		t.Errorf("cpu.cfs_period_us %q", got)
	}
	if got := readFile(t, filepath.Join(g.dir, "cpu.cfs_quota_us")); got != "25000" {
		t.Errorf("cpu.cfs_quota_us %q, want 25000 (a quarter of the period)", got)
	}
	if err := g.add(4321); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(g.dir, "cgroup.procs")); got != "4321" {
		t.Errorf("cgroup.procs %q", got)
	}
	if err := os.WriteFile(filepath.Join(g.dir, "cpu.stat"), []byte("nr_periods 200\nnr_throttled 150\nthrottled_time 9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, th := g.throttle(); p != 200 || th != 150 {
		t.Errorf("throttle %d of %d periods, want 150 of 200", th, p)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.dir); !os.IsNotExist(err) {
		t.Errorf("the cap is still there after remove: %v", err)
	}
	if _, err := r.newGroup("too-small", 0.001); err == nil {
		t.Error("a cap below the kernel's least quota was made")
	}
}

// TestCgroupV2: on the unified hierarchy the root hands the cpu
// controller down and a cap writes cpu.max.
func TestCgroupV2(t *testing.T) {
	root := layout(t, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": "memory\n"})
	r, err := findCgroupRoot(filepath.Join(t.TempDir(), "no-v1"), root)
	if err != nil {
		t.Fatal(err)
	}
	if r.version != 2 {
		t.Fatalf("version %d, want 2", r.version)
	}
	g, err := r.newGroup("robonet-bench-test-s1", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "cgroup.subtree_control")); got != "+cpu" {
		t.Errorf("cgroup.subtree_control %q, want +cpu written", got)
	}
	if got := readFile(t, filepath.Join(g.dir, "cpu.max")); got != "50000 100000" {
		t.Errorf("cpu.max %q", got)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
}

// TestNoCgroup: without a cpu controller the error says so, and what
// to do.
func TestNoCgroup(t *testing.T) {
	empty := t.TempDir()
	v2NoCPU := layout(t, map[string]string{"cgroup.controllers": "memory pids"})
	_, err := findCgroupRoot(empty, v2NoCPU)
	if !errors.Is(err, ErrNoCgroup) || !strings.Contains(err.Error(), "cpu controller") {
		t.Fatalf("%v, want ErrNoCgroup saying what is missing", err)
	}
}
