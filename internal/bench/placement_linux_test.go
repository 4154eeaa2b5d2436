package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/robonet/robonet/internal/childproc"
)

// TestSplitPlacement: with Placement Split the server runs on the first
// half of the CPUs and each worker node on the second half — every
// thread of each, from its start — and the bench's own thread is given
// its mask back.
func TestSplitPlacement(t *testing.T) {
	all, err := childproc.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Skipf("this process may run on %d CPU; a split needs 2", len(all))
	}
	cfg := Config{Robonode: []string{robonode(t)}, Placement: Split, Slots: 2}
	cfg.defaults()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg, err := start(ctx, &cfg, "placement", true)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.stop()
	server, workers := cpuList(all[:len(all)/2]), cpuList(all[len(all)/2:])
	for _, p := range tg.procs {
		want := workers
		if p.name == "server" {
			want = server
		}
		threads, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.cmd.Process.Pid))
		if err != nil || len(threads) < 2 {
			t.Fatalf("%s: threads %v, %v", p.name, threads, err)
		}
		for _, th := range threads {
			if got := allowedList(t, th); got != want {
				t.Errorf("%s, %s: Cpus_allowed_list %s, want %s", p.name, th, got, want)
			}
		}
	}
	after, err := childproc.AllowedCPUs()
	if err != nil || cpuList(after) != cpuList(all) {
		t.Errorf("the bench may run on %v after starting the nodes (%v), want %v", after, err, all)
	}
}

// TestPlacementRefused: an unknown placement is a configuration error.
func TestPlacementRefused(t *testing.T) {
	cfg := Config{Robonode: []string{"robonode"}, Placement: "spread-out"}
	cfg.defaults()
	if err := cfg.check(); err == nil || !strings.Contains(err.Error(), `placement "spread-out": want shared or split`) {
		t.Fatalf("check = %v", err)
	}
}

// cpuList writes CPUs as the kernel's Cpus_allowed_list does for the
// lists used here (each CPU on its own, comma-separated, ranges joined).
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// allowedList reads Cpus_allowed_list from a /proc status file.
func allowedList(t *testing.T, status string) string {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s: no Cpus_allowed_list", status)
	return ""
}

// TestUsageCountsLessThanATick: a process that ran for less than a clock
// tick in all (a sleep) still reads a CPU time above zero; /proc's tick
// counts alone read 0 for it, which made a small bench run report a
// node's CPU as 0.
func TestUsageCountsLessThanATick(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var u usage
	// The scheduler brings a thread's count up to date when it switches
	// it out: poll until the new process has been (it was running exec).
	for range 50 {
		var err error
		if u, err = usageOf(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if u.CPU > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if u.CPU <= 0 || u.CPU >= time.Second {
		t.Fatalf("a sleeping process's CPU reads %v", u.CPU)
	}
	if u.PeakRSS <= 0 {
		t.Fatalf("peak RSS %d", u.PeakRSS)
	}
}

// benchParentEnv makes the test binary play a bench that starts a child
// (childproc.StartOn, on the CPUs the variable names, "" for all), prints
// its pid and waits to be killed.
const benchParentEnv = "ROBONET_BENCH_TEST_PARENT"

// TestChildrenDieWithTheBench: a bench killed mid-run (SIGKILL here; a
// closed pipe on its output did it in practice) takes the nodes it started
// with it, whether or not it confined them to CPUs.
func TestChildrenDieWithTheBench(t *testing.T) {
	if cpus, ok := os.LookupEnv(benchParentEnv); ok {
		var mask []int
		if cpus != "" {
			mask = []int{0}
		}
		child := exec.Command("sleep", "60")
		if err := childproc.StartOn(child, mask); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("child", child.Process.Pid)
		time.Sleep(time.Minute) // until the test kills this process
		os.Exit(1)
	}
	for _, cpus := range []string{"", "0"} {
		t.Run("cpus="+cpus, func(t *testing.T) {
			parent := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithTheBench$")
			parent.Env = append(os.Environ(), benchParentEnv+"="+cpus)
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			line, err := bufio.NewReader(out).ReadString('\n')
			if _, scanErr := fmt.Sscanf(line, "child %d", &pid); err != nil || scanErr != nil {
				_ = parent.Process.Kill()
				_ = parent.Wait()
				t.Fatalf("the parent printed %q (%v)", line, err)
			}
			alive := func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				// Reaped, or a zombie waiting for its new parent to reap it.
				return err == nil && !strings.Contains(string(b), ") Z ")
			}
			defer func() {
				if alive() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			if !alive() {
				t.Fatalf("child %d is not running while its parent is", pid)
			}
			_ = parent.Process.Kill()
			_ = parent.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for alive() {
				if time.Now().After(deadline) {
					t.Fatalf("child %d still runs 10 s after its parent was killed", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
