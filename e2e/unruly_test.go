package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// An action's error text is its own to choose: one longer than a message
// may carry, or not UTF-8, still fails its task with a readable error, and
// neither stalls the stream that carries the result to the leader nor
// fails to read back through the API. (Progress text is fitted the same
// way: TestActionTextIsFitted in package wag.)
func TestUnrulyActionTextFailsItsTaskCleanly(t *testing.T) {
	reg := wag.NewRegistry()
	err := reg.Register("unruly", func(_ context.Context, call *wag.Call) (any, error) {
		if call.Input.(map[string]any)["kind"] == "long" {
			return nil, errors.New("long: " + strings.Repeat("x", 1<<20))
		}
		return nil, errors.New("not UTF-8: \xff\xfe\xfd")
	})
	if err != nil {
		t.Fatal(err)
	}
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name == "w1" {
			cfg.Wag.Registry = reg
		}
	}, "w1")
	m.waggler("")
	spec := `name: unruly
version: 1
inputs:
  kind: {type: string}
tasks:
  unruly: {capability: work, action: unruly, with: {kind: "${{ inputs.kind }}"}}
`
	for kind, want := range map[string]string{"long": "long: xxx", "bytes": "not UTF-8: \ufffd"} {
		id := submitSpec(t, m.server.api, spec, `{"kind": "`+kind+`"}`)
		in := waitDone(t, m.server.api, id, 30*time.Second)
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
		task := in.GetTasks()[0]
		msg := task.GetError()
		if task.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_FAILED || !utf8.ValidString(msg) || len(msg) > wag.MaxErrorBytes {
			t.Fatalf("%s: %v, error of %d bytes (valid UTF-8: %v): %.200q", kind, task.GetStatus(), len(msg), utf8.ValidString(msg), msg)
		}
		if !strings.HasPrefix(msg, want) {
			t.Errorf("%s: error %.80q, want it to start %q", kind, msg, want)
		}
		if kind == "long" && !strings.HasSuffix(msg, " bytes clipped)") {
			t.Errorf("long: a clipped error should say so: …%q", msg[len(msg)-min(len(msg), 80):])
		}
	}
}
