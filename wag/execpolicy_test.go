//go:build unix

package wag

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/robonet/robonet/internal/clock"
)

func TestExecPolicyValidate(t *testing.T) {
	for _, good := range [][]string{
		nil,
		{"*"},
		{"none"},
		{"/usr/bin/curl"},
		{"/usr/bin/curl", "/opt/tools/*", "/usr/bin/python3.[0-9]*"},
	} {
		if err := (ExecPolicy{Allow: good}).Validate(); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, c := range []struct {
		allow []string
		msg   string
	}{
		{[]string{"sh"}, `exec-allow "sh": want an absolute path or glob`},
		{[]string{"bin/*"}, "absolute path"},
		{[]string{"/opt/[tools"}, "not a valid glob"},
		{[]string{"/usr//bin/curl"}, `write "/usr/bin/curl"`},
		{[]string{"/usr/bin/"}, `write "/usr/bin"`},
		{[]string{"*", "/bin/sh"}, `"*" stands alone`},
		{[]string{"/bin/sh", "none"}, `"none" stands alone`},
	} {
		if err := (ExecPolicy{Allow: c.allow}).Validate(); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want an error saying %q", c.allow, err, c.msg)
		}
	}
}

// policyRun runs the exec action on a node named w1 whose policy is p, and
// returns the refusals it counted.
func policyRun(t *testing.T, p ExecPolicy, input map[string]any) (any, float64, error) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	rt := &runtimeEnv{clock: clock.System(), httpClient: defaultRuntime.httpClient, killGrace: defaultKillGrace,
		exec: newExecRules("w1", p, nil), execRefused: refused}
	out, err := runExec(t, context.Background(), input, func(c *Call) { c.rt = rt })
	return out, testutil.ToFloat64(refused), err
}

// toolDir makes a directory holding an executable script, tool, that
// prints its path, and puts it first in PATH.
func toolDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\nprintf '%s' \"$0\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

// The policy is matched against the program's absolute path: a bare name
// as PATH lookup resolves it, a relative one from the attempt's directory,
// symlinks not followed; the program runs under the name it was given.
func TestExecPolicyMatchesTheResolvedPath(t *testing.T) {
	dir := toolDir(t)
	tools := ExecPolicy{Allow: []string{dir + "/*"}, Required: true}
	for _, c := range []struct {
		name  string
		input map[string]any
	}{
		{"a bare name found in PATH", map[string]any{"argv": argv("tool")}},
		{"an absolute path", map[string]any{"argv": argv(dir + "/tool")}},
		{"a relative path, from dir", map[string]any{"argv": argv("./tool"), "dir": dir}},
		{"a path that cleans into the directory", map[string]any{"argv": argv(dir + "/../" + filepath.Base(dir) + "/tool")}},
	} {
		out, refused, err := policyRun(t, tools, c.input)
		if err != nil || refused != 0 {
			t.Errorf("%s: %v (refused %v)", c.name, err, refused)
			continue
		}
		if want := dir + "/tool"; out != want { // a script's $0 is the path the kernel ran
			t.Errorf("%s: ran %q, want %q", c.name, out, want)
		}
	}

	// A symlink in an allowed directory is allowed, whatever it points at.
	shPath, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shPath, filepath.Join(dir, "shell")); err != nil {
		t.Fatal(err)
	}
	if out, _, err := policyRun(t, tools, map[string]any{"argv": argv("shell", "-c", "echo linked")}); err != nil || out != "linked" {
		t.Errorf("a symlink in an allowed directory: %v %v", out, err)
	}
	// The program runs under the name it was given (argv[0]), as a
	// multi-call binary needs.
	if _, err := os.Stat("/proc/self/cmdline"); err == nil {
		out, _, err := policyRun(t, tools, map[string]any{"argv": argv("shell", "-c", `tr '\0' '\n' < /proc/$$/cmdline | head -n 1`)})
		if err != nil || out != "shell" {
			t.Errorf("argv[0] of a program found in PATH: %q %v, want shell", out, err)
		}
	}

	// sh itself is not in the directory: refused, naming the program as
	// given and as resolved, the node, the policy and the fix.
	_, refused, err := policyRun(t, tools, sh("echo hi"))
	want := "exec refused on node w1: sh (" + shPath + ") is not allowed by this node's --exec-allow policy (it allows: " + dir + "/*); add it with --exec-allow " + shPath + " on w1"
	if !errors.Is(err, ErrExecRefused) || err.Error() != want || refused != 1 {
		t.Fatalf("sh outside the policy: %v (refused %v)\nwant %s", err, refused, want)
	}
	// A glob's * stays within one path element.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "tool"), filepath.Join(dir, "sub", "tool")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := policyRun(t, tools, map[string]any{"argv": argv(dir + "/sub/tool")}); !errors.Is(err, ErrExecRefused) {
		t.Errorf("a program below the glob's directory: %v, want a refusal", err)
	}
	// A program that is nowhere is not found, as without a policy.
	if _, refused, err := policyRun(t, tools, map[string]any{"argv": argv("no-such-program-here")}); err == nil ||
		!strings.Contains(err.Error(), `program "no-such-program-here" not found in PATH`) || refused != 0 {
		t.Errorf("a missing program: %v (refused %v)", err, refused)
	}
}

func TestExecPolicyWithoutPatterns(t *testing.T) {
	hello := sh("echo hello")
	// No policy on a node only its machine reaches, or "*": anything runs.
	for _, p := range []ExecPolicy{{}, {Allow: []string{"*"}, Required: true}} {
		if out, refused, err := policyRun(t, p, hello); err != nil || out != "hello" || refused != 0 {
			t.Errorf("%+v: %v %v (refused %v)", p, out, err, refused)
		}
	}
	// No policy where one is required, or "none": nothing runs, and the
	// refusal names the node, the program and the flag.
	for _, c := range []struct {
		p    ExecPolicy
		want string
	}{
		{ExecPolicy{Required: true}, "exec refused on node w1: this node has no exec policy and listens beyond loopback, so it runs no program (the attempt asked for sh); start it with --exec-allow"},
		{ExecPolicy{Allow: []string{"none"}}, "exec refused on node w1: its policy is --exec-allow none, so it runs no program (the attempt asked for sh)"},
	} {
		_, refused, err := policyRun(t, c.p, hello)
		if !errors.Is(err, ErrExecRefused) || !strings.HasPrefix(err.Error(), c.want) || refused != 1 {
			t.Errorf("%+v: %v (refused %v), want %q", c.p, err, refused, c.want)
		}
	}
}

// --exec-user runs the program as that user, with its groups, HOME, USER
// and LOGNAME, in its home directory (or / when it has none); the node's
// own environment stays out.
func TestExecUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running programs as another user needs root; this test runs as uid", os.Geteuid())
	}
	t.Setenv("ROBONET_TOKEN", "node-secret")
	u, err := lookupExecUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtimeEnv{clock: clock.System(), httpClient: defaultRuntime.httpClient, killGrace: defaultKillGrace,
		exec: newExecRules("w1", ExecPolicy{User: "nobody"}, u)}
	out, err := runExec(t, context.Background(), sh(`printf '%s|%s|%s|%s|%s|%s|%s' "$(id -u)" "$(id -g)" "$HOME" "$USER" "$LOGNAME" "$(pwd)" "$ROBONET_TOKEN"`),
		func(c *Call) { c.rt = rt })
	if err != nil {
		t.Fatal(err)
	}
	wantDir := "/"
	if fi, err := os.Stat(u.home); err == nil && fi.IsDir() {
		wantDir = u.home
	}
	if want := "65534|" + strconv.FormatUint(uint64(u.gid), 10) + "|" + u.home + "|nobody|nobody|" + wantDir + "|"; out != want {
		t.Fatalf("as nobody: %q, want %q", out, want)
	}
	// By uid, too.
	if byID, err := lookupExecUser("65534"); err != nil || byID.name != "nobody" {
		t.Fatalf("exec-user 65534: %+v %v", byID, err)
	}
	if _, err := lookupExecUser("no-such-user-here"); err == nil || !strings.Contains(err.Error(), `exec-user "no-such-user-here": no such user`) {
		t.Fatalf("an unknown user: %v", err)
	}
}

func TestCanSwitchTo(t *testing.T) {
	if err := canSwitchTo(0, 65534, "nobody"); err != nil {
		t.Errorf("root: %v", err)
	}
	if err := canSwitchTo(1000, 1000, "me"); err != nil {
		t.Errorf("oneself: %v", err)
	}
	if err := canSwitchTo(1000, 65534, "nobody"); err == nil || !strings.Contains(err.Error(), "only a node running as root may run programs as another user") {
		t.Errorf("another user, not root: %v", err)
	}
}
