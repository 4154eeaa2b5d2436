package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/robonet/robonet/internal/childproc"
)

// proc is one robonode process the bench started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	addr   string // gRPC
	gossip string
	http   string        // "" when off
	done   chan struct{} // closed when its stderr ends

	mu   sync.Mutex
	tail []string // the last lines of its log, for errors
}

// startProc starts robonode with args, confined to cpus (none: anywhere),
// and waits until it logs that it started (its addresses are in that line).
// With logFile set, its whole log is written there too.
func startProc(ctx context.Context, robonode []string, env []string, cpus []int, logFile, name string, args ...string) (*proc, error) {
	argv := append(append([]string(nil), robonode[1:]...), args...)
	p := &proc{name: name, cmd: exec.Command(robonode[0], argv...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	var logf *os.File
	if logFile != "" {
		if logf, err = os.Create(logFile); err != nil {
			return nil, fmt.Errorf("%s's log: %w", name, err)
		}
	}
	if err := childproc.StartOn(p.cmd, cpus); err != nil {
		if logf != nil {
			_ = logf.Close()
		}
		return nil, fmt.Errorf("starting %s (%s): %w", name, robonode[0], err)
	}
	started := make(chan [3]string, 1)
	go func() {
		defer close(p.done)
		var logw *bufio.Writer
		if logf != nil {
			logw = bufio.NewWriter(logf)
			defer func() { _, _ = logw.Flush(), logf.Close() }()
		}
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if logw != nil {
				_, _ = logw.Write(line)
				_ = logw.WriteByte('\n')
			}
			p.keep(string(line))
			var entry struct {
				Msg    string `json:"msg"`
				Addr   string `json:"grpc_addr"`
				Gossip string `json:"gossip_addr"`
				HTTP   string `json:"http_addr"`
			}
			if bytes.Contains(line, []byte(`"node started"`)) && json.Unmarshal(line, &entry) == nil && entry.Msg == "node started" {
				started <- [3]string{entry.Addr, entry.Gossip, entry.HTTP}
			}
		}
	}()
	select {
	case a := <-started:
		p.addr, p.gossip, p.http = a[0], a[1], a[2]
		return p, nil
	case <-p.done:
		_ = p.cmd.Wait()
		return nil, fmt.Errorf("%s exited before it started: %s", name, p.lastLines())
	case <-time.After(60 * time.Second):
		p.kill()
		return nil, fmt.Errorf("%s did not start within 60s: %s", name, p.lastLines())
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
}

func (p *proc) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == 20 {
		p.tail = p.tail[1:]
	}
	p.tail = append(p.tail, line)
}

func (p *proc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// kill stops the process with SIGKILL and reaps it: a bench does not
// measure shutdowns, and the next scenario starts from scratch.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	<-p.done
}

// terminate stops the process with SIGTERM, as an operator would, so that
// it finishes its files (a CPU profile); after 30 s it is killed.
func (p *proc) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	_ = p.cmd.Wait()
}

// usage is what a process used: CPU time and its peak resident set.
type usage struct {
	CPU     time.Duration
	PeakRSS int64 // bytes
}

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// usageOf reads a live process's CPU time and peak RSS from /proc.
func usageOf(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	// The command name (field 2) may hold spaces: fields count from ')'.
	rest := stat[bytes.LastIndexByte(stat, ')')+2:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return usage{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	// utime and stime count whole ticks and are sampled: a process that
	// ran for less than a tick in all, or between ticks, reads 0. The
	// scheduler's own count (schedstat, nanoseconds, per live thread) is
	// exact; threads that ended are only in the ticks.
	u := usage{CPU: max(time.Duration(utime+stime)*clockTick, threadsCPU(pid))}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("/proc/%d/status: VmHWM %q: %w", pid, v, err)
			}
			u.PeakRSS = kb << 10
		}
	}
	return u, nil
}

// threadsCPU sums the time the scheduler ran each live thread of pid
// (/proc/PID/task/TID/schedstat, first field), 0 where the kernel keeps
// no such count.
func threadsCPU(pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if ns, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
				total += time.Duration(ns)
			}
		}
	}
	return total
}

// selfCPU is the CPU time this process has used (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
