package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CPU caps of single processes: a cgroup of its own per process, with a
// CFS quota, as a container's --cpus sets one. The partitions scenario
// caps each server with one, so that the servers are the bound whatever
// else the machine runs.

// The cgroup hierarchies a cap is made in, as Linux mounts them.
const (
	cgroupV1CPU = "/sys/fs/cgroup/cpu" // cgroup v1's cpu controller
	cgroupV2    = "/sys/fs/cgroup"     // the unified hierarchy
)

// cfsPeriod is the CFS period of every cap, in microseconds (the
// kernel's default).
const cfsPeriod = 100_000

// ErrNoCgroup marks a machine where the bench cannot cap a process's CPU.
var ErrNoCgroup = errors.New("no writable cgroup CPU controller")

// cgroupRoot is a hierarchy caps are made in: version 1 (a cpu
// controller's mount) or 2 (a unified hierarchy with the cpu controller).
type cgroupRoot struct {
	dir     string
	version int
}

// findCgroupRoot returns the first of a cgroup v1 cpu controller at v1
// and a unified hierarchy at v2 offering the cpu controller (the files
// cpu.cfs_quota_us, or cgroup.controllers naming cpu), and checks that a
// cgroup can be made in it.
func findCgroupRoot(v1, v2 string) (*cgroupRoot, error) {
	var root *cgroupRoot
	if _, err := os.Stat(filepath.Join(v1, "cpu.cfs_quota_us")); err == nil {
		root = &cgroupRoot{dir: v1, version: 1}
	} else if b, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(b)), "cpu") {
		root = &cgroupRoot{dir: v2, version: 2}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: neither %s (cgroup v1, cpu.cfs_quota_us) nor %s (cgroup v2, cpu in cgroup.controllers) is there: "+
			"run on Linux with the cpu controller mounted", ErrNoCgroup, v1, v2)
	}
	probe, err := root.newGroup(fmt.Sprintf("robonet-bench-%d-probe", os.Getpid()), 1)
	if err != nil {
		return nil, err
	}
	if err := probe.remove(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	root.sweep()
	return root, nil
}

// String names the hierarchy and the files a cap writes.
func (r *cgroupRoot) String() string {
	if r.version == 1 {
		return fmt.Sprintf("cgroup v1 %s, cpu.cfs_quota_us / cpu.cfs_period_us", r.dir)
	}
	return fmt.Sprintf("cgroup v2 %s, cpu.max", r.dir)
}

// sweep removes the caps of earlier bench processes that no longer run
// (killed before they could remove them); a cgroup that still holds a
// process is not removed.
func (r *cgroupRoot) sweep() {
	dirs, _ := filepath.Glob(filepath.Join(r.dir, "robonet-bench-*"))
	for _, d := range dirs {
		f := strings.SplitN(strings.TrimPrefix(filepath.Base(d), "robonet-bench-"), "-", 2)
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // that bench still runs
		}
		_ = os.Remove(d)
	}
}

// cgroup is one cap.
type cgroup struct {
	root *cgroupRoot
	dir  string
	cpus float64
}

// newGroup makes the cgroup name capped at cpus CPUs.
func (r *cgroupRoot) newGroup(name string, cpus float64) (*cgroup, error) {
	quota := int64(cpus * cfsPeriod)
	if quota < 1000 { // the kernel's least quota, 1 ms
		return nil, fmt.Errorf("a cap of %g CPUs is below the least quota (0.01)", cpus)
	}
	g := &cgroup{root: r, dir: filepath.Join(r.dir, name), cpus: cpus}
	if r.version == 2 {
		// A child gets the cpu controller only when its parent hands it
		// down (the root cgroup may hold processes and still do that).
		if err := enableController(r.dir, "cpu"); err != nil {
			return nil, fmt.Errorf("%w: %w: run as root, or where %s is delegated to you", ErrNoCgroup, err, r.dir)
		}
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %w: run as root (the bench writes a cgroup per server), or with a writable %s", ErrNoCgroup, err, r.dir)
	}
	var err error
	if r.version == 1 {
		err = errors.Join(writeFile(g.dir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)),
			writeFile(g.dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)))
	} else {
		err = writeFile(g.dir, "cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriod))
	}
	if err != nil {
		_ = g.remove()
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	return g, nil
}

// enableController adds controller to dir's cgroup.subtree_control
// unless it is there already.
func enableController(dir, controller string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && slices.Contains(strings.Fields(string(b)), controller) {
		return nil
	}
	return writeFile(dir, "cgroup.subtree_control", "+"+controller)
}

func writeFile(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// add moves the process pid (every thread of it) into the cgroup.
func (g *cgroup) add(pid int) error {
	if err := writeFile(g.dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("capping process %d: %w", pid, err)
	}
	return nil
}

// throttle reads the cap's CFS periods so far and those in which it
// held the processes back (cpu.stat, both versions).
func (g *cgroup) throttle() (periods, throttled int64) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_periods":
			periods = v
		case "nr_throttled":
			throttled = v
		}
	}
	return periods, throttled
}

// remove deletes the cgroup. Its processes must have ended (a cgroup
// that holds one cannot be removed); the kernel may take a moment to see
// a reaped one leave, so it tries for a second. Outside a cgroup file
// system (a test's directory) the files go too.
func (g *cgroup) remove() error {
	var err error
	for range 100 {
		if err = os.RemoveAll(g.dir); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("removing the cgroup %s (does a process still run in it? %s lists them): %w",
		g.dir, filepath.Join(g.dir, "cgroup.procs"), err)
}
