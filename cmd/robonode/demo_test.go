package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/chaos/demo"
	"github.com/robonet/robonet/node"
)

// The demo's flags set its options; the scenarios themselves are tested in
// package chaos/demo.
func TestDemoFlags(t *testing.T) {
	parse := func(args ...string) (demo.Options, string) {
		t.Helper()
		var o demo.Options
		var level string
		cmd := &cobra.Command{}
		addDemoFlags(cmd.Flags(), &o, &level)
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		return o, level
	}
	if o, level := parse(); o != (demo.Options{}) || level != "error" {
		t.Errorf("defaults: %+v, log level %q", o, level)
	}
	o, level := parse("--postgres", "postgres://db/robonet", "--data-dir", "/tmp/d", "--keep", "--log-level", "warn")
	if want := (demo.Options{Postgres: "postgres://db/robonet", DataDir: "/tmp/d", Keep: true}); o != want || level != "warn" {
		t.Errorf("flags: %+v, log level %q; want %+v, warn", o, level, want)
	}

	// Wrong flags are usage errors, refused before any node starts.
	for _, args := range [][]string{{"demo", "--log-level", "loud"}, {"demo", "extra"}, {"demo", "--no-such-flag"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut, env{}.get); code != exitUsage || out.Len() > 0 {
			t.Errorf("robonode %v: exit %d, want %d with nothing on stdout\n%s%s", args, code, exitUsage, out.String(), errOut.String())
		}
	}
}

// A demo's outcome becomes robonode's exit code: a failure it told exits 1
// without another word, a configuration a node refused is a usage error,
// anything else a runtime error.
func TestDemoError(t *testing.T) {
	var re runtimeError
	if err := demoError(nil); err != nil {
		t.Errorf("nil: %v", err)
	}
	if err := demoError(fmt.Errorf("x: %w", demo.ErrReported)); !errors.Is(err, errReported) {
		t.Errorf("told: %v, want errReported", err)
	}
	if err := demoError(errors.Join(fmt.Errorf("%w: bad", node.ErrConfig), demo.ErrReported)); !errors.Is(err, errReported) {
		t.Errorf("told, and the mesh stopped uncleanly: %v, want errReported", err)
	}
	if err := demoError(fmt.Errorf("%w: bad", node.ErrConfig)); errors.As(err, &re) || !errors.Is(err, node.ErrConfig) {
		t.Errorf("configuration: %v, want it as it is (a usage error)", err)
	}
	if err := demoError(errors.New("no engine leader elected")); !errors.As(err, &re) || !strings.Contains(err.Error(), "no engine leader") {
		t.Errorf("other: %v, want a runtime error", err)
	}
}
