package spec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/spec"
)

// invalidCase is a spec that must be rejected, and the first error expected.
type invalidCase struct {
	name string
	src  string
	// Limits to compile with; zero fields take the defaults.
	limits spec.Limits
	// Expected first error. line 0 means "no position"; col 0 means "do not
	// check the column".
	line, col int
	task      string
	field     string
	msg       string // substring of Msg
	hint      string // substring of Hint; empty: not checked
}

// header is the valid start most cases share (lines 1-2).
const header = "name: demo\nversion: 1\n"

// joinBase is a spec whose task j (lines 6-9) needs a and b; cases append
// line 10.
const joinBase = header + "tasks:\n  a: {capability: core, action: echo}\n  b: {capability: core, action: echo}\n  j:\n    capability: core\n    action: echo\n    needs: [a, b]\n"

// loopBase is a spec whose task p (lines 5-7) may loop; cases append
// line 8 on.
const loopBase = header + "tasks:\n  list: {capability: core, action: echo}\n  p:\n    capability: core\n    action: echo\n"

// waitBase is a spec whose task w (lines 5-6) needs plan; cases append
// line 7 on.
const waitBase = header + "tasks:\n  plan: {capability: core, action: echo}\n  w:\n    needs: plan\n"

// trigBase declares the event input (line 3) and a task (line 4); cases
// append the trigger on line 5.
const trigBase = header + "inputs: {event: {type: any}}\ntasks: {a: {capability: core, action: echo}}\n"

var invalidCases = []invalidCase{
	// --- YAML and document shape
	{name: "bad yaml", src: "name: demo\nversion: 1\ntasks: a: b: c\n",
		line: 3, msg: "invalid YAML: mapping values are not allowed here", hint: "quote"},
	{name: "bad yaml on line 1", src: "name: a: b\n",
		line: 1, msg: "invalid YAML: mapping values are not allowed here"},
	{name: "bad yaml indentation", src: "name: demo\nversion: 1\ntasks:\n  a:\n    action: echo\n   capability: core\n",
		line: 6, msg: "invalid YAML"},
	{name: "tab indentation", src: "name: demo\n\tversion: 1\n",
		line: 2, msg: "invalid YAML", hint: "tabs"},
	{name: "unknown anchor", src: header + "tasks:\n  a: *nope\n",
		line: 4, col: 6, msg: "invalid YAML: unknown anchor 'nope' referenced"},
	{name: "empty document", src: "",
		line: 0, msg: "spec is empty"},
	{name: "only comments", src: "# nothing here\n",
		line: 0, msg: "spec is empty"},
	{name: "null document", src: "~\n",
		line: 1, msg: "spec is empty"},
	{name: "two documents", src: header + "tasks: {a: {capability: core, action: echo}}\n---\nname: other\n",
		line: 4, col: 1, msg: "more than one YAML document"},
	{name: "top level is a list", src: "- name: demo\n",
		line: 1, col: 1, msg: "top level of a spec must be a mapping", hint: ""},
	{name: "top level is a string", src: "hello\n",
		line: 1, col: 1, msg: "must be a mapping (key: value), not the string \"hello\""},
	{name: "not utf-8", src: "name: demo\nversion: 1\ndescription: caf\xe9\n",
		line: 3, col: 17, msg: "not valid UTF-8"},
	{name: "duplicate top-level key", src: header + "name: again\ntasks: {a: {capability: core, action: echo}}\n",
		line: 3, col: 1, field: "name", msg: `duplicate key "name" (first defined on line 1)`},
	{name: "merge key", src: header + "base: &b {capability: core, action: echo}\ntasks:\n  a:\n    <<: *b\n",
		line: 3, col: 1, field: "base", msg: `unknown key "base"`},
	{name: "merge key rejected", src: header + "tasks:\n  a: {<<: {x: 1}, capability: core, action: echo}\n",
		line: 4, col: 7, task: "a", msg: "merge keys (<<) are not supported", hint: "defaults"},

	// --- top level fields
	{name: "unknown top-level key", src: header + "taks: {}\n",
		line: 3, col: 1, field: "taks", msg: `unknown key "taks" in the spec`, hint: `did you mean "tasks"?`},
	{name: "unknown top-level key lists valid", src: header + "zzzzzz: 1\ntasks: {a: {capability: core, action: echo}}\n",
		line: 3, col: 1, field: "zzzzzz", msg: `unknown key "zzzzzz"`, hint: "valid keys: defaults, description, inputs, name, outputs, tasks, trigger, version"},
	{name: "missing name", src: "version: 1\ntasks: {a: {capability: core, action: echo}}\n",
		line: 1, col: 1, field: "name", msg: `missing required field "name"`},
	{name: "bad name", src: "name: Demo_Flow!\nversion: 1\ntasks: {a: {capability: core, action: echo}}\n",
		line: 1, col: 7, field: "name", msg: `invalid workflow name "Demo_Flow!"`, hint: "lowercase"},
	{name: "name not a string", src: "name: 42\nversion: 1\ntasks: {a: {capability: core, action: echo}}\n",
		line: 1, col: 7, field: "name", msg: "must be a string, not the number 42", hint: `quote it: "42"`},
	{name: "missing version", src: "name: demo\ntasks: {a: {capability: core, action: echo}}\n",
		line: 1, col: 1, field: "version", msg: `missing required field "version"`},
	{name: "version 0", src: "name: demo\nversion: 0\ntasks: {a: {capability: core, action: echo}}\n",
		line: 2, col: 10, field: "version", msg: "version must be between 1 and 4294967295, not 0"},
	{name: "version -1", src: "name: demo\nversion: -1\ntasks: {a: {capability: core, action: echo}}\n",
		line: 2, col: 10, field: "version", msg: "not -1"},
	{name: "version abc", src: "name: demo\nversion: abc\ntasks: {a: {capability: core, action: echo}}\n",
		line: 2, col: 10, field: "version", msg: `version must be a positive integer, not the string "abc"`},
	{name: "version 1.5", src: "name: demo\nversion: 1.5\ntasks: {a: {capability: core, action: echo}}\n",
		line: 2, col: 10, field: "version", msg: "not the number 1.5"},
	{name: "version too big", src: "name: demo\nversion: 4294967296\ntasks: {a: {capability: core, action: echo}}\n",
		line: 2, col: 10, field: "version", msg: "not 4294967296"},
	{name: "no tasks key", src: header,
		line: 1, col: 1, field: "tasks", msg: `missing required field "tasks"`},
	{name: "empty tasks", src: header + "tasks: {}\n",
		line: 3, col: 8, field: "tasks", msg: "workflow has no tasks"},
	{name: "tasks is a list", src: header + "tasks:\n  - a\n",
		line: 4, col: 3, field: "tasks", msg: "tasks must be a mapping (key: value), not a list"},

	// --- task names and keys
	{name: "task name with hyphen", src: header + "tasks:\n  fetch-page: {capability: core, action: echo}\n",
		line: 4, col: 3, task: "fetch-page", msg: `invalid task name "fetch-page"`, hint: `tasks.fetch-page.output, so use 1 to 63 characters: lowercase letters, digits and _, not starting with a digit, e.g. "fetch_page"`},
	{name: "task name reserved", src: header + "tasks:\n  in: {capability: core, action: echo}\n",
		line: 4, col: 3, task: "in", msg: `"in" is a reserved word`},
	{name: "duplicate task", src: header + "tasks:\n  a: {capability: core, action: echo}\n  b: {capability: core, action: echo}\n  a: {capability: core, action: exec}\n",
		line: 6, col: 3, field: "tasks.a", msg: `duplicate key "a" (first defined on line 4)`},
	{name: "unknown task key", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    neds: [b]\n",
		line: 7, col: 5, task: "a", field: "neds", msg: `unknown key "neds" in a task`, hint: `did you mean "needs"?`},
	{name: "task not a mapping", src: header + "tasks:\n  a: echo\n",
		line: 4, col: 6, task: "a", msg: `a task must be a mapping (key: value), not the string "echo"`},
	{name: "missing capability", src: header + "tasks:\n  a:\n    action: echo\n",
		line: 4, col: 3, task: "a", field: "capability", msg: `missing required field "capability"`, hint: "capability: net.scan"},
	{name: "bad capability", src: header + "tasks:\n  a: {capability: Net..Scan, action: echo}\n",
		line: 4, col: 19, task: "a", field: "capability", msg: `invalid capability "Net..Scan"`, hint: "net.scan"},
	{name: "missing action", src: header + "tasks:\n  a: {capability: core}\n",
		line: 4, col: 3, task: "a", field: "action", msg: `missing required field "action"`},
	{name: "bad action", src: header + "tasks:\n  a: {capability: core, action: Exec}\n",
		line: 4, col: 33, task: "a", field: "action", msg: `invalid action "Exec"`},

	// --- needs and the graph
	{name: "unknown need", src: header + "tasks:\n  discover: {capability: core, action: echo}\n  probe: {capability: core, action: echo, needs: [discover, discovr]}\n",
		line: 5, col: 61, task: "probe", field: "needs[1]", msg: `unknown task "discovr"`, hint: `did you mean "discover"?`},
	{name: "need as a single string", src: header + "tasks:\n  discover: {capability: core, action: echo}\n  probe: {capability: core, action: echo, needs: discovr}\n",
		line: 5, col: 50, task: "probe", field: "needs", msg: `unknown task "discovr"`},
	{name: "self need", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    needs: [a]\n",
		line: 7, col: 13, task: "a", field: "needs[0]", msg: "a task cannot need itself"},
	{name: "cycle", src: header + "tasks:\n  a: {capability: core, action: echo, needs: [c]}\n  b: {capability: core, action: echo, needs: [a]}\n  c: {capability: core, action: echo, needs: [b]}\n",
		line: 5, col: 47, task: "b", field: "needs[0]", msg: "cycle: b -> a -> c -> b", hint: "remove"},
	{name: "needs not a list", src: header + "tasks:\n  a: {capability: core, action: echo, needs: {b: 1}}\n",
		line: 4, col: 46, task: "a", field: "needs", msg: "needs must be a task name or a list of task names"},

	// --- expressions
	{name: "CEL syntax error", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {x: \"${{ 1 + }}\"}\n",
		line: 7, col: 24, task: "a", field: "with.x", msg: "syntax error"},
	{name: "CEL type error", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with:\n      x: ${{ 1 + 'a' }}\n",
		line: 8, col: 16, task: "a", field: "with.x", msg: "type error: found no matching overload for '_+_'"},
	{name: "non-upstream task", src: header + "tasks:\n  a: {capability: core, action: echo}\n  b:\n    capability: core\n    action: echo\n    with: {x: \"v=${{ tasks.a.output }}\"}\n",
		line: 8, col: 22, task: "b", field: "with.x", msg: `task "a" is not upstream of "b"`, hint: `add "a" to needs`},
	{name: "transitive upstream is fine but unknown task is not", src: header + "tasks:\n  a: {capability: core, action: echo}\n  b: {capability: core, action: echo, needs: [a]}\n  c:\n    capability: core\n    action: echo\n    needs: [b]\n    with: ${{ [tasks.a.output, tasks.zz.output] }}\n",
		line: 10, col: 32, task: "c", field: "with", msg: `unknown task "zz"`, hint: "valid tasks: a, b, c"},
	{name: "own output", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ tasks.a.output }}\n",
		line: 7, col: 15, task: "a", field: "with", msg: "a task cannot read its own output"},
	{name: "unknown input", src: header + "inputs:\n  target: {type: string}\ntasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ inputs.targets }}\n",
		line: 9, col: 15, task: "a", field: "with", msg: `unknown input "targets"`, hint: `did you mean "target"?`},
	{name: "unknown input no inputs", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ inputs.url }}\n",
		line: 7, col: 15, task: "a", field: "with", msg: `unknown input "url"`, hint: "declare it under inputs:"},
	{name: "item outside spread", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {x: \"${{ item }}\"}\n",
		line: 7, col: 20, task: "a", field: "with.x", msg: `"item" is only defined inside the with or accept of a task that has spread`},
	{name: "index in when", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    spread: ${{ [1, 2] }}\n    when: ${{ index > 0 }}\n",
		line: 8, col: 15, task: "a", field: "when", msg: `"index" is only defined`},
	{name: "tasks.x.result", src: header + "tasks:\n  x: {capability: core, action: echo}\n  y:\n    needs: [x]\n    capability: core\n    action: echo\n    with: ${{ tasks.x.result }}\n",
		line: 9, col: 22, task: "y", field: "with", msg: `tasks.x has no field "result"`, hint: "use tasks.x.output"},
	{name: "unterminated expression", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {url: \"http://${{ item /health\"}\n",
		line: 7, col: 25, task: "a", field: "with.url", msg: "unterminated ${{", hint: "close the expression with }}"},
	{name: "empty expression", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ }}\n",
		line: 7, col: 11, task: "a", field: "with", msg: "empty expression"},
	{name: "undeclared name", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ foo + 1 }}\n",
		line: 7, col: 15, task: "a", field: "with", msg: "undeclared reference to 'foo'", hint: "inputs.<name>"},
	{name: "expression too costly", src: header + "inputs: {l: {type: list}}\ntasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ inputs.l.map(x, inputs.l.map(y, inputs.l.map(z, x + y + z))) }}\n",
		line: 8, col: 11, task: "a", field: "with", msg: "expression may cost", hint: "avoid nested iteration"},
	{name: "expression in block scalar falls back to the node", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: |\n      ${{ 1 + }}\n",
		line: 7, col: 11, task: "a", field: "with", msg: "syntax error"},
	{name: "expression in key", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {\"${{ item }}\": 1}\n",
		line: 7, col: 12, task: "a", field: "with.${{ item }}", msg: "expressions are not allowed in keys"},

	// --- spread and when
	{name: "spread not an expression", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    spread: [1, 2, 3]\n",
		line: 7, col: 13, task: "a", field: "spread", msg: "must be a single ${{ expression }} of type list, not a list", hint: "spread: ${{"},
	{name: "spread with text", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    spread: \"x ${{ [1] }}\"\n",
		line: 7, col: 13, task: "a", field: "spread", msg: "must be a single ${{ expression }} of type list, not text"},
	{name: "spread of a map", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    spread: \"${{ {'a': 1} }}\"\n",
		line: 7, col: 14, task: "a", field: "spread", msg: "but this expression has type map(string, int)"},
	{name: "when not bool", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    when: ${{ 1 + 2 }}\n",
		line: 7, col: 11, task: "a", field: "when", msg: "must be a single ${{ expression }} of type bool, but this expression has type int"},
	{name: "when a string", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    when: yes\n",
		line: 7, col: 11, task: "a", field: "when", msg: "not text"},

	// --- accept
	{name: "accept not an expression", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: true\n",
		line: 7, col: 13, task: "a", field: "accept", msg: "must be a single ${{ expression }} of type bool, not the boolean true", hint: "accept: ${{ output.score >= 0.8 }}"},
	{name: "accept as text", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: \"ok ${{ output.ok }}\"\n",
		line: 7, col: 13, task: "a", field: "accept", msg: "of type bool, not text", hint: "accept: ${{"},
	{name: "accept without output", src: header + "inputs: {min: {type: number}}\ntasks:\n  a:\n    capability: core\n    action: echo\n    accept: ${{ inputs.min > 0.5 }}\n",
		line: 8, col: 13, task: "a", field: "accept", msg: "accept must read output, the attempt's output; this expression does not", hint: "accept: ${{ output.score >= 0.8 }}"},
	{name: "accept not bool", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: ${{ size(output) + 1 }}\n",
		line: 7, col: 13, task: "a", field: "accept", msg: "of type bool, but this expression has type int"},
	{name: "accept type error", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: ${{ output.score >= 'high' && 1 }}\n",
		line: 7, col: 43, task: "a", field: "accept", msg: "type error: expected type 'bool' but found 'int'"},
	{name: "accept syntax error", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: ${{ output.score >= }}\n",
		line: 7, col: 33, task: "a", field: "accept", msg: "syntax error"},
	{name: "accept reads a task not upstream", src: header + "tasks:\n  a: {capability: core, action: echo}\n  b:\n    capability: core\n    action: echo\n    accept: ${{ output == tasks.a.output }}\n",
		line: 8, col: 27, task: "b", field: "accept", msg: `task "a" is not upstream of "b"`, hint: `add "a" to needs`},
	{name: "item in accept without spread", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    accept: ${{ output == item }}\n",
		line: 7, col: 27, task: "a", field: "accept", msg: `"item" is only defined inside the with or accept of a task that has spread`, hint: "add spread:"},
	{name: "output in with", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {x: \"${{ output }}\"}\n",
		line: 7, col: 20, task: "a", field: "with.x", msg: `"output" is only defined inside accept`, hint: "tasks.<name>.output"},
	{name: "output in a workflow output", src: header + "tasks: {a: {capability: core, action: echo}}\noutputs:\n  r: ${{ output }}\n",
		line: 5, col: 10, field: "outputs.r", msg: `"output" is only defined inside accept`, hint: "read a task's result as tasks.<name>.output"},

	// --- policies
	{name: "bad duration", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    timeout: 5 minutes\n",
		line: 7, col: 14, task: "a", field: "timeout", msg: `invalid duration "5 minutes"`, hint: "30s"},
	{name: "duration without unit", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    timeout: 30\n",
		line: 7, col: 14, task: "a", field: "timeout", msg: "must be a duration, not the number 30", hint: "with a unit"},
	{name: "zero duration", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    timeout: 0s\n",
		line: 7, col: 14, task: "a", field: "timeout", msg: `duration "0s" is not positive`},
	{name: "zero backoff in defaults", src: header + "defaults:\n  retry: {backoff: {initial: 0s}}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 30, field: "defaults.retry.backoff.initial", msg: "not positive"},
	{name: "bad on_failure", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    on_failure: skp\n",
		line: 7, col: 17, task: "a", field: "on_failure", msg: `unknown failure policy "skp"`, hint: `did you mean "skip"?`},
	{name: "bad on_failure far off", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    on_failure: ignore\n",
		line: 7, col: 17, task: "a", field: "on_failure", msg: `unknown failure policy "ignore"`, hint: "use retry, skip or abort"},
	{name: "verify 4", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    verify: 4\n",
		line: 7, col: 13, task: "a", field: "verify", msg: "verify must be between 1 and 3, not 4", hint: "compares their outputs"},
	{name: "verify as a word", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    verify: twice\n",
		line: 7, col: 13, task: "a", field: "verify", msg: "verify must be a whole number", hint: "verify: 2"},
	// --- loop
	{name: "loop until without max", src: loopBase + "    loop:\n      until: ${{ output.done }}\n",
		line: 8, col: 5, task: "p", field: "loop.max", msg: "loop.until needs max", hint: "max: 30"},
	{name: "loop with until and over", src: loopBase + "    needs: list\n    loop:\n      until: ${{ output.done }}\n      over: ${{ tasks.list.output }}\n      max: 3\n",
		line: 11, col: 7, task: "p", field: "loop.over", msg: "loop has both until and over"},
	{name: "loop with neither", src: loopBase + "    loop: {max: 3}\n",
		line: 8, col: 5, task: "p", field: "loop", msg: "loop needs until or over", hint: "loop: {until:"},
	{name: "loop not a mapping", src: loopBase + "    loop: 3\n",
		line: 8, col: 11, task: "p", field: "loop", msg: "loop must be a mapping, not the number 3"},
	{name: "loop max over the limit", src: loopBase + "    loop:\n      until: ${{ output.done }}\n      max: 1000000\n",
		line: 10, col: 12, task: "p", field: "loop.max", msg: "loop.max must be between 1 and 10000, not 1000000", hint: "loop-max limit"},
	{name: "loop max over a lowered limit", src: loopBase + "    loop:\n      until: ${{ output.done }}\n      max: 6\n",
		limits: spec.Limits{MaxLoop: 5},
		line:   10, col: 12, task: "p", field: "loop.max", msg: "loop.max must be between 1 and 5, not 6"},
	{name: "loop max 0", src: loopBase + "    loop:\n      until: ${{ output.done }}\n      max: 0\n",
		line: 10, col: 12, task: "p", field: "loop.max", msg: "loop.max must be between 1 and 10000, not 0"},
	{name: "loop max a string", src: loopBase + "    loop:\n      until: ${{ output.done }}\n      max: many\n",
		line: 10, col: 12, task: "p", field: "loop.max", msg: "loop.max must be a whole number, not the string \"many\""},
	{name: "loop until never reads output", src: loopBase + "    loop:\n      until: ${{ iteration > 3 }}\n      max: 10\n",
		line: 9, col: 14, task: "p", field: "loop.until", msg: "until never reads output: it would be true or false for every iteration", hint: "until: ${{"},
	{name: "loop until not a bool", src: loopBase + "    loop:\n      until: ${{ size(output) }}\n      max: 10\n",
		line: 9, col: 14, task: "p", field: "loop.until", msg: "of type bool, but this expression has type int"},
	{name: "loop until text", src: loopBase + "    loop:\n      until: done\n      max: 10\n",
		line: 9, col: 14, task: "p", field: "loop.until", msg: "of type bool, not text"},
	{name: "loop until reads item", src: loopBase + "    loop:\n      until: ${{ output == item }}\n      max: 10\n",
		line: 9, col: 28, task: "p", field: "loop.until", msg: `"item" is not defined in a loop's loop.until`},
	{name: "loop over not a list", src: loopBase + "    loop: {over: '${{ 3 }}'}\n",
		line: 8, col: 19, task: "p", field: "loop.over", msg: "of type list, but this expression has type int"},
	{name: "loop over reads item", src: loopBase + "    needs: list\n    loop: {over: '${{ tasks.list.output[item] }}'}\n",
		line: 9, task: "p", field: "loop.over", msg: `"item" is only defined inside`},
	{name: "loop every negative", src: loopBase + "    loop: {over: '${{ [1] }}', every: -1s}\n",
		line: 8, col: 39, task: "p", field: "loop.every", msg: `duration "-1s" is negative`},
	{name: "loop every not a duration", src: loopBase + "    loop: {over: '${{ [1] }}', every: soon}\n",
		line: 8, col: 39, task: "p", field: "loop.every", msg: `invalid duration "soon"`, hint: "10s"},
	{name: "loop misspelt until", src: loopBase + "    loop: {untl: '${{ output }}', max: 2}\n",
		line: 8, col: 12, task: "p", field: "loop.untl", msg: `unknown key "untl" in loop`, hint: `did you mean "until"?`},
	{name: "loop and spread", src: loopBase + "    needs: list\n    spread: ${{ tasks.list.output }}\n    loop: {over: '${{ [1, 2] }}'}\n",
		line: 10, col: 5, task: "p", field: "loop", msg: "a task cannot have both loop and spread", hint: "loop: {over: ...}"},
	// --- on: every_node (task p on lines 5-7, cases append line 8 on)
	{name: "on unknown", src: loopBase + "    on: some_nodes\n",
		line: 8, col: 9, task: "p", field: "on", msg: `unknown on the string "some_nodes" (only every_node exists)`, hint: "on: every_node"},
	{name: "on not a string", src: loopBase + "    on: [a]\n",
		line: 8, col: 9, task: "p", field: "on", msg: "unknown on a list"},
	{name: "on with spread", src: loopBase + "    needs: list\n    spread: ${{ tasks.list.output }}\n    on: every_node\n",
		line: 10, col: 5, task: "p", field: "on", msg: "a task cannot have both on: every_node and spread"},
	{name: "on with loop", src: loopBase + "    loop: {over: '${{ [1, 2] }}'}\n    on: every_node\n",
		line: 9, col: 5, task: "p", field: "on", msg: "a task cannot have both on: every_node and loop"},
	{name: "on with verify", src: loopBase + "    verify: 2\n    on: every_node\n",
		line: 9, col: 5, task: "p", field: "on", msg: "a task cannot have both on: every_node and verify", hint: "pinned"},
	// --- workflow: a child workflow (task c on line 4)
	{name: "workflow empty", src: header + "tasks:\n  c: {workflow: ''}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `invalid workflow "": the name "" is not a workflow name`, hint: "workflow: NAME@VERSION"},
	{name: "workflow version not a number", src: header + "tasks:\n  c: {workflow: a@x}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `invalid workflow "a@x": the version "x" is not a positive whole number`, hint: "scan-host@2"},
	{name: "workflow version zero", src: header + "tasks:\n  c: {workflow: a@0}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `the version "0" is not a positive whole number`},
	{name: "workflow version empty", src: header + "tasks:\n  c: {workflow: a@}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `the version "" is not a positive whole number`},
	{name: "workflow version with a sign", src: header + "tasks:\n  c: {workflow: a@+2}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `the version "+2" is not a positive whole number`},
	{name: "workflow bad name", src: header + "tasks:\n  c: {workflow: Scan_Host@2}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: `the name "Scan_Host" is not a workflow name`, hint: "lowercase"},
	{name: "workflow not a string", src: header + "tasks:\n  c: {workflow: 2}\n",
		line: 4, col: 17, task: "c", field: "workflow", msg: "must be a string, not the number 2"},
	{name: "workflow with capability", src: header + "tasks:\n  c: {workflow: scan-host@2, capability: core}\n",
		line: 4, col: 30, task: "c", field: "capability", msg: "a task cannot have both workflow and capability", hint: "remove capability"},
	{name: "workflow with action", src: header + "tasks:\n  c: {action: echo, workflow: scan-host}\n",
		line: 4, col: 7, task: "c", field: "action", msg: "a task cannot have both workflow and action", hint: "remove action"},
	{name: "workflow with verify", src: header + "tasks:\n  c: {workflow: scan-host, verify: 2}\n",
		line: 4, col: 28, task: "c", field: "verify", msg: "a task cannot have both workflow and verify"},
	{name: "workflow with on", src: header + "tasks:\n  c: {workflow: scan-host, on: every_node}\n",
		line: 4, col: 28, task: "c", field: "on", msg: "a task cannot have both workflow and on"},
	{name: "neither action nor workflow", src: header + "tasks:\n  c: {with: {}}\n",
		line: 4, col: 3, task: "c", field: "capability", msg: `missing required field "capability"`, hint: "workflow: NAME@VERSION"},
	{name: "item outside a spread or every_node", src: loopBase + "    with: {n: '${{ item }}'}\n",
		line: 8, col: 20, task: "p", field: "with.n"},
	{name: "iteration outside a loop", src: loopBase + "    with: {n: '${{ iteration }}'}\n",
		line: 8, col: 20, task: "p", field: "with.n", msg: `"iteration" is only defined inside the with, accept or loop.until of a task that has loop`},
	{name: "previous outside a loop", src: loopBase + "    with: {n: '${{ previous }}'}\n",
		line: 8, col: 20, task: "p", field: "with.n", msg: `"previous" is only defined inside`},
	{name: "item in a loop until's with", src: loopBase + "    loop: {until: '${{ output }}', max: 2}\n    with: {n: '${{ item }}'}\n",
		line: 9, col: 20, task: "p", field: "with.n", msg: `"item" is not defined in a loop's with`, hint: "this loop has no list"},
	{name: "index in a loop's with", src: loopBase + "    loop: {over: '${{ [1] }}'}\n    with: {n: '${{ index }}'}\n",
		line: 9, col: 20, task: "p", field: "with.n", msg: `"index" is not defined in a loop's with`, hint: "iteration"},
	{name: "output in a loop's with", src: loopBase + "    loop: {until: '${{ output }}', max: 2}\n    with: {n: '${{ output }}'}\n",
		line: 9, col: 20, task: "p", field: "with.n", msg: `"output" is only defined inside accept and loop.until`},
	{name: "iteration in a loop's when", src: loopBase + "    loop: {until: '${{ output }}', max: 2}\n    when: '${{ iteration == 0 }}'\n",
		line: 9, task: "p", field: "when", msg: `"iteration" is only defined inside`},

	// --- join
	{name: "join min larger than needs", src: joinBase + "    join: {min: 3}\n",
		line: 10, col: 17, task: "j", field: "join.min", msg: "join.min is 3, but the task has only 2 needs", hint: "use a min from 1 to 2"},
	{name: "join min 0", src: joinBase + "    join: {min: 0}\n",
		line: 10, col: 17, task: "j", field: "join.min", msg: "join.min must be at least 1, not 0", hint: "a whole number from 1"},
	{name: "join min negative", src: joinBase + "    join: {min: -1}\n",
		line: 10, col: 17, task: "j", field: "join.min", msg: "join.min must be at least 1, not -1"},
	{name: "join min a string", src: joinBase + "    join: {min: two}\n",
		line: 10, col: 17, task: "j", field: "join.min", msg: "join.min must be a whole number, not the string \"two\""},
	{name: "join min missing", src: joinBase + "    join: {cancel_rest: true}\n",
		line: 10, col: 5, task: "j", field: "join.min", msg: `missing required field "min"`, hint: "join: {min: 2}"},
	{name: "join not a mapping", src: joinBase + "    join: 2\n",
		line: 10, col: 11, task: "j", field: "join", msg: "join must be a mapping, not the number 2", hint: "join: {min: 2}"},
	{name: "join unknown key", src: joinBase + "    join: {min: 1, cancel: true}\n",
		line: 10, col: 20, task: "j", field: "join.cancel", msg: `unknown key "cancel" in join`},
	{name: "join misspelt min", src: joinBase + "    join: {mni: 1}\n",
		line: 10, col: 12, task: "j", field: "join.mni", msg: `unknown key "mni" in join`, hint: `did you mean "min"?`},
	{name: "join cancel_rest not a bool", src: joinBase + "    join: {min: 1, cancel_rest: yes please}\n",
		line: 10, col: 33, task: "j", field: "join.cancel_rest", msg: "join.cancel_rest must be true or false, not the string \"yes please\"", hint: "cancel_rest: true"},
	{name: "join without needs", src: header + "tasks:\n  j:\n    capability: core\n    action: echo\n    join: {min: 1}\n",
		line: 7, col: 5, task: "j", field: "join", msg: "join without needs", hint: "add needs"},
	{name: "join min counts needs once", src: joinBase[:len(joinBase)-len("[a, b]\n")] + "[a, a]\n    join: {min: 2}\n",
		line: 10, col: 17, task: "j", field: "join.min", msg: "join.min is 2, but the task has only 1 need"},
	{name: "max_attempts 0", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    retry: {max_attempts: 0}\n",
		line: 7, col: 27, task: "a", field: "retry.max_attempts", msg: "max_attempts must be between 1 and 100, not 0", hint: "1 means no retry"},
	{name: "max_attempts 101", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    retry: {max_attempts: 101}\n",
		line: 7, col: 27, task: "a", field: "retry.max_attempts", msg: "not 101"},
	{name: "factor below 1", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    retry: {backoff: {factor: 0.5}}\n",
		line: 7, col: 31, task: "a", field: "retry.backoff.factor", msg: "must be between 1 and 1000, not 0.5"},
	{name: "jitter above 1", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    retry: {backoff: {jitter: 1.5}}\n",
		line: 7, col: 31, task: "a", field: "retry.backoff.jitter", msg: "must be between 0 and 1, not 1.5"},
	{name: "unknown backoff key", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    retry: {backoff: {initl: 1s}}\n",
		line: 7, col: 23, task: "a", field: "retry.backoff.initl", msg: `unknown key "initl" in backoff`, hint: `did you mean "initial"?`},
	{name: "abort with retry", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    on_failure: abort\n    retry: {max_attempts: 3}\n",
		line: 8, col: 5, task: "a", field: "retry", msg: "on_failure: abort never retries", hint: "use on_failure: retry"},

	// --- inputs
	{name: "unknown input type", src: header + "inputs:\n  n: {type: integer}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 13, field: "inputs.n.type", msg: `unknown type "integer"`, hint: `did you mean "int"?`},
	{name: "input type synonym", src: header + "inputs:\n  n: {type: array}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 13, field: "inputs.n.type", msg: `unknown type "array"`, hint: `did you mean "list"?`},
	{name: "default not matching type", src: header + "inputs:\n  n: {type: int, default: \"5\"}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 27, field: "inputs.n.default", msg: "default is string but the input type is int"},
	{name: "default float for int", src: header + "inputs:\n  n: {type: int, default: 1.5}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 27, field: "inputs.n.default", msg: "default is number but the input type is int"},
	{name: "required with default", src: header + "inputs:\n  n: {type: int, default: 5, required: true}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 40, field: "inputs.n.required", msg: "an input with a default is never required"},
	{name: "bad input name", src: header + "inputs:\n  target-host: {type: string}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 3, field: "inputs.target-host", msg: `invalid input name "target-host"`, hint: `"target_host"`},
	{name: "unknown input key", src: header + "inputs:\n  n: {typ: int}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 7, field: "inputs.n.typ", msg: `unknown key "typ"`, hint: `did you mean "type"?`},
	{name: "NaN default", src: header + "inputs:\n  n: {default: .nan}\ntasks: {a: {capability: core, action: echo}}\n",
		line: 4, col: 16, field: "inputs.n.default", msg: "number .nan cannot be used"},

	// --- outputs
	{name: "output unknown task", src: header + "tasks:\n  a: {capability: core, action: echo}\noutputs:\n  r: ${{ tasks.b.output }}\n",
		line: 6, col: 10, field: "outputs.r", msg: `unknown task "b"`},
	{name: "output unknown task did you mean", src: header + "tasks:\n  summarize: {capability: core, action: echo}\noutputs:\n  r: \"${{ tasks.sumarize.output }}\"\n",
		line: 6, col: 11, field: "outputs.r", msg: `unknown task "sumarize"`, hint: `did you mean "summarize"?`},
	{name: "output with item", src: header + "tasks:\n  a: {capability: core, action: echo}\noutputs:\n  r: ${{ item }}\n",
		line: 6, col: 10, field: "outputs.r", msg: `"item" is only defined`},

	// --- limits
	{name: "spec too large", src: header + "description: " + strings.Repeat("x", 200) + "\ntasks: {a: {capability: core, action: echo}}\n",
		limits: spec.Limits{MaxSpecBytes: 100}, line: 0, msg: "spec is 281 bytes, the limit is 100"},
	{name: "too many tasks", src: header + "tasks:\n  a: {capability: core, action: echo}\n  b: {capability: core, action: echo}\n  c: {capability: core, action: echo}\n",
		limits: spec.Limits{MaxTasks: 2}, line: 4, col: 3, field: "tasks", msg: "workflow has 3 tasks, the limit is 2"},
	{name: "too deep", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: {a: {b: {c: {d: 1}}}}\n",
		limits: spec.Limits{MaxDepth: 3}, line: 7, col: 23, task: "a", field: "with.a.b.c", msg: "value is nested more than 3 levels deep"},
	{name: "too long expression", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: ${{ 1 + 1 + 1 + 1 }}\n",
		limits: spec.Limits{Expr: exprLimits(8)}, line: 7, col: 11, task: "a", field: "with", msg: "bytes long, the limit is 8"},
	{name: "alias bomb", src: aliasBomb, line: 8, col: 30, msg: "spec is too large: more than 200000 YAML nodes"},
	// The issue-8 reproduction: one 900 KB string aliased 300 times expands
	// to 270 MB from a spec under the 1 MiB source limit.
	{name: "aliases of a large string", src: stringAliasBomb(900_000, 300), line: 9, col: 20, msg: "spec is too large: its values add up to more than 4194304 bytes once aliases are expanded",
		hint: "do not repeat aliases"},
	{name: "too many expressions", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with: [\"${{ 1 }}\", \"${{ 2 }}\", \"${{ 3 }}\"]\n",
		limits: spec.Limits{MaxExpressions: 2}, line: 7, col: 37, task: "a", field: "with[2]", msg: "spec has more than 2 expressions, the limit"},
	{name: "compiled IR too large", src: header + "tasks:\n  a: {capability: core, action: echo, with: {s: " + strings.Repeat("x", 2000) + "}}\n",
		limits: spec.Limits{MaxIRBytes: 1000}, line: 0, msg: "the compiled workflow is 2064 bytes, the limit is 1000"},
	{name: "invalid constant regex", src: header + "tasks:\n  a:\n    capability: core\n    action: echo\n    when: ${{ \"abc\".matches(\"(\") }}\n",
		line: 7, col: 29, task: "a", field: "when", msg: "invalid regular expression: missing closing ): `(`", hint: "RE2"},

	// --- wait (task w on lines 4-6, cases append line 7 on)
	{name: "wait not a mapping", src: waitBase + "    wait: approve\n",
		line: 7, col: 11, task: "w", field: "wait", msg: `wait must be a mapping, not the string "approve"`, hint: "wait: {signal: approve, timeout: 48h}"},
	{name: "wait empty", src: waitBase + "    wait: {}\n",
		line: 7, col: 5, task: "w", field: "wait", msg: "wait needs signal, for or until", hint: "wait: {for: 10m}"},
	{name: "wait signal and for", src: waitBase + "    wait: {signal: a, for: 1m}\n",
		line: 7, col: 23, task: "w", field: "wait.for", msg: "wait has both signal and for; a wait has one of signal, for and until"},
	{name: "wait for and until", src: waitBase + "    wait: {for: 1m, until: 2030-01-01T00:00:00Z}\n",
		line: 7, col: 21, task: "w", field: "wait.until", msg: "wait has both for and until"},
	{name: "wait timeout without signal", src: waitBase + "    wait: {for: 1m, timeout: 1h}\n",
		line: 7, col: 21, task: "w", field: "wait.timeout", msg: "wait.timeout goes with signal only", hint: "ends by itself"},
	{name: "wait bad signal name", src: waitBase + "    wait: {signal: Approve!}\n",
		line: 7, col: 20, task: "w", field: "wait.signal", msg: `invalid signal name "Approve!"`, hint: "lowercase letters, digits, '.', '_' and '-'"},
	{name: "wait signal name too long", src: waitBase + "    wait: {signal: " + strings.Repeat("s", 129) + "}\n",
		line: 7, col: 20, task: "w", field: "wait.signal", msg: "invalid signal name", hint: "1 to 128 characters"},
	{name: "wait signal not a string", src: waitBase + "    wait: {signal: 3}\n",
		line: 7, col: 20, task: "w", field: "wait.signal", msg: "must be a string, not the number 3", hint: `quote it`},
	{name: "wait for zero", src: waitBase + "    wait: {for: 0s}\n",
		line: 7, col: 17, task: "w", field: "wait.for", msg: `duration "0s" is not positive`},
	{name: "wait for not a duration", src: waitBase + "    wait: {for: soon}\n",
		line: 7, col: 17, task: "w", field: "wait.for", msg: `invalid duration "soon"`, hint: "30s"},
	{name: "wait timeout negative", src: waitBase + "    wait: {signal: a, timeout: -1h}\n",
		line: 7, col: 32, task: "w", field: "wait.timeout", msg: `duration "-1h" is not positive`},
	{name: "wait misspelt key", src: waitBase + "    wait: {signal: a, timout: 1h}\n",
		line: 7, col: 23, task: "w", field: "wait.timout", msg: `unknown key "timout" in wait`, hint: `did you mean "timeout"?`},
	{name: "wait until not a time", src: waitBase + "    wait: {until: tomorrow}\n",
		line: 7, col: 19, task: "w", field: "wait.until", msg: `invalid time "tomorrow": not an RFC 3339 time`, hint: "until: 2026-03-01T09:00:00Z"},
	{name: "wait until date only", src: waitBase + "    wait: {until: 2030-01-01}\n",
		line: 7, col: 19, task: "w", field: "wait.until", msg: `invalid time "2030-01-01"`},
	{name: "wait until a number", src: waitBase + "    wait: {until: 5}\n",
		line: 7, col: 19, task: "w", field: "wait.until", msg: "wait.until must be a time or an expression, not the number 5"},
	{name: "wait until an int expression", src: waitBase + "    wait: {until: '${{ 5 }}'}\n",
		line: 7, task: "w", field: "wait.until", msg: "must be a single ${{ expression }} of type string, but this expression has type int"},
	{name: "wait until text around an expression", src: waitBase + "    wait: {until: 'at ${{ \"x\" }}'}\n",
		line: 7, col: 19, task: "w", field: "wait.until", msg: "of type string, not text"},
	{name: "wait until reads an undeclared input", src: waitBase + "    wait: {until: '${{ inputs.at }}'}\n",
		line: 7, task: "w", field: "wait.until", msg: `unknown input "at"`},
	{name: "wait until reads a task not upstream", src: waitBase + "    wait: {until: '${{ tasks.other.output }}'}\n  other: {capability: core, action: echo}\n",
		line: 7, task: "w", field: "wait.until", msg: `task "other" is not upstream of "w"`},
	{name: "wait and capability", src: waitBase + "    capability: core\n    wait: {for: 1m}\n",
		line: 7, col: 5, task: "w", field: "capability", msg: "a task cannot have both wait and capability: a wait task runs nothing"},
	{name: "wait and action", src: waitBase + "    wait: {for: 1m}\n    action: echo\n",
		line: 8, col: 5, task: "w", field: "action", msg: "a task cannot have both wait and action"},
	{name: "wait and workflow", src: waitBase + "    wait: {for: 1m}\n    workflow: child\n",
		line: 8, col: 5, task: "w", field: "workflow", msg: "a task cannot have both wait and workflow", hint: "two tasks"},
	{name: "wait and with", src: waitBase + "    wait: {for: 1m}\n    with: {a: 1}\n",
		line: 8, col: 5, task: "w", field: "with", msg: "a task cannot have both wait and with", hint: "payload is its output"},
	{name: "wait and verify", src: waitBase + "    wait: {for: 1m}\n    verify: 2\n",
		line: 8, col: 5, task: "w", field: "verify", msg: "a task cannot have both wait and verify"},
	{name: "wait and spread", src: waitBase + "    wait: {for: 1m}\n    spread: ${{ [1] }}\n",
		line: 8, col: 5, task: "w", field: "spread", msg: "a task cannot have both wait and spread"},
	{name: "wait and loop", src: waitBase + "    wait: {for: 1m}\n    loop: {over: '${{ [1] }}'}\n",
		line: 8, col: 5, task: "w", field: "loop", msg: "a task cannot have both wait and loop"},
	{name: "wait and on", src: waitBase + "    wait: {for: 1m}\n    on: every_node\n",
		line: 8, col: 5, task: "w", field: "on", msg: "a task cannot have both wait and on"},
	{name: "wait and accept", src: waitBase + "    wait: {signal: ok}\n    accept: ${{ output.ok }}\n",
		line: 8, col: 5, task: "w", field: "accept", msg: "a task cannot have both wait and accept"},
	{name: "wait signal and task timeout", src: waitBase + "    wait: {signal: approve}\n    timeout: 48h\n",
		line: 8, col: 5, task: "w", field: "timeout", msg: "a task cannot have both wait and timeout", hint: "put timeout inside wait: {signal: X, timeout: 48h}"},
	{name: "wait for and task timeout", src: waitBase + "    wait: {for: 1m}\n    timeout: 48h\n",
		line: 8, col: 5, task: "w", field: "timeout", msg: "a task cannot have both wait and timeout", hint: "ends by itself"},
	{name: "wait misspelt as a task key", src: waitBase + "    wiat: {for: 1m}\n",
		line: 7, col: 5, task: "w", field: "wiat", msg: `unknown key "wiat" in a task`, hint: `did you mean "wait"?`},

	// --- trigger (line 5 of trigBase on)
	{name: "trigger not a mapping", src: trigBase + "trigger: order.created\n",
		line: 5, col: 10, field: "trigger", msg: `trigger must be a mapping, not the string "order.created"`, hint: "trigger: {events: [order.created]}"},
	{name: "trigger without events", src: trigBase + "trigger: {}\n",
		line: 5, col: 1, field: "trigger.events", msg: `missing required field "events"`, hint: "trigger: {events:"},
	{name: "trigger misspelt events", src: trigBase + "trigger: {event: [a]}\n",
		line: 5, col: 11, field: "trigger.event", msg: `unknown key "event" in trigger`, hint: `did you mean "events"?`},
	{name: "trigger events empty", src: trigBase + "trigger: {events: []}\n",
		line: 5, col: 19, field: "trigger.events", msg: "trigger.events is empty"},
	{name: "trigger events a string", src: trigBase + "trigger: {events: order.created}\n",
		line: 5, col: 19, field: "trigger.events", msg: `trigger.events must be a list of event names, not the string "order.created"`},
	{name: "trigger bad event name", src: trigBase + "trigger: {events: [ok, Order!]}\n",
		line: 5, col: 24, field: "trigger.events[1]", msg: `invalid event name "Order!"`, hint: "lowercase letters"},
	{name: "trigger event not a string", src: trigBase + "trigger: {events: [1]}\n",
		line: 5, col: 20, field: "trigger.events[0]", msg: "must be a string, not the number 1"},
	{name: "trigger too many events", src: trigBase + "trigger: {events: [e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15, e16]}\n",
		line: 5, col: 19, field: "trigger.events", msg: "trigger.events has 17 events, the limit is 16"},
	{name: "trigger without the event input", src: header + "tasks: {a: {capability: core, action: echo}}\ntrigger: {events: [order.created]}\n",
		line: 4, col: 1, field: "trigger", msg: "a workflow with a trigger must declare an input named event", hint: "inputs: {event: {type: any}}"},
	{name: "trigger with another required input", src: header + "inputs: {event: {type: any}, host: {type: string}}\ntasks: {a: {capability: core, action: echo}}\ntrigger: {events: [order.created]}\n",
		line: 5, col: 1, field: "trigger", msg: `input "host" is required, but an instance started by an event gets only the event input`, hint: "default"},

	// --- JSON
	{name: "JSON syntax error", src: "{\n  \"name\": \"demo\",\n  \"version\": 1\n  \"tasks\": {}\n}\n",
		line: 4, col: 3, msg: "invalid JSON: invalid character '\"' after object key:value pair", hint: "comma"},
	{name: "JSON unknown key", src: "{\n  \"name\": \"demo\",\n  \"version\": 1,\n  \"tasks\": {\n    \"a\": {\"capability\": \"core\", \"action\": \"echo\", \"retyr\": {}}\n  }\n}\n",
		line: 5, col: 51, task: "a", field: "retyr", msg: `unknown key "retyr"`, hint: `did you mean "retry"?`},
}

// stringAliasBomb is a spec whose with holds one string of size bytes and a
// list of n aliases to it.
func stringAliasBomb(size, n int) string {
	return header + "tasks:\n  a:\n    capability: core\n    action: echo\n    with:\n      s: &s \"" + strings.Repeat("x", size) +
		"\"\n      l: [" + strings.TrimSuffix(strings.Repeat("*s,", n), ",") + "]\n"
}

// aliasBomb expands to 10^10 nodes if followed naively.
const aliasBomb = `name: demo
version: 1
tasks:
  a:
    capability: core
    action: echo
    with:
      x0: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
      x1: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
      x2: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
      x3: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
      x4: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
      x5: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
      x6: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
      x7: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
      x8: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
      x9: [*i, *i, *i, *i, *i, *i, *i, *i, *i, *i]
`

// Errors quote the spec (keys, names) and carry the file name the client
// chose: both are clipped, so the errors of a spec stay small however large
// what they quote.
func TestErrorsAreBounded(t *testing.T) {
	long := strings.Repeat("k", 100_000)
	var b strings.Builder
	b.WriteString(header + "tasks:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  t%d: {capability: core, action: echo, %s%d: 1}\n", i, long[:2000], i)
	}
	_, err := spec.Compile(strings.Repeat("f", 10<<20), []byte(b.String()), spec.Options{Limits: spec.Limits{MaxSpecBytes: 4 << 20}})
	list := spec.AsErrorList(err)
	if len(list) == 0 || len(list) > 51 {
		t.Fatalf("%d errors, want at most MaxErrors (50) and a final note", len(list))
	}
	if total := len(err.Error()); total > 200_000 {
		t.Fatalf("the errors are %d bytes", total)
	}
	for _, e := range list {
		if len(e.File) > 256 || len(e.Field) > 256 || len(e.Msg) > 1024 || len(e.Hint) > 1024 {
			t.Fatalf("unclipped error: file %d, field %d, msg %d, hint %d bytes", len(e.File), len(e.Field), len(e.Msg), len(e.Hint))
		}
	}
}

func TestInvalidSpecs(t *testing.T) {
	if len(invalidCases) < 30 {
		t.Fatalf("only %d invalid cases", len(invalidCases))
	}
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			wf, err := spec.Compile("flow.yaml", []byte(tc.src), spec.Options{Limits: tc.limits})
			if err == nil {
				t.Fatalf("compiled, want an error; IR:\n%v", wf)
			}
			var list spec.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			got := list[0]
			if got.File != "flow.yaml" || got.Line != tc.line || (tc.col != 0 && got.Column != tc.col) ||
				got.Task != tc.task || (tc.field != "" && got.Field != tc.field) ||
				!strings.Contains(got.Msg, tc.msg) || !strings.Contains(got.Hint, tc.hint) {
				t.Errorf("first error:\n got  %d:%d task=%q field=%q msg=%q hint=%q\n want %d:%d task=%q field=%q msg~%q hint~%q\nall errors:\n%v",
					got.Line, got.Column, got.Task, got.Field, got.Msg, got.Hint,
					tc.line, tc.col, tc.task, tc.field, tc.msg, tc.hint, err)
			}
			checkNoInternals(t, err)
		})
	}
}

// checkNoInternals fails when a message leaks Go or library internals.
func checkNoInternals(t *testing.T, err error) {
	t.Helper()
	for _, e := range spec.AsErrorList(err) {
		for _, bad := range []string{"yaml:", "panic", "runtime error", "*yaml.Node", "<nil>", "%!", "goroutine"} {
			if strings.Contains(e.Msg, bad) || strings.Contains(e.Hint, bad) {
				t.Errorf("error leaks %q: %v", bad, e)
			}
		}
	}
}
