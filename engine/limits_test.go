package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
)

// nestedSpec's expression passes a raised compile-time cost screen but not
// the default one.
const nestedSpec = `
name: nested
version: 1
inputs:
  l: {type: list}
tasks:
  a:
    capability: test.cap
    action: echo
    with: {n: "${{ inputs.l.map(x, inputs.l.map(y, inputs.l.map(z, z))).size() }}"}
`

// A stored version this engine cannot load (its IR does not decode, or its
// plan is refused by limits lowered since) is reported as such, listed as
// unreadable, and never answered as an internal error.
func TestUnloadableVersions(t *testing.T) {
	h := newHarness(t)
	raised := func(c *engine.Config) { c.Spec = spec.Limits{Expr: expr.Limits{MaxCost: 1 << 60}} }
	old := h.start(1, raised)
	if _, err := old.RegisterWorkflow(ctxOf(t), "nested.yaml", []byte(nestedSpec)); err != nil {
		t.Fatalf("register under raised limits: %v", err)
	}
	if _, err := h.store.RegisterWorkflow(ctxOf(t), port.WorkflowVersion{Name: "garbage", Version: 1, IRHash: "sha256:00", IR: []byte{0xff, 0xff, 0xff}}); err != nil {
		t.Fatal(err)
	}

	e := h.start(2) // default limits
	for _, name := range []string{"nested", "garbage"} {
		_, err := e.Submit(ctxOf(t), engine.SubmitRequest{Name: name, Inputs: map[string]any{"l": []any{}}})
		if !errors.Is(err, engine.ErrUnloadable) || !strings.Contains(err.Error(), "register the corrected spec as a new version") {
			t.Errorf("submit %s: %v, want ErrUnloadable with the way out", name, err)
		}
	}
	list, err := e.ListWorkflows(ctxOf(t), "", 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListWorkflows = %+v, %v", list, err)
	}
	for _, info := range list {
		switch info.Name {
		case "nested": // listing decodes the IR only; it builds no plan
			if info.Tasks != 1 {
				t.Errorf("nested listed as %+v", info)
			}
		case "garbage":
			if !strings.HasPrefix(info.Description, "(unreadable") {
				t.Errorf("garbage listed as %+v", info)
			}
		}
	}
}

func TestDeadlineTooLarge(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	_, err := e.Submit(ctxOf(t), engine.SubmitRequest{Spec: []byte(chainSpec), Inputs: map[string]any{"x": 1}, Deadline: engine.MaxDeadline + time.Second})
	if !errors.Is(err, port.ErrInvalidArgument) || !strings.Contains(err.Error(), "too large, the maximum is 87600h0m0s") {
		t.Fatalf("got %v", err)
	}
}
