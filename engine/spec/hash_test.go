package spec_test

import (
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/spec"
)

// hashBase is the reference spec; every variant in TestHashStable means the
// same thing and must hash the same.
const hashBase = `name: h
version: 1
inputs:
  hosts: {type: list}
  port: {type: int, default: 80}
defaults:
  retry: {max_attempts: 3, backoff: {initial: 1s, factor: 2, max: 30s}}
  timeout: 5m
tasks:
  discover:
    capability: net.scan
    action: exec
    with: {argv: [scan, "${{ inputs.hosts }}"], env: {A: "1", B: "2"}}
  probe:
    needs: [discover]
    spread: ${{ tasks.discover.output.hosts }}
    capability: net.scan
    action: http
    with: {url: "http://${{ item }}:${{ inputs.port }}/health"}
    on_failure: skip
outputs:
  report: ${{ size(tasks.probe.output) > 0 }}
`

var hashSameVariants = map[string]string{
	"reordered tasks, keys and maps": `version: 1
name: h
tasks:
  probe:
    on_failure: skip
    with: {url: "http://${{ item }}:${{ inputs.port }}/health"}
    action: http
    capability: net.scan
    spread: ${{ tasks.discover.output.hosts }}
    needs: [discover]
  discover:
    with: {env: {B: "2", A: "1"}, argv: [scan, "${{ inputs.hosts }}"]}
    action: exec
    capability: net.scan
outputs:
  report: ${{ size(tasks.probe.output) > 0 }}
defaults:
  timeout: 5m
  retry: {backoff: {max: 30s, factor: 2, initial: 1s}, max_attempts: 3}
inputs:
  port: {default: 80, type: int}
  hosts: {type: list}
`,
	"whitespace, comments, block style and needs as a string": `# a comment
name:    h   # trailing comment
version: 1

inputs:
  hosts:
    type: list
  port:
    type: int
    default: 80
defaults:
  retry:
    max_attempts: 3
    backoff:
      initial: 1s
      factor: 2
      max: 30s
  timeout: 5m
tasks:
  discover:
    capability: net.scan
    action: exec
    with:
      argv:
        - scan
        - '${{inputs.hosts}}'
      env:
        A: "1"
        B: "2"
  probe:
    needs: discover
    spread: "${{   tasks.discover.output.hosts   }}"
    capability: net.scan
    action: http
    with:
      url: "http://${{item}}:${{ inputs.port}}/health"
    on_failure: skip
outputs:
  report: ${{size( tasks.probe.output )>0}}
`,
	"defaults written out in the tasks": `name: h
version: 1
inputs:
  hosts: {type: list}
  port: {type: int, default: 80}
tasks:
  discover:
    capability: net.scan
    action: exec
    with: {argv: [scan, "${{ inputs.hosts }}"], env: {A: "1", B: "2"}}
    retry: {max_attempts: 3, backoff: {initial: 1s, factor: 2.0, max: 30s}}
    timeout: 300s
    on_failure: retry
  probe:
    needs: [discover, discover]
    spread: ${{ tasks.discover.output.hosts }}
    capability: net.scan
    action: http
    with: {url: "http://${{ item }}:${{ inputs.port }}/health"}
    on_failure: skip
    retry: {max_attempts: 3, backoff: {initial: 1s, factor: 2, max: 30s, jitter: 0}}
    timeout: 5m
outputs:
  report: ${{ size(tasks.probe.output) > 0 }}
`,
	"JSON": `{
	"name": "h",
	"version": 1,
	"inputs": {"hosts": {"type": "list"}, "port": {"type": "int", "default": 80}},
	"defaults": {
		"retry": {"max_attempts": 3, "backoff": {"initial": "1s", "factor": 2, "max": "30s"}},
		"timeout": "5m"
	},
	"tasks": {
		"discover": {
			"capability": "net.scan",
			"action": "exec",
			"with": {"argv": ["scan", "${{ inputs.hosts }}"], "env": {"A": "1", "B": "2"}}
		},
		"probe": {
			"needs": ["discover"],
			"spread": "${{ tasks.discover.output.hosts }}",
			"capability": "net.scan",
			"action": "http",
			"with": {"url": "http://${{ item }}:${{ inputs.port }}/health"},
			"on_failure": "skip"
		}
	},
	"outputs": {"report": "${{ size(tasks.probe.output) > 0 }}"}
}
`,
}

func TestHashStable(t *testing.T) {
	base := spec.Hash(mustCompile(t, hashBase))
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("Hash = %q", base)
	}
	for name, src := range hashSameVariants {
		if got := spec.Hash(mustCompile(t, src)); got != base {
			t.Errorf("%s: hash %s, want %s", name, got, base)
		}
	}
}

func TestHashChanges(t *testing.T) {
	base := spec.Hash(mustCompile(t, hashBase))
	for name, change := range map[string][2]string{
		"timeout":      {"timeout: 5m", "timeout: 6m"},
		"expression":   {"size(tasks.probe.output) > 0", "size(tasks.probe.output) > 1"},
		"literal":      {`B: "2"`, `B: "3"`},
		"literal type": {`B: "2"`, `B: 2`},
		"policy":       {"on_failure: skip", "on_failure: retry"},
		"version":      {"version: 1", "version: 2"},
		"input type":   {"port: {type: int, default: 80}", "port: {type: number, default: 80}"},
		"text":         {"/health", "/healthz"},
	} {
		src := strings.Replace(hashBase, change[0], change[1], 1)
		if src == hashBase {
			t.Fatalf("%s: change %q not applied", name, change[0])
		}
		if got := spec.Hash(mustCompile(t, src)); got == base {
			t.Errorf("%s: hash did not change", name)
		}
	}
}

// TestHashGolden pins the identity of existing specs: a change to the IR
// (a new field, left unset) or to the compiler must not change the hash of
// a spec that does not use it, or stored versions would no longer match
// their specs.
func TestHashGolden(t *testing.T) {
	for name, tc := range map[string]struct{ src, hash string }{
		"hashBase": {hashBase, "sha256:87781f6ace32508f9117dc6030dac91366aedc9a585b2d2ca942d463fcbd3fe0"},
		"fullSpec": {fullSpec, "sha256:02382731c3ab4951b224adef61a59aefacf1de4bf4d36bf6ab7723b064f27d8d"},
	} {
		if got := spec.Hash(mustCompile(t, tc.src)); got != tc.hash {
			t.Errorf("%s: hash %s, want %s", name, got, tc.hash)
		}
	}
}
