package e2e_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// demoSummary is what examples/demo.yaml computes for 8 chunks: fixed,
// because the chunks' text is generated deterministically.
const demoSummary = `{"chunks": 8, "words": 144000, "bytes": 639144, "digest": "023076ee4da98e2c"}`

// TestExamplesRun: the example workflows run as they are on a node with the
// default capability set (scan-and-summarize is a language illustration: it
// calls programs named scan and summarize that do not exist).
func TestExamplesRun(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.Capabilities = nil // the defaults, as robonode with no flags
	tn := startNodeWith(t, cfg)

	cases := []struct {
		file, inputs string
		outputs      string // exact outputs; "" to check completion only
	}{
		{"hello.yaml", `{"name": "Ada"}`, `{"greeting": "Hello, Ada!"}`},
		{"fan-out.yaml", `{"count": 4}`, `{"squares": [1, 4, 9, 16], "total": 30}`},
		{"diamond.yaml", "", ""},
		{"failure-policies.yaml", "", `{"result": {"flaky_attempt": 3, "enrichment": "none"}}`},
		{"demo.yaml", `{"pause": 0}`, ""},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("..", "examples", c.file))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), &robonetv1.SubmitWorkflowRequest{
				Workflow: inline(string(src), c.file), InputsJson: c.inputs,
			})
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			in := waitDone(t, tn.api, resp.GetInstanceId(), 60*time.Second)
			wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
			if c.outputs != "" {
				wantOutputs(t, in, c.outputs)
			}
			if c.file == "demo.yaml" {
				wantOutputs(t, in, `{"summary": `+demoSummary+`, "hashes": `+demoHashes+`}`)
			}
		})
	}
}

const demoHashes = `["31c9d6a6de56b2b7", "11939fba556dfb12", "7c29f35eda16b599", "1fdac9a5bd4fff65",
	"60b8cfb89e138add", "ca944e4703046aee", "551b3f01569acd1e", "a79716b0e92ce07c"]`
