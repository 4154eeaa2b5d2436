package wag

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/wag/tasklog"
)

const (
	// defaultKillGrace is how long a cancelled exec process group has
	// between SIGTERM and SIGKILL.
	defaultKillGrace = 2 * time.Second
	// stderrTailBytes is how much of the end of stderr a failure carries.
	stderrTailBytes = 2048
	// drainGrace bounds reading the pipes after the process group and the
	// descendants that left it are gone: only a process that escaped both
	// (see containment) can hold them longer.
	drainGrace = time.Second
	// execExample is shown with bad exec input.
	execExample = `{argv: [sh, -c, "echo hello"]}`
)

// execInput is the parsed input of the exec action.
type execInput struct {
	argv    []string
	path    string // argv[0]'s absolute path as the policy admitted it; "": looked up by exec
	env     [][2]string
	stdin   []byte
	dir     string
	timeout time.Duration
}

func parseExecInput(in any) (execInput, error) {
	m, err := inputObject("exec", in, execExample, "argv", "dir", "env", "stdin", "timeout")
	if err != nil {
		return execInput{}, err
	}
	var x execInput
	raw, ok := m["argv"]
	if !ok || raw == nil {
		return x, inputError("exec", "argv", "is required: the program and its arguments as a list of strings, e.g. argv: [sh, -c, \"echo hello\"]")
	}
	list, ok := raw.([]any)
	if !ok {
		return x, inputError("exec", "argv", "must be a list of strings, got %s; write e.g. argv: [ls, -l] rather than a single command line", value.TypeName(raw))
	}
	if len(list) == 0 {
		return x, inputError("exec", "argv", "is empty: give at least the program, e.g. argv: [date]")
	}
	for i, e := range list {
		// Numbers and booleans are rendered as text, as in env: an argument
		// like "${{ item }}" works whether the item is a string or a number.
		s, ok := scalarString(e)
		if !ok {
			return x, inputError("exec", fmt.Sprintf("argv[%d]", i), "must be a string, number or bool, got %s; pass lists and maps through stdin, or join them with an expression", value.TypeName(e))
		}
		if strings.IndexByte(s, 0) >= 0 {
			return x, inputError("exec", fmt.Sprintf("argv[%d]", i), "contains a NUL byte")
		}
		x.argv = append(x.argv, s)
	}
	if x.argv[0] == "" {
		return x, inputError("exec", "argv[0]", "is empty: it names the program to run")
	}
	if x.env, err = stringMap("exec", m, "env"); err != nil {
		return x, err
	}
	for _, kv := range x.env {
		if kv[0] == "" || strings.ContainsAny(kv[0], "=\x00") || strings.IndexByte(kv[1], 0) >= 0 {
			return x, inputError("exec", "env", "has an invalid variable %q: names are non-empty without '=' and values have no NUL byte", kv[0])
		}
	}
	if x.stdin, _, err = payload("exec", m, "stdin"); err != nil {
		return x, err
	}
	if x.dir, err = optString("exec", m, "dir"); err != nil {
		return x, err
	}
	if x.timeout, err = optDuration("exec", m, "timeout"); err != nil {
		return x, err
	}
	return x, nil
}

// execTokenVar marks every process an exec attempt starts with a random
// token of the attempt, so that descendants that left its process group can
// still be found and killed when it ends (contain_linux.go).
const execTokenVar = "ROBONET_EXEC_TOKEN"

// execInherited are the variables an exec'd program gets from the node's
// environment, when the node has them: nothing else of it (credentials,
// tokens, keys, ROBONET_* settings) reaches the program.
var execInherited = []string{"PATH", "HOME", "LANG", "TZ"}

// execEnv is the environment of the child: the inherited allowlist (with
// HOME, USER and LOGNAME of --exec-user's user when it is set), the
// task's env, then the ROBONET_* variables (which the task cannot
// override), the attempt's token last.
func execEnv(call *Call, extra [][2]string, token string, as *execUser) []string {
	env := make([]string, 0, 12+len(extra))
	for _, name := range execInherited {
		if name == "HOME" && as != nil {
			env = append(env, "HOME="+as.home, "USER="+as.name, "LOGNAME="+as.name)
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		} else if name == "PATH" {
			env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
		}
	}
	for _, kv := range extra {
		env = append(env, kv[0]+"="+kv[1])
	}
	return append(env,
		"ROBONET_ATTEMPT="+strconv.FormatUint(uint64(call.Key.Attempt), 10),
		"ROBONET_EXECUTION_ID="+call.Key.ExecutionID,
		"ROBONET_INSTANCE_ID="+call.Key.InstanceID.String(),
		"ROBONET_TASK="+call.Task,
		"ROBONET_IDEMPOTENCY_KEY="+call.IdempotencyKey(),
		"ROBONET_WORKER="+call.Worker,
		execTokenVar+"="+token,
	)
}

// execAction runs a program (see the package doc for its input and output).
func execAction(ctx context.Context, call *Call) (any, error) {
	in, err := parseExecInput(call.Input)
	if err != nil {
		return nil, err
	}
	rt := call.runtime()
	var as *execUser
	if rt.exec != nil {
		as = rt.exec.user
	}
	if in.dir == "" && as != nil {
		in.dir = as.workdir
	}
	if in.path, err = rt.exec.admit(in.argv[0], in.dir); err != nil {
		if errors.Is(err, ErrExecRefused) {
			rt.countRefusal()
			call.Logger().Info("exec refused by this node's policy", zap.String("program", in.argv[0]), zap.Error(err))
		}
		return nil, err
	}
	if in.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, rt.clock, in.timeout, "exec")
		defer cancel()
	}
	if in.dir != "" {
		if fi, err := os.Stat(in.dir); err != nil || !fi.IsDir() {
			return nil, inputError("exec", "dir", "%q is not a directory on this node", in.dir)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("exec: %w", ctxErr(ctx))
	}
	return runProcess(ctx, call, in, rt, as)
}

// runProcess runs an exec attempt's program: it starts it contained, with
// its pipes, captures its output while it runs, waits for it (killing its
// process group when ctx ends first), and reads the attempt's outcome from
// how it ended.
func runProcess(ctx context.Context, call *Call, in execInput, rt *runtimeEnv, as *execUser) (any, error) {
	name := in.argv[0]
	token := rand.Text()
	env := execEnv(call, in.env, token, as)
	p, err := openExecPipes(in.stdin != nil)
	if err != nil {
		return nil, fmt.Errorf("exec: creating pipes: %w", err)
	}
	cmd, box, err := startContained(func() *exec.Cmd { return execCommand(in, env, p, as) }, token, rt.cgroupParent)
	if err != nil {
		p.closeAll()
		if errors.Is(err, exec.ErrNotFound) {
			return nil, notFound(name)
		}
		return nil, fmt.Errorf("exec: cannot start %q: %w", name, err)
	}
	defer p.closeAll()
	p.closeChildEnds()
	pid := cmd.Process.Pid
	call.setPID(pid)
	defer call.setPID(0)

	killer := &groupKiller{pid: pid, clock: rt.clock, grace: rt.killGrace}
	o := captureOutput(call, rt, pid, p, in.stdin)
	waitErr := killer.wait(ctx, cmd)
	// Descendants that left the group (setsid, daemons) die with the
	// attempt too; before the drain, as they may hold the pipes.
	if err := box.release(); err != nil {
		call.Logger().Warn("exec: descendants of the attempt may have survived it", zap.Error(err))
	}
	o.drain(call, p)
	return execOutcome(ctx, name, waitErr, o.stdout, o.stderr.String())
}

// execPipes are the pipes of an exec attempt: the child's stdout and
// stderr, and its stdin when the attempt has input for it.
type execPipes struct {
	stdoutR, stdoutW *os.File
	stderrR, stderrW *os.File
	stdinR, stdinW   *os.File // nil without stdin
	files            []*os.File
}

// openExecPipes opens the pipes of an attempt, with stdin or without.
func openExecPipes(stdin bool) (*execPipes, error) {
	p := &execPipes{}
	var err1, err2, err3 error
	p.stdoutR, p.stdoutW, err1 = p.pipe()
	p.stderrR, p.stderrW, err2 = p.pipe()
	if stdin {
		p.stdinR, p.stdinW, err3 = p.pipe()
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		p.closeAll()
		return nil, err
	}
	return p, nil
}

// pipe opens one pipe, whose ends p keeps until closeAll.
func (p *execPipes) pipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err == nil {
		p.files = append(p.files, r, w)
	}
	return r, w, err
}

// closeAll closes every pipe end we still hold.
func (p *execPipes) closeAll() {
	for _, f := range p.files {
		_ = f.Close()
	}
}

// closeChildEnds closes our copies of the child's ends once it started:
// they would keep the pipes open forever.
func (p *execPipes) closeChildEnds() {
	_ = p.stdoutW.Close()
	_ = p.stderrW.Close()
	if p.stdinR != nil {
		_ = p.stdinR.Close()
	}
}

// execCommand is the command of an exec attempt: the program the policy
// admitted, with env and the child's ends of p, in a process group of its
// own, as --exec-user's user when there is one.
func execCommand(in execInput, env []string, p *execPipes, as *execUser) *exec.Cmd {
	name := in.argv[0]
	program := name
	if in.path != "" {
		program = in.path // the program the policy admitted
	}
	cmd := exec.Command(program, in.argv[1:]...) // cancellation is ours: the whole process group
	cmd.Args[0] = name                           // under the name it was given
	cmd.Env = env
	cmd.Dir = in.dir
	if p.stdinR != nil {
		cmd.Stdin = p.stdinR
	}
	cmd.Stdout, cmd.Stderr = p.stdoutW, p.stderrW
	setProcessGroup(cmd)
	as.runAs(cmd)
	return cmd
}

// execOutput is where a running attempt's output goes: stdout kept up to
// the output limit (beyond it, the process group is killed), the tail of
// stderr, both into the attempt's log when it has one.
type execOutput struct {
	stdout *capBuffer
	stderr *tailBuffer
	log    *tasklog.Writer // nil: none
	copies sync.WaitGroup  // copying the pipes, writing stdin
}

// captureOutput starts copying the output of the process pid from p, and
// writing stdin (nil: none) to it.
func captureOutput(call *Call, rt *runtimeEnv, pid int, p *execPipes, stdin []byte) *execOutput {
	o := &execOutput{
		stdout: &capBuffer{max: call.maxOutput(), onOverflow: func() { killGroup(pid, true) }},
		stderr: &tailBuffer{max: stderrTailBytes},
	}
	var stdoutSink, stderrSink io.Writer = o.stdout, o.stderr
	o.log = openTaskLog(call, rt)
	if o.log != nil {
		// Both buffers and the log writers never fail, so MultiWriter
		// always writes to both.
		stdoutSink = io.MultiWriter(o.stdout, o.log.Stream(tasklog.Stdout))
		stderrSink = io.MultiWriter(o.stderr, o.log.Stream(tasklog.Stderr))
	}
	o.copies.Go(func() { copyQuietly(stdoutSink, p.stdoutR) })
	o.copies.Go(func() { copyQuietly(stderrSink, p.stderrR) })
	if p.stdinW != nil {
		o.copies.Go(func() {
			_, _ = p.stdinW.Write(stdin) // EPIPE when the child does not read it all
			_ = p.stdinW.Close()
		})
	}
	return o
}

// drain waits, for drainGrace at most, for the copies to end once the
// attempt's processes are gone, then closes its log.
func (o *execOutput) drain(call *Call, p *execPipes) {
	deadline := time.Now().Add(drainGrace)
	_ = p.stdoutR.SetReadDeadline(deadline)
	_ = p.stderrR.SetReadDeadline(deadline)
	if p.stdinW != nil {
		_ = p.stdinW.SetWriteDeadline(deadline)
	}
	o.copies.Wait()
	if o.log != nil {
		if err := o.log.Close(); err != nil {
			call.Logger().Warn("exec: the attempt's log is incomplete", zap.Error(err))
		}
	}
}

// execOutcome is the output or error of the attempt that ran program name,
// from how it ended: ctx ending, stdout over the limit, the exit status
// (waitErr; tail is the end of stderr), else its stdout — JSON decoded
// when it is JSON, else as text.
func execOutcome(ctx context.Context, name string, waitErr error, stdout *capBuffer, tail string) (any, error) {
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("exec: %s: %w%s", name, ctxErr(ctx), stderrSuffix(tail))
	case stdout.overflow:
		return nil, fmt.Errorf("exec: %s: stdout exceeded the %d-byte output limit (MaxOutputBytes); write large results to a file or a store and print a reference", name, stdout.max)
	case waitErr != nil:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			if code := ee.ExitCode(); code >= 0 {
				return nil, fmt.Errorf("exec: %s exited with code %d%s", name, code, stderrSuffix(tail))
			}
			return nil, fmt.Errorf("exec: %s was killed (%v)%s", name, ee.ProcessState, stderrSuffix(tail))
		}
		return nil, fmt.Errorf("exec: %s: %w%s", name, waitErr, stderrSuffix(tail))
	}
	out := strings.TrimSpace(string(stdout.buf))
	if !utf8.ValidString(out) {
		return nil, fmt.Errorf("exec: %s: stdout is not UTF-8 text; encode binary output (e.g. base64) or write it to a file", name)
	}
	if out != "" {
		if v, err := value.Decode([]byte(out)); err == nil {
			return v, nil
		}
	}
	return out, nil
}

// openTaskLog starts the attempt's log on this node; nil when the node
// keeps none, or cannot (which must not fail the attempt: it says so).
func openTaskLog(call *Call, rt *runtimeEnv) *tasklog.Writer {
	if rt.logs == nil {
		return nil
	}
	w, err := rt.logs.Create(tasklog.Key{Instance: call.Key.InstanceID, Execution: call.Key.ExecutionID, Attempt: call.Key.Attempt})
	if err != nil {
		call.Logger().Warn("exec: the attempt runs without a log", zap.Error(err))
		return nil
	}
	return w
}

func stderrSuffix(tail string) string {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return "; no stderr"
	}
	return "; stderr (last 2 KiB): " + tail
}

func copyQuietly(w io.Writer, r io.Reader) {
	_, _ = io.Copy(w, r) // ends at EOF, or at the drain deadline
}

// groupKiller stops a process group on cancellation: SIGTERM, then SIGKILL
// after a grace; finish kills whatever is left once the leader exited.
type groupKiller struct {
	pid   int
	clock clock.Clock
	grace time.Duration
	wg    sync.WaitGroup // the cancellation callback

	mu       sync.Mutex
	finished bool
	timer    clock.Timer
}

// wait waits for the group's leader to exit, terminating the group when
// ctx ends first (SIGTERM, then SIGKILL after the grace), then kills what
// is left of the group: the leader's error.
func (k *groupKiller) wait(ctx context.Context, cmd *exec.Cmd) error {
	k.wg.Add(1)
	stopWatch := context.AfterFunc(ctx, func() {
		defer k.wg.Done()
		k.terminate()
	})
	err := cmd.Wait() // the group leader exited
	if stopWatch() {
		k.wg.Done()
	}
	k.finish() // leftovers in the group (background children) die with the attempt
	k.wg.Wait()
	return err
}

func (k *groupKiller) terminate() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.finished {
		return
	}
	killGroup(k.pid, false)
	k.timer = k.clock.AfterFunc(k.grace, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if !k.finished {
			killGroup(k.pid, true)
		}
	})
}

func (k *groupKiller) finish() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.finished = true
	if k.timer != nil {
		k.timer.Stop()
	}
	killGroup(k.pid, true)
}

// capBuffer keeps the first max bytes written to it and drains the rest.
type capBuffer struct {
	max        int
	buf        []byte
	overflow   bool
	onOverflow func()
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if b.overflow {
		return len(p), nil
	}
	if len(b.buf)+len(p) > b.max {
		b.buf = append(b.buf, p[:b.max-len(b.buf)]...)
		b.overflow = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		b.cut = true
	}
	return len(p), nil
}

// String is the tail, starting at a rune boundary, "…" marking a cut.
func (b *tailBuffer) String() string {
	s := b.buf
	cut := b.cut
	if len(s) > b.max {
		s = s[len(s)-b.max:]
		cut = true
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	if cut {
		return "…" + strings.ToValidUTF8(string(s), "?")
	}
	return strings.ToValidUTF8(string(s), "?")
}
