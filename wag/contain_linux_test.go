//go:build linux

package wag

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/robonet/robonet/internal/clock"
)

func TestEnvironHas(t *testing.T) {
	entry := []byte("ROBONET_EXEC_TOKEN=abc")
	cases := []struct {
		environ string
		want    bool
	}{
		{"ROBONET_EXEC_TOKEN=abc", true},
		{"ROBONET_EXEC_TOKEN=abc\x00", true},
		{"A=1\x00ROBONET_EXEC_TOKEN=abc\x00B=2\x00", true},
		{"A=1\x00ROBONET_EXEC_TOKEN=abc", true},
		{"ROBONET_EXEC_TOKEN=abcd\x00", false},
		{"XROBONET_EXEC_TOKEN=abc\x00", false},
		{"A=ROBONET_EXEC_TOKEN=abc\x00", false},
		{"ROBONET_EXEC_TOKEN=abcd\x00ROBONET_EXEC_TOKEN=abc\x00", true}, // a near miss, then the entry
		{"ROBONET_EXEC_TOKEN=ab\x00", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := environHas([]byte(tc.environ), entry); got != tc.want {
			t.Errorf("environHas(%q) = %v, want %v", tc.environ, got, tc.want)
		}
	}
}

// TestScanEnvirons scans a made-up /proc: whole entries only, vanished and
// unreadable processes skipped, environments larger than the first read.
func TestScanEnvirons(t *testing.T) {
	proc := t.TempDir()
	write := func(name, environ string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(proc, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, name, "environ"), []byte(environ), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "A=1\x00ROBONET_EXEC_TOKEN=tok\x00B=2\x00")
	write("11", "ROBONET_EXEC_TOKEN=tok")
	write("12", "ROBONET_EXEC_TOKEN=tokX\x00XROBONET_EXEC_TOKEN=tok\x00")
	write("15", strings.Repeat("FILLER=0123456789\x00", 1000)+"ROBONET_EXEC_TOKEN=tok\x00")
	write("16", "")
	write("0", "ROBONET_EXEC_TOKEN=tok\x00")
	write("self", "ROBONET_EXEC_TOKEN=tok\x00")
	for _, dir := range []string{"13", "14/environ"} { // gone; unreadable (reading a directory fails)
		if err := os.MkdirAll(filepath.Join(proc, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var found, empty []int
	buf, err := scanEnvirons(proc, []byte("ROBONET_EXEC_TOKEN=tok"), nil,
		func(pid int) { found = append(found, pid) }, func(pid int) { empty = append(empty, pid) })
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	if !slices.Equal(found, []int{10, 11, 15}) {
		t.Fatalf("found %v, want [10 11 15]", found)
	}
	if !slices.Equal(empty, []int{16}) {
		t.Errorf("empty environments %v, want [16]", empty)
	}
	if cap(buf) < 18000 {
		t.Errorf("the buffer (cap %d) did not grow to the largest environment", cap(buf))
	}
	if _, err := scanEnvirons(filepath.Join(proc, "missing"), []byte("X=1"), nil, func(int) {}, func(int) {}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want one wrapping ErrNotExist", err)
	}
}

// fakeStat is a /proc/PID/stat line with the given command name, state,
// flags and start time.
func fakeStat(pid int, comm string, state byte, flags, start uint64) string {
	return fmt.Sprintf("%d (%s) %c 1 %d %d 0 -1 %d 0 0 0 0 1 2 0 0 20 0 1 0 %d 1000 200 18446744073709551615\n",
		pid, comm, state, pid, pid, flags, start)
}

func TestReadStat(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content string
		want          procStat
		ok            bool
	}{
		{"plain", fakeStat(7, "sleep", 'S', 0x400100, 12345), procStat{'S', 0x400100, 12345}, true},
		{"name with spaces and parentheses", fakeStat(8, "a) (b c) Z 9", 'R', 0, 99), procStat{'R', 0, 99}, true},
		{"kernel thread", fakeStat(2, "kthreadd", 'S', pfKthread|0x40, 0), procStat{'S', pfKthread | 0x40, 0}, true},
		{"zombie", fakeStat(9, "sh", 'Z', 0x40000c, 7), procStat{'Z', 0x40000c, 7}, true},
		{"truncated", "10 (sh) S 1 10 10", procStat{}, false},
		{"no name", "10 sh S 1 10 10 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 1 2 3", procStat{}, false},
		{"bad start time", strings.Replace(fakeStat(11, "sh", 'S', 0, 5), " 5 1000 ", " x 1000 ", 1), procStat{}, false},
	}
	for i, tc := range cases {
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := readStat(path, nil)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: readStat = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := readStat(filepath.Join(dir, "missing"), nil); ok {
		t.Error("a missing file was read")
	}
	// This process's own line: running, not a kernel thread, started.
	st, ok := readStat("/proc/self/stat", nil)
	if !ok || st.flags&pfKthread != 0 || st.start == 0 || st.state == 'Z' {
		t.Errorf("/proc/self/stat: %+v, %v", st, ok)
	}
}

// TestTokenSweepRechecksEmptyEnvironments runs a sweep over a made-up
// /proc in which a descendant is caught mid-execve (its environment empty
// until the sweep has waited twice): it is found and killed. Processes
// that are zombies, kernel threads or older than the attempt are not
// waited for, and one whose environment stays empty costs the bounded
// waits once, not a failure.
func TestTokenSweepRechecksEmptyEnvironments(t *testing.T) {
	const since = 500
	entry := []byte(execTokenVar + "=tok")
	proc := t.TempDir()
	write := func(pid int, environ, stat string) {
		t.Helper()
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "environ"), []byte(environ), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(20, "A=1\x00"+string(entry)+"\x00", fakeStat(20, "sh", 'S', 0, since)) // holds the token
	write(21, "", fakeStat(21, "sh", 'R', 0, since+3))                           // mid-execve
	write(22, "", fakeStat(22, "kworker/0:1", 'I', pfKthread, since+5))          // a kernel thread
	write(23, "", fakeStat(23, "sh", 'Z', 0, since+5))                           // a zombie
	write(24, "", fakeStat(24, "old", 'S', 0, since-1))                          // older than the attempt
	write(25, "", fakeStat(25, "env-cleared", 'S', 0, since+9))                  // empty for good

	var killed []int
	var paused []time.Duration
	s := tokenSweep{
		proc: proc, entry: entry, since: since, self: 99,
		kill: func(pid int) { killed = append(killed, pid) },
		pause: func(d time.Duration) {
			paused = append(paused, d)
			if len(paused) == 2 { // pid 21's new program has its environment now
				write(21, string(entry)+"\x00", fakeStat(21, "sleep", 'S', 0, since+3))
			}
		},
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(killed)
	if !slices.Equal(killed, []int{20, 21}) {
		t.Fatalf("killed %v, want [20 21]", killed)
	}
	// Round one waits through every pause for pid 25 (21 is found at the
	// second); round two, which finds nothing new, waits for 25 again.
	want := append(slices.Clone(recheckPauses), recheckPauses...)
	if !slices.Equal(paused, want) {
		t.Errorf("paused %v, want %v", paused, want)
	}

	// Without an empty environment that may be a descendant, no waiting.
	if err := os.RemoveAll(filepath.Join(proc, "25")); err != nil {
		t.Fatal(err)
	}
	killed, paused = nil, nil
	s.proc = proc
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if len(paused) != 0 {
		t.Errorf("paused %v with no process worth waiting for", paused)
	}
	slices.Sort(killed)
	if !slices.Equal(killed, []int{20, 21}) {
		t.Errorf("second sweep killed %v, want [20 21]", killed)
	}
}

func TestCgroup2Dir(t *testing.T) {
	const hybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const unified = `22 27 0:21 / /proc rw,relatime - proc proc rw
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
	cases := []struct {
		name, self, mounts, want string
	}{
		{"hybrid, root cgroup (this CI machine)", "4:memory:/x\n0::/\n", hybrid, ""},
		{"hybrid, a service", "1:name=systemd:/system.slice/r.service\n0::/system.slice/r.service\n", hybrid, "/sys/fs/cgroup/unified/system.slice/r.service"},
		{"unified, a service", "0::/system.slice/robonet.service\n", unified, "/sys/fs/cgroup/system.slice/robonet.service"},
		{"unified, no trailing newline", "0::/a/b", unified, "/sys/fs/cgroup/a/b"},
		{"v1 only", "4:memory:/x\n", "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", ""},
		{"no cgroup2 mount", "0::/a\n", "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", ""},
		{"cgroup removed", "0::/a (deleted)\n", unified, ""},
		{"outside the namespace root", "0::/../other\n", unified, ""},
		{"mounted at a sub-cgroup", "0::/a/b\n", "30 23 0:26 /a /mnt/cg\\040x rw - cgroup2 cgroup2 rw\n", "/mnt/cg x/b"},
		{"mounted at another sub-cgroup", "0::/ab\n", "30 23 0:26 /a /mnt/cg rw - cgroup2 cgroup2 rw\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := cgroup2Dir([]byte(tc.self), []byte(tc.mounts)); got != tc.want {
				t.Fatalf("cgroup2Dir = %q, want %q", got, tc.want)
			}
		})
	}
}

// detached is a process the test started in a session of its own.
type detached struct {
	pid    int
	exited chan error // its Wait error
}

// startDetached starts `sleep 1000` in a session of its own with env, and
// kills it when the test ends.
func startDetached(t *testing.T, env ...string) detached {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := detached{pid: cmd.Process.Pid, exited: make(chan error, 1)}
	go func() { d.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		recv(t, d.exited, "a killed process to exit")
		d.exited <- nil // for another Cleanup call
	})
	return d
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// waitGone waits until pid is no longer a live process: SIGKILL is
// delivered asynchronously, and nothing signals the death of a process
// that is not our child.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("escaped process %d survived its attempt", pid)
		}
		<-tick.C
	}
}

func TestKillTokenHolders(t *testing.T) {
	token := "TOKEN" + strconv.Itoa(os.Getpid())
	holder := startDetached(t, "A=1", execTokenVar+"="+token, "B=2")
	longer := startDetached(t, execTokenVar+"="+token+"X")
	other := startDetached(t, execTokenVar+"=someone-else")
	if err := killTokenHolders([]byte(execTokenVar+"="+token), 0); err != nil {
		t.Fatal(err)
	}
	err := recv(t, holder.exited, "the holder of the token to die") // our child: Wait tells when it died
	holder.exited <- err
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("holder: %v, want killed by SIGKILL", err)
	}
	for _, d := range []detached{longer, other} {
		if !running(d.pid) {
			t.Errorf("process %d without the token was killed", d.pid)
		}
	}
}

// Scripts that leave the process group and set $esc to the escaped pid.
const (
	// setsid(1) calls setsid(2) in the background child itself (it is not
	// a group leader): $! is the escaped process; wait until it has left.
	escapeSetsid = `setsid sleep 1000 & esc=$!
until set -- $(cat /proc/$esc/stat) && [ "$6" = "$esc" ]; do :; done
`
	// The subshell exits at once: the escaped shell is reparented to init
	// and tells its pid through a file once it has its own session.
	escapeDoubleFork = `( setsid sh -c 'echo $$ > "$FIFO.tmp" && mv "$FIFO.tmp" "$FIFO.esc" && exec sleep 1000' & ) &
until [ -f "$FIFO.esc" ]; do :; done; esc=$(cat "$FIFO.esc")
`
)

// TestExecKillsEscapedDescendants checks that processes that left the
// attempt's process group and session die with the attempt, whether the
// program exits or is cancelled.
func TestExecKillsEscapedDescendants(t *testing.T) {
	escapes := []struct{ name, script string }{{"setsid", escapeSetsid}, {"double fork", escapeDoubleFork}}
	for _, e := range escapes {
		t.Run(e.name+"/exit", func(t *testing.T) {
			pgid, esc, done := startGroup(t, context.Background(), e.script+`echo "$$ $esc" > "$FIFO"; echo done`)
			if err := recv(t, done, "the action to return"); err != nil {
				t.Fatal(err)
			}
			waitGone(t, esc)
			waitGroupGone(t, pgid)
		})
		t.Run(e.name+"/cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pgid, esc, done := startGroup(t, ctx, e.script+`echo "$$ $esc" > "$FIFO"; sleep 1000`)
			if !running(esc) || slices.Contains(groupAlive(t, pgid), esc) {
				t.Fatalf("process %d did not escape group %d (%v)", esc, pgid, groupAlive(t, pgid))
			}
			cancel()
			if err := recv(t, done, "the action to return"); !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v", err)
			}
			waitGone(t, esc)
			waitGroupGone(t, pgid)
		})
	}
}

// TestExecSparesUnrelatedProcesses checks that the end of an attempt kills
// only its own descendants: not a process of another session, even one
// holding another attempt's token.
func TestExecSparesUnrelatedProcesses(t *testing.T) {
	plain := startDetached(t)
	other := startDetached(t, execTokenVar+"=another-attempt")
	_, esc, done := startGroup(t, context.Background(), escapeSetsid+`echo "$$ $esc" > "$FIFO"`)
	if err := recv(t, done, "the action to return"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, esc)
	// The scan is over when the action returns: what it spared stays spared.
	for _, d := range []detached{plain, other} {
		if !running(d.pid) {
			t.Errorf("unrelated process %d was killed", d.pid)
		}
	}
}

// TestExecCgroupKillsEscapedDescendants runs an attempt in a cgroup v2
// sub-cgroup of ROBONET_TEST_CGROUP2_PARENT, a writable cgroup2 directory
// (skipped without it: the CI machines have no delegated cgroup v2). There
// even a process that clears its environment dies with the attempt.
func TestExecCgroupKillsEscapedDescendants(t *testing.T) {
	parent := os.Getenv("ROBONET_TEST_CGROUP2_PARENT")
	if parent == "" {
		t.Skip("ROBONET_TEST_CGROUP2_PARENT is not set")
	}
	if !usableCgroupParent(parent) {
		t.Fatalf("%s is not a writable cgroup v2 directory with cgroup.kill", parent)
	}
	rt := &runtimeEnv{clock: clock.System(), httpClient: defaultRuntime.httpClient, killGrace: defaultKillGrace,
		cgroupParent: func() string { return parent }}
	script := `env -i /bin/sh -c 'exec setsid sleep 1000' & esc=$!
until set -- $(cat /proc/$esc/stat) && [ "$6" = "$esc" ]; do :; done
grep -q ` + cgroupPrefix + ` /proc/$esc/cgroup || exit 7
echo "$$ $esc" > "$FIFO"`
	pgid, esc, done := startGroup(t, context.Background(), script, func(c *Call) { c.rt = rt })
	if err := recv(t, done, "the action to return"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, esc)
	waitGroupGone(t, pgid)
	if cgroupsFailed.Load() {
		t.Fatal("starting in the cgroup failed")
	}
	// The attempt's cgroup is removed, at once or by a later attempt.
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		reapCgroups()
		left, _ := filepath.Glob(filepath.Join(parent, cgroupPrefix+"*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroups left behind: %v", left)
		}
		<-tick.C
	}
}

// BenchmarkTokenScan measures one /proc scan, the cost the token fallback
// adds to every exec attempt.
func BenchmarkTokenScan(b *testing.B) {
	entry := []byte(execTokenVar + "=no-such-attempt")
	var buf []byte
	for b.Loop() {
		var err error
		buf, err = scanEnvirons("/proc", entry, buf, func(int) {}, func(int) {})
		if err != nil {
			b.Fatal(err)
		}
	}
	names, _ := filepath.Glob("/proc/[0-9]*")
	procs := len(names)
	b.ReportMetric(float64(procs), "procs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(procs, 1)), "ns/proc")
}

// BenchmarkTokenSweep measures a whole sweep that finds nothing: the scan,
// and the reads of /proc/PID/stat for the processes with an empty
// environment (kernel threads, mostly) that decide whether to read again.
func BenchmarkTokenSweep(b *testing.B) {
	entry := []byte(execTokenVar + "=no-such-attempt")
	self, ok := readStat("/proc/self/stat", nil)
	if !ok {
		b.Fatal("cannot read /proc/self/stat")
	}
	var pauses int
	for b.Loop() {
		s := tokenSweep{proc: "/proc", entry: entry, since: self.start + 1<<40, self: os.Getpid(),
			kill: func(int) { b.Fatal("killed a process") }, pause: func(time.Duration) { pauses++ }}
		if err := s.run(); err != nil {
			b.Fatal(err)
		}
	}
	if pauses > 0 {
		b.Fatalf("%d pauses with no process started after the attempt", pauses)
	}
}
