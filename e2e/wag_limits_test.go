package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// A server that takes messages of 1 MiB and worker nodes that take and
// make larger ones (message-bytes 16 MiB, output-bytes 4 MiB): an output
// too large for the server, and an input too large for it to send, each
// fail their attempt with an error that names the setting — and the
// streams between the nodes go on carrying everything else. Before, the
// receiver refused the message, the stream ended, and the sender sent it
// again on the next one, for ever, with every result queued behind it.
func TestMessageLimitsDifferBetweenNodes(t *testing.T) {
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		if name == "server" {
			cfg.MaxMessageBytes = 1 << 20
			cfg.Wag.MaxOutputBytes = 512 << 10
			// The large input is built by an expression over 100,000
			// items, which under the race detector on a busy machine took
			// more than the default second (the watchdog failed the task
			// before the input could be found too large).
			cfg.Engine.Spec.Expr.MaxEvalTime = 30 * time.Second
			return
		}
		cfg.Wag.MaxOutputBytes = 4 << 20
		reg := bigRegistry(t)
		cfg.Wag.Registry = reg
	}, "w1", "w2")
	m.waggler("")

	// An output of 2 MB: the worker node makes it, the server cannot take it.
	id := submitSpec(t, m.server.api, bigSpec, `{"n": 2000000}`)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
	if e := task(t, in, "big").GetError(); !strings.Contains(e, "output makes a message of") || !strings.Contains(e, "messages to the leader server are at most 1048576 bytes") ||
		!strings.Contains(e, "message-bytes") {
		t.Fatalf("task error %q does not say what was too large for whom, and which setting", e)
	}

	// An input of 2.3 MB: the server cannot send it to the Waggler's node.
	id = submitSpec(t, m.server.api, bigInputSpec, `{}`)
	in = waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
	if e := task(t, in, "take").GetError(); !strings.Contains(e, "input makes a message of") || !strings.Contains(e, "are at most 1048576 bytes") {
		t.Fatalf("task error %q does not say the input was too large", e)
	}

	// What fits still crosses, on the same streams.
	id = submitSpec(t, m.server.api, bigSpec, `{"n": 1000}`)
	in = waitDone(t, m.server.api, id, 30*time.Second)
	wantOutputs(t, in, fmt.Sprintf(`{"length": %d}`, 1000))
}

// bigRegistry is a worker's registry with "big": {"n": n} → a string of n
// bytes; and "take": → the length of its input's "s".
func bigRegistry(t *testing.T) *wag.Registry {
	reg := wag.NewRegistry()
	if err := reg.Register("big", func(_ context.Context, call *wag.Call) (any, error) {
		n, _ := call.Input.(map[string]any)["n"].(int64)
		return strings.Repeat("x", int(n)), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("take", func(_ context.Context, call *wag.Call) (any, error) {
		s, _ := call.Input.(map[string]any)["s"].([]any)
		return int64(len(s)), nil
	}); err != nil {
		t.Fatal(err)
	}
	return reg
}

const bigSpec = `name: big
version: 1
inputs:
  n: {type: int}
tasks:
  big:
    capability: work
    action: big
    retry: {max_attempts: 1}
    with: {n: "${{ inputs.n }}"}
outputs:
  length: ${{ size(tasks.big.output) }}
`

const bigInputSpec = `name: big-input
version: 1
tasks:
  take:
    capability: work
    action: take
    retry: {max_attempts: 1}
    with: {s: "${{ lists.range(100000).map(i, 'xxxxxxxxxxxxxxxxxxxx') }}"}
`
