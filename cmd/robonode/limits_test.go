package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/node"
)

// docs/limits.md lists every limit --limit accepts, with its default.
func TestLimitsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range limits {
		row := "| `" + l.name + "` | " + l.def + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/limits.md has no row starting %q", row)
		}
	}
}

func TestParseLimits(t *testing.T) {
	sets, err := parseLimits([]string{"spec-bytes=2MiB", "eval-time=1s", "spread-width=250_000", "input-bytes=512KiB", "tasks=10"})
	if err != nil {
		t.Fatal(err)
	}
	var c node.Config
	for _, set := range sets {
		set(&c)
	}
	if c.MaxSpecBytes != 2<<20 || c.Engine.Spec.MaxSpecBytes != 2<<20 || c.Engine.Spec.Expr.MaxEvalTime != time.Second ||
		c.Engine.SpreadLimit != 250_000 || c.MaxInputBytes != 512<<10 || c.Engine.Spec.MaxTasks != 10 {
		t.Fatalf("config after the limits: %+v", c)
	}
	for _, bad := range []string{"nope=1", "spec-bytes", "spec-bytes=-1", "spec-bytes=2XB", "eval-time=5", "tasks=0", "tasks=many"} {
		if _, err := parseLimits([]string{bad}); err == nil {
			t.Errorf("parseLimits(%q) accepted it", bad)
		}
	}
	if _, err := parseLimits([]string{"nope=1"}); err == nil || !strings.Contains(err.Error(), "spec-bytes, spec-expanded-bytes") {
		t.Errorf("an unknown limit's error does not list the names: %v", err)
	}
}
