//go:build linux

package wag

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Containment of what an exec attempt leaves behind once its process group
// is killed (see "Built-in actions" in the package doc). Two mechanisms:
//
//   - a cgroup v2 sub-cgroup per attempt, when this node runs in a cgroup
//     delegated to it: the child is cloned straight into it
//     (SysProcAttr.UseCgroupFD, no window in which it could fork outside)
//     and the attempt ends with cgroup.kill, which reaches every process in
//     the cgroup whatever its session, group or environment;
//   - otherwise, a scan of /proc for processes whose environment holds the
//     attempt's ROBONET_EXEC_TOKEN entry, each killed with SIGKILL.
//
// The scan reads /proc/PID/environ of every process, at the end of every
// attempt (nothing cheaper tells whether a descendant escaped). Measured
// with BenchmarkTokenScan on a 2-vCPU Firecracker VM, kernel 6.18: 0.11 ms
// with 75 processes (half of them kernel threads, which cost little),
// 1.3 ms with 425 (≈3 µs a user process); several times that on a machine
// busy with other work.
//
// A process in the middle of an execve shows an empty environment for a
// moment (the new program's is not set up yet), so a descendant caught
// there would be missed: processes with an empty environment that started
// after the attempt's first process and are neither zombies nor kernel
// threads are read again, a few times over at most 127 ms, until their
// environment appears (see tokenSweep.recheck). Telling those apart reads
// /proc/PID/stat of every process with an empty environment, kernel
// threads included: BenchmarkTokenSweep, the whole sweep, took 0.42 ms
// where BenchmarkTokenScan took 0.35–0.41 ms (68 processes, 59 of them
// kernel threads; the same VM on another day).

const (
	// maxScanRounds bounds the /proc scans of one attempt: a scan is
	// repeated until it finds no process it has not killed yet, which
	// catches children forked while the previous scan ran.
	maxScanRounds = 8
	// cgroupPrefix names the sub-cgroups of attempts.
	cgroupPrefix = "robonet-exec-"
	// accessW is W_OK for access(2).
	accessW = 0x2
	// pfKthread is PF_KTHREAD, the flag of kernel threads in
	// /proc/PID/stat.
	pfKthread = 0x00200000
)

// recheckPauses are the waits before each new read of the environments
// that were empty, possibly caught mid-execve: 127 ms in all, paid only
// when such a process exists (one that cleared its environment, say).
var recheckPauses = []time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond,
	8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond}

// cgroupsFailed is set when a child could not be started in a cgroup but
// could without one (a seccomp filter refusing clone3, say): later attempts
// do not try cgroups again.
var cgroupsFailed atomic.Bool

// delegatedCgroup is the cgroup directory attempts get sub-cgroups of, found
// once per process; "" when this node has none.
var delegatedCgroup = sync.OnceValue(func() string {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	dir := cgroup2Dir(self, mounts)
	if dir == "" || !cgroupDelegated(dir) || !usableCgroupParent(dir) {
		return ""
	}
	return dir
})

// usableCgroupParent reports whether sub-cgroups can be made and killed
// under dir: it is writable and the kernel has cgroup.kill (5.14+; a
// non-root cgroup always shows it when the kernel has it).
func usableCgroupParent(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return false
	}
	return syscall.Access(dir, accessW) == nil
}

// cgroupDelegated reports whether dir carries the delegation mark systemd
// puts on the cgroup of a unit with Delegate=yes. A cgroup without it
// belongs to whoever manages the hierarchy, even when root may write to it.
func cgroupDelegated(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		n, err := syscall.Getxattr(dir, attr, buf)
		if err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// cgroup2Dir is the directory of this process's cgroup v2 cgroup, given
// /proc/self/cgroup and /proc/self/mountinfo, or "" when it is in no
// cgroup2 mount this process can see, or in the root cgroup (of the
// hierarchy or of its cgroup namespace), which is never delegated.
func cgroup2Dir(selfCgroup, mountinfo []byte) string {
	var path string
	for line := range strings.Lines(string(selfCgroup)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			path = p
		}
	}
	// "/.." starts the path of a cgroup outside this process's cgroup
	// namespace, which it cannot see.
	if !strings.HasPrefix(path, "/") || path == "/" || strings.Contains(path, "/..") || strings.HasSuffix(path, " (deleted)") {
		return ""
	}
	for line := range strings.Lines(string(mountinfo)) {
		// id parent major:minor root mountpoint options [optional...] - fstype source super-options
		pre, post, ok := strings.Cut(strings.TrimRight(line, "\n"), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		root, mountpoint := unescapeMountinfo(f[3]), unescapeMountinfo(f[4])
		rel, ok := strings.CutPrefix(path, root)
		if !ok || (root != "/" && rel != "" && !strings.HasPrefix(rel, "/")) {
			continue
		}
		return filepath.Join(mountpoint, rel)
	}
	return ""
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, …) of a
// path in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// containment is what kills the escaped descendants of one attempt.
type containment struct {
	entry  []byte         // the attempt's "ROBONET_EXEC_TOKEN=..." environment entry
	since  uint64         // start time of the attempt's first process, in clock ticks since boot (0: unknown)
	cgroup *attemptCgroup // nil: the /proc scan
}

// startContained starts the command newCmd builds, in a sub-cgroup of its
// own when the node has a delegated cgroup v2 cgroup (cgroupParent, nil to
// detect one), else marked by its token alone.
func startContained(newCmd func() *exec.Cmd, token string, cgroupParent func() string) (*exec.Cmd, *containment, error) {
	c := &containment{entry: []byte(execTokenVar + "=" + token)}
	cmd, err := c.start(newCmd, token, cgroupParent)
	if err != nil {
		return nil, nil, err
	}
	c.since = startTimeOf(cmd.Process.Pid)
	return cmd, c, nil
}

// start starts the command, in a sub-cgroup of its own (c.cgroup) when it
// can.
func (c *containment) start(newCmd func() *exec.Cmd, token string, cgroupParent func() string) (*exec.Cmd, error) {
	if cgroupParent == nil {
		cgroupParent = delegatedCgroup
	}
	cmd := newCmd()
	if parent := cgroupParent(); parent != "" && !cgroupsFailed.Load() && cmd.Err == nil {
		if g, err := newAttemptCgroup(parent, token); err == nil {
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = g.fd
			err := cmd.Start()
			g.closeFD()
			if err == nil {
				c.cgroup = g
				return cmd, nil
			}
			g.remove()
			cmd = newCmd()
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			cgroupsFailed.Store(true) // the cgroup was the trouble
			return cmd, nil
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// startTimeOf is the start time of a child not yet waited for (so its
// /proc entry is there, a zombie at worst), or 0 when it cannot be read.
func startTimeOf(pid int) uint64 {
	st, ok := readStat("/proc/"+strconv.Itoa(pid)+"/stat", nil)
	if !ok {
		return 0
	}
	return st.start
}

// release kills whatever of the attempt is still running once its process
// group was killed: the cgroup's processes, or the processes holding the
// token. Its error says that processes may have survived: /proc could not
// be listed, or new token holders kept appearing (a fork bomb racing the
// scan).
func (c *containment) release() error {
	if c.cgroup != nil {
		err := c.cgroup.kill()
		c.cgroup.remove()
		if err == nil {
			return nil
		}
		// Without cgroup.kill, the token still finds them.
	}
	return killTokenHolders(c.entry, c.since)
}

// killTokenHolders kills every process whose environment holds entry (but
// never this process or init), scanning /proc until a scan finds no
// process it has not signalled yet: one scan when nothing escaped, usually
// two otherwise. since is the start time of the attempt's first process.
func killTokenHolders(entry []byte, since uint64) error {
	s := tokenSweep{
		proc: "/proc", entry: entry, since: since, self: os.Getpid(),
		kill:  func(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }, // gone already, or not ours
		pause: time.Sleep,
	}
	return s.run()
}

// tokenSweep is one attempt's killTokenHolders, with the proc filesystem,
// the signal and the clock replaceable by tests.
type tokenSweep struct {
	proc  string // "/proc"
	entry []byte
	since uint64
	self  int
	kill  func(pid int)
	pause func(time.Duration)

	killed map[int]bool
	fresh  int // processes signalled by the current round
	buf    []byte
}

func (s *tokenSweep) run() error {
	s.killed = make(map[int]bool)
	for range maxScanRounds {
		s.fresh = 0
		var unsure []int
		var err error
		s.buf, err = scanEnvirons(s.proc, s.entry, s.buf, s.found, func(pid int) { unsure = append(unsure, pid) })
		if err != nil {
			return err
		}
		s.recheck(unsure)
		if s.fresh == 0 {
			return nil
		}
	}
	return fmt.Errorf("processes holding the attempt's token were still appearing after %d scans of /proc", maxScanRounds)
}

// found signals a process holding the token, once.
func (s *tokenSweep) found(pid int) {
	if pid == s.self || pid == 1 || s.killed[pid] {
		return
	}
	s.killed[pid] = true
	s.fresh++
	s.kill(pid)
}

// recheck reads again the environments a scan found empty, of processes
// that may be descendants caught in the middle of an execve: not zombies,
// not kernel threads (whose environments are always empty), started no
// earlier than the attempt. It waits a little longer before each read
// (recheckPauses) and stops as soon as every one of them has an
// environment or is gone; a process whose environment stays empty (one
// that cleared it) is given up on.
func (s *tokenSweep) recheck(unsure []int) {
	suspects := unsure[:0]
	for _, pid := range unsure {
		st, ok := readStat(s.pidFile(pid, "stat"), s.buf)
		if ok && st.state != 'Z' && st.state != 'X' && st.flags&pfKthread == 0 && st.start >= s.since {
			suspects = append(suspects, pid)
		}
	}
	for _, d := range recheckPauses {
		if len(suspects) == 0 {
			return
		}
		s.pause(d)
		still := suspects[:0]
		for _, pid := range suspects {
			var ok bool
			s.buf, ok = readProcFile(s.pidFile(pid, "environ"), s.buf)
			switch {
			case !ok: // gone
			case len(s.buf) == 0:
				still = append(still, pid)
			case environHas(s.buf, s.entry):
				s.found(pid)
			}
		}
		suspects = still
	}
}

func (s *tokenSweep) pidFile(pid int, name string) string {
	return s.proc + "/" + strconv.Itoa(pid) + "/" + name
}

// scanEnvirons calls found with the pid of every process under procDir
// whose environ holds entry as a whole NUL-separated entry, and empty with
// the pid of every process whose environ is empty. Processes that vanish
// or whose environ cannot be read are skipped. buf is reused for reading
// and returned for the next scan.
func scanEnvirons(procDir string, entry, buf []byte, found, empty func(pid int)) ([]byte, error) {
	d, err := os.Open(procDir)
	if err != nil {
		return buf, fmt.Errorf("listing processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return buf, fmt.Errorf("listing processes: %w", err)
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		var ok bool
		buf, ok = readProcFile(procDir+"/"+name+"/environ", buf)
		switch {
		case !ok:
		case len(buf) == 0:
			empty(pid)
		case environHas(buf, entry):
			found(pid)
		}
	}
	return buf, nil
}

// readProcFile reads a /proc/PID file into buf with plain system calls
// (os.File would try to register it with the poller). ok is false when it
// cannot be read: the process is gone, or is not ours to see.
func readProcFile(path string, buf []byte) (_ []byte, ok bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf, false
	}
	defer func() { _ = syscall.Close(fd) }()
	if cap(buf) < 4096 {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return buf[:0], false
		case n == 0:
			return buf, true
		}
		buf = buf[:len(buf)+n]
	}
}

// procStat is what a sweep reads of /proc/PID/stat.
type procStat struct {
	state byte   // R, S, D, Z (zombie), X (dead)...
	flags uint64 // PF_* flags
	start uint64 // start time, in clock ticks since boot
}

// readStat reads and parses a /proc/PID/stat file; ok is false when it
// cannot be read or parsed. The command name, second field, is in
// parentheses and may hold anything, parentheses and spaces included: the
// fields after it start after the last ')'.
func readStat(path string, buf []byte) (procStat, bool) {
	buf, ok := readProcFile(path, buf)
	if !ok {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(buf, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(buf[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	flags, err1 := strconv.ParseUint(string(f[6]), 10, 64)  // field 9
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64) // field 22
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], flags: flags, start: start}, true
}

// environHas reports whether the NUL-separated environ holds entry as one
// whole entry (not as the start or end of a longer one).
func environHas(environ, entry []byte) bool {
	for len(environ) >= len(entry) {
		i := bytes.Index(environ, entry)
		if i < 0 {
			return false
		}
		end := i + len(entry)
		if (i == 0 || environ[i-1] == 0) && (end == len(environ) || environ[end] == 0) {
			return true
		}
		environ = environ[i+1:]
	}
	return false
}

// attemptCgroup is the cgroup v2 sub-cgroup of one attempt.
type attemptCgroup struct {
	dir string
	fd  int // open until the child is started in it
}

func newAttemptCgroup(parent, token string) (*attemptCgroup, error) {
	reapCgroups()
	dir := filepath.Join(parent, cgroupPrefix+token)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the attempt's cgroup: %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return nil, fmt.Errorf("opening the attempt's cgroup %s: %w", dir, err)
	}
	return &attemptCgroup{dir: dir, fd: fd}, nil
}

func (g *attemptCgroup) closeFD() {
	if g.fd >= 0 {
		_ = syscall.Close(g.fd)
		g.fd = -1
	}
}

// kill sends SIGKILL to every process in the cgroup, including those that
// fork meanwhile.
func (g *attemptCgroup) kill() error {
	f, err := os.OpenFile(filepath.Join(g.dir, "cgroup.kill"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("killing the attempt's cgroup: %w", err)
	}
	_, err = f.WriteString("1")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("killing the attempt's cgroup: %w", err)
	}
	return nil
}

// remove removes the cgroup, or leaves it to a later attempt while its
// killed processes are still exiting (rmdir fails with EBUSY until the
// cgroup is empty).
func (g *attemptCgroup) remove() {
	g.closeFD()
	if err := syscall.Rmdir(g.dir); errors.Is(err, syscall.EBUSY) {
		graveyard.Lock()
		graveyard.dirs = append(graveyard.dirs, g.dir)
		graveyard.Unlock()
	}
}

// graveyard holds killed cgroups not yet empty when their attempt ended.
var graveyard struct {
	sync.Mutex
	dirs []string
}

// reapCgroups removes the cgroups of the graveyard that have emptied.
func reapCgroups() {
	graveyard.Lock()
	defer graveyard.Unlock()
	kept := graveyard.dirs[:0]
	for _, dir := range graveyard.dirs {
		if err := syscall.Rmdir(dir); errors.Is(err, syscall.EBUSY) {
			kept = append(kept, dir)
		}
	}
	graveyard.dirs = kept
}
