package spec

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/value"
)

// compiler holds the state of one Compile call: the source (for positions),
// the limits, the problems found so far and the node budget.
type compiler struct {
	file   string
	src    []byte
	lines  []string // source split into lines, for expression columns
	limits Limits
	env    *expr.Env

	errs ErrorList
	// full is set once MaxErrors problems have been collected.
	full bool
	// nodes counts the YAML nodes visited and bytes the scalar bytes they
	// hold (aliases counting again every time they are used); stopped is
	// set when either passes its limit, after which every walk returns
	// early.
	nodes   int
	bytes   int
	stopped bool
	// exprs counts the expressions checked, against MaxExpressions.
	exprs int
}

func newCompiler(file string, src []byte, limits Limits, env *expr.Env) *compiler {
	return &compiler{file: clip(file, maxFileNameBytes), src: src, limits: limits, env: env}
}

// Bounds of the strings an Error carries. A spec (and its file name) comes
// from a client; what goes back in errors must not grow with it.
const (
	maxFileNameBytes = 256
	maxNameBytes     = 128  // Error.Task
	maxFieldBytes    = 256  // Error.Field
	maxMessageBytes  = 1024 // Error.Msg and Error.Hint, each
)

// clip is value.Clip.
func clip(s string, n int) string { return value.Clip(s, n) }

// where identifies the place a problem is reported at: a task (may be empty)
// and a field path inside it.
type where struct {
	task  string
	field string
}

// child returns the place of a sub-field: where{field: "retry"}.child("backoff")
// is "retry.backoff".
func (w where) child(name string) where {
	if w.field == "" {
		return where{task: w.task, field: name}
	}
	return where{task: w.task, field: w.field + "." + name}
}

// index returns the place of a list element: "needs" becomes "needs[2]".
func (w where) index(i int) where {
	return where{task: w.task, field: w.field + "[" + strconv.Itoa(i) + "]"}
}

// add records a problem unless MaxErrors problems have been recorded already.
func (c *compiler) add(e *Error) {
	if c.full {
		return
	}
	e.File = c.file
	if len(c.errs) >= c.limits.MaxErrors {
		c.full = true
		return
	}
	c.errs = append(c.errs, e.clipped())
}

// clipped bounds the strings of e, which may quote the spec.
func (e *Error) clipped() *Error {
	e.Task = clip(e.Task, maxNameBytes)
	e.Field = clip(e.Field, maxFieldBytes)
	e.Msg = clip(e.Msg, maxMessageBytes)
	e.Hint = clip(e.Hint, maxMessageBytes)
	return e
}

// errorf records a problem at node n (which may be nil for "no position").
func (c *compiler) errorf(n *yaml.Node, w where, hint, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	c.errorAt(line, col, w, hint, format, args...)
}

// errorAt records a problem at an explicit position.
func (c *compiler) errorAt(line, col int, w where, hint, format string, args ...any) {
	c.add(&Error{Line: line, Column: col, Task: w.task, Field: w.field, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// errorList returns the collected problems sorted by position, with a final
// note when some were dropped.
func (c *compiler) errorList() ErrorList {
	list := append(ErrorList(nil), c.errs...)
	list.sortByPosition()
	if c.full {
		list = append(list, &Error{File: c.file,
			Msg:  fmt.Sprintf("too many errors; stopped after %d", c.limits.MaxErrors),
			Hint: "fix these and compile again"})
	}
	return list
}

// visit charges one node, and the bytes of its value, to the budgets and
// reports whether the walk may go on. When a budget runs out it records the
// problem once, at node at (the alias that led to n, when there is one).
func (c *compiler) visit(n, at *yaml.Node) bool {
	if c.stopped {
		return false
	}
	c.nodes++
	c.bytes += len(n.Value)
	switch {
	case c.nodes > c.limits.MaxNodes:
		c.stop(at, fmt.Sprintf("spec is too large: more than %d YAML nodes (a node reached through an alias counts every time the alias is used)",
			c.limits.MaxNodes))
		return false
	case c.bytes > c.limits.MaxExpandedBytes:
		c.stop(at, fmt.Sprintf("spec is too large: its values add up to more than %d bytes once aliases are expanded (an alias counts the size of its target every time it is used)",
			c.limits.MaxExpandedBytes))
		return false
	}
	return true
}

// stop ends the walk at node n with a problem that explains why. It is
// recorded even past MaxErrors: without it the error list would not say
// why compiling stopped.
func (c *compiler) stop(n *yaml.Node, msg string) {
	c.stopped = true
	c.errs = append(c.errs, (&Error{File: c.file, Line: n.Line, Column: n.Column, Msg: msg,
		Hint: "make the spec smaller; do not repeat aliases (*name) of large values, pass large data as inputs"}).clipped())
}

// resolve follows aliases to the node they stand for, charging every node it
// passes through to the budget. It returns nil when the budget is exhausted.
func (c *compiler) resolve(n *yaml.Node) *yaml.Node {
	at := n
	for n != nil {
		if !c.visit(n, at) {
			return nil
		}
		if n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

// entry is one key/value pair of a YAML mapping.
type entry struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node // not yet resolved: may be an alias
}

// mapping returns the entries of a mapping node in source order. It rejects
// (and reports) non-mappings, non-scalar keys, merge keys and duplicate keys;
// duplicates after the first are dropped. what names the mapping in messages.
// ok is false when n is not a mapping.
func (c *compiler) mapping(n *yaml.Node, w where, what string) (entries []entry, ok bool) {
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, w, "", "%s must be a mapping (key: value), not %s", what, describe(n))
		return nil, false
	}
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := c.resolve(n.Content[i])
		if k == nil {
			return entries, true
		}
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, w, "write keys as plain strings", "%s has a key that is %s", what, describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			c.errorf(k, w, "write the keys out, or put settings shared by tasks under defaults:",
				"merge keys (<<) are not supported")
			continue
		}
		if prev, dup := first[k.Value]; dup {
			c.errorf(k, w.child(k.Value), "remove one of them",
				"duplicate key %q (first defined on line %d)", k.Value, prev.Line)
			continue
		}
		first[k.Value] = k
		entries = append(entries, entry{key: k.Value, keyN: k, value: n.Content[i+1]})
	}
	return entries, true
}

// checkKeys reports every entry whose key is not in allowed, suggesting the
// closest valid key. It returns the allowed entries by key. A misspelt key
// that has a suggestion is also returned under the suggested key, with no
// value, so that the user is told about the typo once and not also that the
// field it meant is missing.
func (c *compiler) checkKeys(entries []entry, allowed []string, w where, what string) map[string]entry {
	known := make(map[string]entry, len(entries))
	var misspelt []entry
	for _, e := range entries {
		if !contains(allowed, e.key) {
			c.errorf(e.keyN, w.child(e.key), didYouMean(e.key, allowed, nil, "keys"),
				"unknown key %q in %s", e.key, what)
			if s := suggest(e.key, allowed, nil); s != "" {
				misspelt = append(misspelt, entry{key: s, keyN: e.keyN})
			}
			continue
		}
		known[e.key] = e
	}
	for _, e := range misspelt {
		if _, ok := known[e.key]; !ok {
			known[e.key] = e
		}
	}
	return known
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// describe names the kind of a node for messages: "a list", "the number 3".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "empty (null)"
		case "!!bool":
			return "the boolean " + n.Value
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!str":
			return "the string " + strconv.Quote(truncate(n.Value, 40))
		}
		return "a value tagged " + n.Tag
	}
	return "an unexpected YAML node"
}

// truncate shortens s to at most n runes for messages.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

// isNull reports whether a resolved node is an empty value (`key:` or null).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// str reads a string scalar. Numbers and booleans are not silently turned into
// strings: the hint tells the user to quote them.
func (c *compiler) str(n *yaml.Node, w where) (string, bool) {
	n = c.resolve(n)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf("quote it: %q", n.Value)
		}
		c.errorf(n, w, hint, "must be a string, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// lineText returns source line number line (1-based) without its line break,
// or "" when out of range.
func (c *compiler) lineText(line int) string {
	if c.lines == nil {
		c.lines = strings.Split(string(c.src), "\n")
	}
	if line < 1 || line > len(c.lines) {
		return ""
	}
	return strings.TrimSuffix(c.lines[line-1], "\r")
}
