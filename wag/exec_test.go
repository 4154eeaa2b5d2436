//go:build unix

package wag

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/wag/tasklog"
)

// runExec runs the exec action directly, as a worker would.
func runExec(t *testing.T, ctx context.Context, input any, edit ...func(*Call)) (any, error) {
	t.Helper()
	call := &Call{Key: testKey("run[2]"), Task: "run", Index: 2, Capability: "code.exec", Action: "exec", Input: input}
	call.Key.Attempt = 3
	for _, e := range edit {
		e(call)
	}
	return execAction(ctx, call)
}

func argv(args ...string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

func sh(script string) map[string]any { return map[string]any{"argv": argv("sh", "-c", script)} }

func TestExecOutput(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		script string
		want   any
	}{
		{"JSON object", `echo '{"a": 1, "b": [true, 2.5, null]}'`, map[string]any{"a": int64(1), "b": []any{true, 2.5, nil}}},
		{"JSON number", `echo 42`, int64(42)},
		{"JSON string", `echo '"quoted"'`, "quoted"},
		{"text is trimmed", `printf '  hello world \n\n'`, "hello world"},
		{"text that starts like JSON", `echo '1 2'`, "1 2"},
		{"empty", `true`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runExec(t, ctx, sh(tc.script))
			if err != nil {
				t.Fatal(err)
			}
			if !value.Equal(out, tc.want) {
				t.Fatalf("output %#v, want %#v", out, tc.want)
			}
		})
	}
}

// TestExecScalarArguments checks that numbers and booleans in argv reach the
// program as text, as an argument like "${{ item }}" needs.
func TestExecScalarArguments(t *testing.T) {
	in := map[string]any{"argv": []any{"sh", "-c", `printf '%s|%s|%s' "$1" "$2" "$3"`, "sh", int64(7), 2.5, true}}
	out, err := runExec(t, context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out != "7|2.5|true" {
		t.Fatalf("output %#v, want %q", out, "7|2.5|true")
	}
}

func TestExecFailure(t *testing.T) {
	ctx := context.Background()
	_, err := runExec(t, ctx, sh(`echo partial; echo "something broke" >&2; exit 3`))
	if err == nil || err.Error() != "exec: sh exited with code 3; stderr (last 2 KiB): something broke" {
		t.Fatalf("error %v", err)
	}
	_, err = runExec(t, ctx, sh(`exit 1`))
	if err == nil || err.Error() != "exec: sh exited with code 1; no stderr" {
		t.Fatalf("error %v", err)
	}
	// Only the tail of a long stderr is kept.
	_, err = runExec(t, ctx, sh(`i=0; while [ $i -lt 500 ]; do echo "line $i of noise" >&2; i=$((i+1)); done; echo THE-END >&2; exit 2`))
	if err == nil || !strings.Contains(err.Error(), "exited with code 2; stderr (last 2 KiB): …") || !strings.HasSuffix(err.Error(), "THE-END") || len(err.Error()) > 2200 {
		t.Fatalf("error (%d bytes) %v", len(err.Error()), err)
	}
	// Killed by a signal.
	_, err = runExec(t, ctx, sh(`kill -9 $$`))
	if err == nil || !strings.Contains(err.Error(), "exec: sh was killed") {
		t.Fatalf("error %v", err)
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("WAG_TEST_SECRET", "leaked")
	t.Setenv("LANG", "C.UTF-8")
	in := sh(`printf '{"foo":"%s","n":"%s","attempt":"%s","exec":"%s","instance":"%s","task":"%s","idem":"%s","secret":"%s","lang":"%s","path":"%s"}' ` +
		`"$FOO" "$N" "$ROBONET_ATTEMPT" "$ROBONET_EXECUTION_ID" "$ROBONET_INSTANCE_ID" "$ROBONET_TASK" "$ROBONET_IDEMPOTENCY_KEY" "$WAG_TEST_SECRET" "$LANG" "$PATH"`)
	in["env"] = map[string]any{"FOO": "bar baz", "N": int64(3), "ROBONET_ATTEMPT": "spoofed"}
	var key string
	out, err := runExec(t, context.Background(), in, func(c *Call) { key = c.IdempotencyKey() })
	if err != nil {
		t.Fatal(err)
	}
	m := out.(map[string]any)
	want := map[string]any{"foo": "bar baz", "n": "3", "attempt": "3", "exec": "run[2]", "task": "run", "idem": key, "secret": "", "lang": "C.UTF-8"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if m["instance"] == "" || !strings.Contains(key, m["instance"].(string)) || m["path"] == "" {
		t.Errorf("output %v", m)
	}
}

// TestExecToken checks that each attempt gets a token of its own, which
// the task's env cannot replace.
func TestExecToken(t *testing.T) {
	in := sh(`printf '%s' "$ROBONET_EXEC_TOKEN"`)
	in["env"] = map[string]any{"ROBONET_EXEC_TOKEN": "spoofed"}
	first, err1 := runExec(t, context.Background(), in)
	second, err2 := runExec(t, context.Background(), in)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if first == "" || first == "spoofed" || first == second {
		t.Fatalf("tokens %q and %q, want two different random ones", first, second)
	}
}

func TestExecStdin(t *testing.T) {
	ctx := context.Background()
	in := map[string]any{"argv": argv("cat"), "stdin": "hello\n"}
	if out, err := runExec(t, ctx, in); err != nil || out != "hello" {
		t.Fatalf("string stdin: %v %v", out, err)
	}
	in["stdin"] = map[string]any{"x": int64(1), "list": []any{"a"}}
	out, err := runExec(t, ctx, in)
	if err != nil || !value.Equal(out, map[string]any{"x": int64(1), "list": []any{"a"}}) {
		t.Fatalf("JSON stdin: %v %v", out, err)
	}
	// More than a pipe holds, and a child that never reads its stdin.
	big := strings.Repeat("0123456789", 20000)
	if out, err := runExec(t, ctx, map[string]any{"argv": argv("wc", "-c"), "stdin": big}); err != nil || out != int64(200000) {
		t.Fatalf("big stdin: %v %v", out, err)
	}
	if out, err := runExec(t, ctx, map[string]any{"argv": argv("true"), "stdin": big}); err != nil || out != "" {
		t.Fatalf("unread stdin: %v %v", out, err)
	}
}

func TestExecDir(t *testing.T) {
	dir := t.TempDir()
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runExec(t, context.Background(), map[string]any{"argv": argv("pwd", "-P"), "dir": dir})
	if err != nil || out != want {
		t.Fatalf("pwd: %v %v, want %s", out, err, want)
	}
}

func TestExecTimeout(t *testing.T) {
	_, err := runExec(t, context.Background(), map[string]any{"argv": argv("sleep", "30"), "timeout": "100ms"})
	if err == nil || !strings.Contains(err.Error(), "exec: sleep: exec timed out after 100ms") || !errors.Is(err, errTimedOut) {
		t.Fatalf("error %v", err)
	}
}

func TestExecOutputCap(t *testing.T) {
	_, err := runExec(t, context.Background(), map[string]any{"argv": argv("yes")}, func(c *Call) { c.MaxOutputBytes = 1000 })
	if err == nil || !strings.Contains(err.Error(), "exec: yes: stdout exceeded the 1000-byte output limit") {
		t.Fatalf("error %v", err)
	}
}

// startGroup runs script (which must write "$$ $!" to "$FIFO") in the exec
// action and returns the process group id, the background child's pid and
// the action's outcome.
func startGroup(t *testing.T, ctx context.Context, script string, edit ...func(*Call)) (pgid, child int, done <-chan error) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "pids")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	in := sh(script)
	in["env"] = map[string]any{"FIFO": fifo}
	errc := make(chan error, 1)
	go func() {
		_, err := runExec(t, ctx, in, edit...)
		errc <- err
	}()
	lines := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until the script opens it
		if err != nil {
			lines <- ""
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		lines <- line
	}()
	fields := strings.Fields(recv(t, lines, "the pids"))
	if len(fields) != 2 {
		t.Fatalf("pids %q", fields)
	}
	pgid, _ = strconv.Atoi(fields[0])
	child, _ = strconv.Atoi(fields[1])
	return pgid, child, errc
}

// groupAlive lists the live (not zombie) processes of a process group.
func groupAlive(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var alive []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			alive = append(alive, pid)
		}
	}
	return alive
}

// waitGroupGone waits until no process of the group is alive: SIGKILL is
// delivered asynchronously and nothing signals the death of a grandchild.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		alive := groupAlive(t, pgid)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of group %d survived", alive, pgid)
		}
		<-tick.C
	}
}

func TestExecCancelKillsTheProcessGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pgid, child, done := startGroup(t, ctx, `sleep 60 & echo "$$ $!" > "$FIFO"; sleep 60`)
	if alive := groupAlive(t, pgid); len(alive) < 2 || !slices.Contains(alive, child) { // sh and the background sleep, at least
		t.Fatalf("group %d before cancel: %v", pgid, alive)
	}
	cancel()
	err := recv(t, done, "the action to return")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	waitGroupGone(t, pgid)
}

func TestExecCancelEscalatesToSIGKILL(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &runtimeEnv{clock: clock.System(), httpClient: defaultRuntime.httpClient, killGrace: 50 * time.Millisecond}
	// The whole group ignores SIGTERM (ignored signals are inherited).
	pgid, _, done := startGroup(t, ctx, `trap "" TERM; sleep 60 & echo "$$ $!" > "$FIFO"; sleep 60`, func(c *Call) { c.rt = rt })
	cancel()
	if err := recv(t, done, "the action to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	waitGroupGone(t, pgid)
}

func TestExecNeverOrphansChildren(t *testing.T) {
	// The leader exits at once; its background child holds stdout open.
	pgid, _, done := startGroup(t, context.Background(), `sleep 60 & echo "$$ $!" > "$FIFO"; echo done`)
	if err := recv(t, done, "the action to return"); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pgid)
}

func TestExecBadInput(t *testing.T) {
	cases := []struct {
		input any
		want  string
	}{
		{nil, "exec: the task has no `with`; give it e.g. with: {argv: [sh, -c, \"echo hello\"]}"},
		{"ls -l", "exec: `with` must be an object, got string"},
		{map[string]any{}, "exec: input.argv is required"},
		{map[string]any{"argv": "ls -l"}, "exec: input.argv must be a list of strings, got string; write e.g. argv: [ls, -l]"},
		{map[string]any{"argv": []any{}}, "exec: input.argv is empty"},
		{map[string]any{"argv": []any{"echo", []any{"x"}}}, "exec: input.argv[1] must be a string, number or bool, got list"},
		{map[string]any{"argv": []any{""}}, "exec: input.argv[0] is empty"},
		{map[string]any{"argv": argv("true"), "env": []any{"A=1"}}, "exec: input.env must be an object of names to strings, got list"},
		{map[string]any{"argv": argv("true"), "env": map[string]any{"A": []any{}}}, "exec: input.env.A must be a string, number or bool, got list"},
		{map[string]any{"argv": argv("true"), "env": map[string]any{"A=B": "x"}}, "exec: input.env has an invalid variable \"A=B\""},
		{map[string]any{"argv": argv("true"), "dir": int64(1)}, "exec: input.dir must be a string, got int"},
		{map[string]any{"argv": argv("true"), "dir": "/no/such/dir"}, "exec: input.dir \"/no/such/dir\" is not a directory on this node"},
		{map[string]any{"argv": argv("true"), "timeout": "soon"}, "exec: input.timeout \"soon\" is not a positive duration"},
		{map[string]any{"argv": argv("true"), "timeout": int64(5)}, "exec: input.timeout must be a duration string"},
		{map[string]any{"argv": argv("true"), "args": []any{}}, "exec: unknown field \"args\" in `with` (known: argv, dir, env, stdin, timeout)"},
		{map[string]any{"argv": argv("no-such-program-xyz")}, "exec: program \"no-such-program-xyz\" not found in PATH"},
	}
	for _, tc := range cases {
		_, err := runExec(t, context.Background(), tc.input)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("input %v: error %v, want it to start with %q", tc.input, err, tc.want)
		}
	}
}

// An attempt's stderr and stdout go to its log on the node, on success and
// on failure, each line with its stream; the output is still stdout.
func TestExecWritesTheAttemptLog(t *testing.T) {
	ctx := context.Background()
	logs, err := tasklog.Open(t.TempDir(), tasklog.Limits{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	instance := uuid.New()
	withLogs := func(c *Call) {
		c.Key.InstanceID = instance
		c.rt = &runtimeEnv{clock: clock.System(), httpClient: defaultRuntime.httpClient, killGrace: defaultKillGrace, logs: logs}
	}
	read := func(k tasklog.Key) []string {
		t.Helper()
		var out []string
		err := logs.Read(ctx, k, tasklog.ReadOptions{}, func(ls []tasklog.Line) error {
			for _, l := range ls {
				out = append(out, l.Stream.String()+": "+string(l.Text))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	out, err := runExec(t, ctx, sh(`echo "loading model" >&2; echo '{"ok": true}'; printf 'done, no newline' >&2`), withLogs)
	if err != nil || !value.Equal(out, map[string]any{"ok": true}) {
		t.Fatalf("output %v, error %v", out, err)
	}
	k := tasklog.Key{Instance: instance, Execution: "run[2]", Attempt: 3}
	got := read(k)
	slices.Sort(got) // the two pipes are read concurrently
	want := []string{"stderr: done, no newline", "stderr: loading model", `stdout: {"ok": true}`}
	if !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q", got, want)
	}

	_, err = runExec(t, ctx, sh(`echo "retrying upstream" >&2; exit 4`), withLogs, func(c *Call) { c.Key.Attempt = 4 })
	if err == nil || !strings.Contains(err.Error(), "exited with code 4") {
		t.Fatalf("error %v", err)
	}
	k.Attempt = 4
	if got := read(k); !slices.Equal(got, []string{"stderr: retrying upstream"}) {
		t.Fatalf("log of the failed attempt %q", got)
	}
}
