package spec

import (
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// tvalue is a template under construction. Constant subtrees stay Go values
// (constant is true) until a parent that holds an expression needs them as IR,
// so a whole constant tree is encoded once, as one literal.
type tvalue struct {
	constant bool
	lit      any                 // when constant
	ir       *robonetv1.Template // otherwise
}

// toIR returns the IR of a template value, folding a constant into
// literal_json.
func (c *compiler) toIR(v tvalue, n *yaml.Node, w where) *robonetv1.Template {
	if !v.constant {
		return v.ir
	}
	b, err := value.Encode(v.lit)
	if err != nil {
		c.errorf(n, w, "", "value cannot be stored: %s", err)
		return nil
	}
	return &robonetv1.Template{Kind: &robonetv1.Template_LiteralJson{LiteralJson: b}}
}

// template compiles the value of a `with` or an output. Strings may hold
// ${{ expressions }}, checked in scope sc. A null value gives a nil template
// (which evaluates to null).
func (c *compiler) template(n *yaml.Node, sc *scope) *robonetv1.Template {
	w := where{task: sc.task, field: sc.field}
	v, ok := c.tmpl(n, sc, w, 1)
	if !ok || (v.constant && v.lit == nil) {
		return nil
	}
	return c.toIR(v, n, w)
}

// tmpl compiles one node of a template; depth is the nesting level of n.
func (c *compiler) tmpl(n *yaml.Node, sc *scope, w where, depth int) (tvalue, bool) {
	n = c.resolve(n)
	if n == nil {
		return tvalue{}, false
	}
	if !c.checkDepth(n, w, depth) {
		return tvalue{}, false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!str" && strings.Contains(n.Value, "${{") {
			return c.stringTemplate(n, sc, w)
		}
		v, ok := c.scalarValue(n, w)
		return tvalue{constant: true, lit: v}, ok
	case yaml.SequenceNode:
		return c.listTemplate(n, sc, w, depth)
	case yaml.MappingNode:
		return c.mapTemplate(n, sc, w, depth)
	}
	c.errorf(n, w, "", "unexpected YAML content")
	return tvalue{}, false
}

func (c *compiler) listTemplate(n *yaml.Node, sc *scope, w where, depth int) (tvalue, bool) {
	items := make([]tvalue, len(n.Content))
	allOK, allConst := true, true
	for i, child := range n.Content {
		v, ok := c.tmpl(child, sc, w.index(i), depth+1)
		if c.stopped {
			return tvalue{}, false
		}
		items[i] = v
		allOK = allOK && ok
		allConst = allConst && v.constant
	}
	if !allOK {
		return tvalue{}, false
	}
	if allConst {
		lits := make([]any, len(items))
		for i, v := range items {
			lits[i] = v.lit
		}
		return tvalue{constant: true, lit: lits}, true
	}
	list := &robonetv1.TemplateList{}
	for i, v := range items {
		list.Items = append(list.Items, c.toIR(v, n.Content[i], w.index(i)))
	}
	return tvalue{ir: &robonetv1.Template{Kind: &robonetv1.Template_List{List: list}}}, true
}

func (c *compiler) mapTemplate(n *yaml.Node, sc *scope, w where, depth int) (tvalue, bool) {
	entries, _ := c.mapping(n, w, "a value")
	keys := make([]string, 0, len(entries))
	values := make(map[string]tvalue, len(entries))
	nodes := make(map[string]*yaml.Node, len(entries))
	allOK, allConst := true, true
	for _, e := range entries {
		cw := w.child(e.key)
		if strings.Contains(e.key, "${{") {
			c.errorf(e.keyN, cw, "compute the whole map in a task, or use a fixed key", "expressions are not allowed in keys")
			allOK = false
			continue
		}
		v, ok := c.tmpl(e.value, sc, cw, depth+1)
		if c.stopped {
			return tvalue{}, false
		}
		keys = append(keys, e.key)
		values[e.key], nodes[e.key] = v, e.value
		allOK = allOK && ok
		allConst = allConst && v.constant
	}
	if !allOK || len(entries) < (len(n.Content)/2) {
		return tvalue{}, false
	}
	if allConst {
		m := make(map[string]any, len(keys))
		for _, k := range keys {
			m[k] = values[k].lit
		}
		return tvalue{constant: true, lit: m}, true
	}
	slices.Sort(keys)
	out := &robonetv1.TemplateMap{}
	for _, k := range keys {
		out.Entries = append(out.Entries, &robonetv1.TemplateEntry{Key: k, Value: c.toIR(values[k], nodes[k], w.child(k))})
	}
	return tvalue{ir: &robonetv1.Template{Kind: &robonetv1.Template_Map{Map: out}}}, true
}

// stringTemplate compiles a string holding ${{ }}: exactly one expression
// becomes a whole-value Expr (of any type); anything else an Interpolation.
func (c *compiler) stringTemplate(n *yaml.Node, sc *scope, w where) (tvalue, bool) {
	pieces, ok := c.splitString(n, w)
	if !ok {
		return tvalue{}, false
	}
	if len(pieces) == 1 && pieces[0].isExpr {
		checked, ok := c.checkExpr(n, pieces[0], sc, w)
		if !ok {
			return tvalue{}, false
		}
		e := &robonetv1.Expr{Source: checked.Canonical}
		return tvalue{ir: &robonetv1.Template{Kind: &robonetv1.Template_Expr{Expr: e}}}, true
	}
	interp := &robonetv1.Interpolation{}
	allOK := true
	for _, p := range pieces {
		if !p.isExpr {
			interp.Parts = append(interp.Parts, &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Text{Text: p.text}})
			continue
		}
		checked, ok := c.checkExpr(n, p, sc, w)
		if !ok {
			allOK = false
			continue
		}
		e := &robonetv1.Expr{Source: checked.Canonical}
		interp.Parts = append(interp.Parts, &robonetv1.InterpolationPart{Part: &robonetv1.InterpolationPart_Expr{Expr: e}})
	}
	if !allOK {
		return tvalue{}, false
	}
	return tvalue{ir: &robonetv1.Template{Kind: &robonetv1.Template_Interpolation{Interpolation: interp}}}, true
}

// splitString splits a string scalar into text and expressions, reporting an
// unterminated ${{.
func (c *compiler) splitString(n *yaml.Node, w where) ([]piece, bool) {
	pieces, bad := splitTemplate(n.Value)
	if bad >= 0 {
		line, col := c.valuePosition(n, utf8.RuneCountInString(n.Value[:bad]))
		c.errorAt(line, col, w, "close the expression with }}, e.g. ${{ inputs.name }}", "unterminated ${{: no matching }}")
		return nil, false
	}
	return pieces, true
}

// checkDepth reports a value nested deeper than MaxDepth.
func (c *compiler) checkDepth(n *yaml.Node, w where, depth int) bool {
	if depth <= c.limits.MaxDepth || (n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode) {
		return true
	}
	c.errorf(n, w, "flatten the value, or build it in a task", "value is nested more than %d levels deep", c.limits.MaxDepth)
	return false
}

// scalarValue converts a scalar that holds no expression to a canonical value.
func (c *compiler) scalarValue(n *yaml.Node, w where) (any, bool) {
	switch n.Tag {
	case "!!null":
		return nil, true
	case "!!str", "!!timestamp", "!!binary":
		// Timestamps and base64 stay the text they were written as.
		return n.Value, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			c.errorf(n, w, "write true or false", "invalid boolean %q", n.Value)
			return nil, false
		}
		return b, true
	case "!!int", "!!float":
		var raw any
		if err := n.Decode(&raw); err != nil {
			c.errorf(n, w, "", "invalid number %q", n.Value)
			return nil, false
		}
		v, err := value.Normalize(raw)
		if err != nil {
			c.errorf(n, w, "JSON has no NaN or infinity; use a string or null", "number %s cannot be used", n.Value)
			return nil, false
		}
		return v, true
	}
	c.errorf(n, w, "remove the tag, or quote the value to make it a string", "unsupported YAML tag %s", n.Tag)
	return nil, false
}

// plainValue converts a node without expressions (an input default) to a
// canonical value.
func (c *compiler) plainValue(n *yaml.Node, w where, depth int) (any, bool) {
	n = c.resolve(n)
	if n == nil || !c.checkDepth(n, w, depth) {
		return nil, false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return c.scalarValue(n, w)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, child := range n.Content {
			v, good := c.plainValue(child, w.index(i), depth+1)
			if c.stopped {
				return nil, false
			}
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		entries, ok := c.mapping(n, w, "a value")
		out := make(map[string]any, len(entries))
		for _, e := range entries {
			v, good := c.plainValue(e.value, w.child(e.key), depth+1)
			if c.stopped {
				return nil, false
			}
			ok = ok && good
			out[e.key] = v
		}
		return out, ok && len(entries) == len(n.Content)/2
	}
	c.errorf(n, w, "", "unexpected YAML content")
	return nil, false
}

// piece is a run of plain text or one ${{ expression }} of a string.
type piece struct {
	text   string
	isExpr bool
	// offset is, for an expression, the rune offset of its text (just after
	// "${{") within the string; open is the rune offset of the "${{".
	offset, open int
}

// splitTemplate splits s into text and expression pieces. Empty text pieces
// are left out. It returns the byte offset of an unterminated "${{", or -1.
func splitTemplate(s string) ([]piece, int) {
	var out []piece
	rest := 0 // byte offset of the text not yet consumed
	for {
		i := strings.Index(s[rest:], "${{")
		if i < 0 {
			break
		}
		open := rest + i
		start := open + 3
		end := findExprEnd(s, start)
		if end < 0 {
			return nil, open
		}
		if open > rest {
			out = append(out, piece{text: s[rest:open]})
		}
		out = append(out, piece{
			text:   s[start:end],
			isExpr: true,
			offset: utf8.RuneCountInString(s[:start]),
			open:   utf8.RuneCountInString(s[:open]),
		})
		rest = end + 2
	}
	if rest < len(s) {
		out = append(out, piece{text: s[rest:]})
	}
	return out, -1
}

// findExprEnd returns the byte offset of the "}}" that closes an expression
// starting at start, or -1. Braces of CEL map literals and the contents of
// CEL string literals do not close it, so ${{ {'a': {'b': '}}'}} }} works.
func findExprEnd(s string, start int) int {
	depth := 0
	for j := start; j < len(s); j++ {
		switch s[j] {
		case '\'', '"':
			j = skipQuoted(s, j)
			if j < 0 {
				return -1
			}
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			} else if j+1 < len(s) && s[j+1] == '}' {
				return j
			}
		}
	}
	return -1
}

// skipQuoted returns the offset of the quote that closes the CEL string
// literal opening at s[j], or -1 if it is not closed. It understands triple
// quotes and raw strings (r'...', in which backslash does not escape).
func skipQuoted(s string, j int) int {
	q := s[j : j+1]
	raw := j > 0 && (s[j-1] == 'r' || s[j-1] == 'R')
	closing := q
	if strings.HasPrefix(s[j:], q+q+q) {
		closing = q + q + q
	}
	for k := j + len(closing); k < len(s); k++ {
		if s[k] == '\\' && !raw {
			k++ // skip the escaped character
			continue
		}
		if strings.HasPrefix(s[k:], closing) {
			return k + len(closing) - 1
		}
	}
	return -1
}
