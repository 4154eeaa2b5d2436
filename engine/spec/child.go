package spec

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// childHint says how to write a task's workflow.
const childHint = "write workflow: NAME@VERSION to run version VERSION of a registered workflow (e.g. scan-host@2), or workflow: NAME for its latest version"

// childWorkflow reads a task's `workflow: name@version` (or `name`, the
// latest version); nil when it is invalid (an error was reported). Whether
// the workflow is registered is not the compiler's to know: the engine
// checks it when the spec is registered or submitted.
func (c *compiler) childWorkflow(v *yaml.Node, w where) *robonetv1.ChildWorkflow {
	s, ok := c.str(v, w)
	if !ok {
		return nil
	}
	n := c.resolve(v)
	name, version, hasVersion := strings.Cut(s, "@")
	if !workflowNameRE.MatchString(name) {
		c.errorf(n, w, childHint+"; a name is lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
			"invalid workflow %q: the name %q is not a workflow name", s, name)
		return nil
	}
	ref := &robonetv1.ChildWorkflow{Name: name}
	if hasVersion {
		ver, err := strconv.ParseUint(version, 10, 32)
		if err != nil || ver == 0 || version != strconv.FormatUint(ver, 10) {
			c.errorf(n, w, "a version is a positive whole number (scan-host@2); leave @VERSION out to run the latest version",
				"invalid workflow %q: the version %q is not a positive whole number", s, version)
			return nil
		}
		ref.Version = uint32(ver)
	}
	return ref
}

// checkChild refuses what a task whose body is a workflow cannot have: an
// action of its own (capability, action), verify (a workflow is not run on
// one worker) and on: every_node.
func (c *compiler) checkChild(t *taskSpec, fields map[string]entry) {
	for _, other := range []struct {
		key, hint string
	}{
		{"capability", "remove capability: the child workflow's own tasks name the capabilities that run them"},
		{"action", "remove action: the task runs the child workflow, not an action"},
		{"verify", "remove verify, or put it on the child workflow's tasks"},
		{"on", "remove on, or put on: every_node on the child workflow's tasks"},
	} {
		if f, ok := fields[other.key]; ok {
			c.errorf(f.keyN, t.w.child(other.key), other.hint, "a task cannot have both workflow and %s: its body is either a child workflow or an action", other.key)
			t.ok = false
		}
	}
}

// Locate returns the line and column of the value at path in the spec src
// — the keys of nested mappings, e.g. "tasks", "scan", "workflow" — or 0, 0
// when src does not parse or holds no such value. It places problems found
// after compiling, which the IR cannot (it holds no positions): the
// engine's, such as a child workflow that is not registered. src should be
// a spec that compiled, so its size and aliases are within the limits.
func Locate(src []byte, path ...string) (line, col int) {
	var doc yaml.Node
	if err := safeDecode(yaml.NewDecoder(strings.NewReader(string(src))), &doc); err != nil || len(doc.Content) == 0 {
		return 0, 0
	}
	n := doc.Content[0]
	for _, key := range path {
		for hops := 0; n != nil && n.Kind == yaml.AliasNode && hops < 8; hops++ {
			n = n.Alias
		}
		if n == nil || n.Kind != yaml.MappingNode {
			return 0, 0
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	if n == nil {
		return 0, 0
	}
	return n.Line, n.Column
}
