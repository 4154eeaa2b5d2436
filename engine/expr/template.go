package expr

import (
	"fmt"
	"strings"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

// Template is a compiled IR template: a value tree in which strings may carry
// expressions. It is immutable and safe for concurrent use.
type Template struct {
	kind    templateKind
	literal any
	prog    *Program
	parts   []part // interpolation
	items   []*Template
	keys    []string
	refs    Refs
	// maxBytes bounds an interpolated string (Limits.MaxResultBytes).
	maxBytes int
}

type templateKind uint8

const (
	tLiteral templateKind = iota
	tExpr
	tInterp
	tList
	tMap
)

type part struct {
	text string
	prog *Program // nil for text
}

// CompileTemplate compiles an IR template. A nil template evaluates to null.
func (e *Env) CompileTemplate(t *robonetv1.Template) (*Template, error) {
	if t == nil {
		return &Template{kind: tLiteral}, nil
	}
	switch k := t.GetKind().(type) {
	case *robonetv1.Template_LiteralJson:
		v, err := value.Decode(k.LiteralJson)
		if err != nil {
			return nil, fmt.Errorf("template literal: %w", err)
		}
		return &Template{kind: tLiteral, literal: v}, nil
	case *robonetv1.Template_Expr:
		p, err := e.Compile(k.Expr.GetSource())
		if err != nil {
			return nil, err
		}
		return &Template{kind: tExpr, prog: p, refs: p.Refs()}, nil
	case *robonetv1.Template_Interpolation:
		out := &Template{kind: tInterp, maxBytes: e.limits.MaxResultBytes}
		for _, pt := range k.Interpolation.GetParts() {
			if x, ok := pt.GetPart().(*robonetv1.InterpolationPart_Expr); ok {
				p, err := e.Compile(x.Expr.GetSource())
				if err != nil {
					return nil, err
				}
				out.parts = append(out.parts, part{prog: p})
				out.refs.merge(p.Refs())
				continue
			}
			out.parts = append(out.parts, part{text: pt.GetText()})
		}
		return out, nil
	case *robonetv1.Template_List:
		out := &Template{kind: tList}
		for _, it := range k.List.GetItems() {
			c, err := e.CompileTemplate(it)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, c)
			out.refs.merge(c.refs)
		}
		return out, nil
	case *robonetv1.Template_Map:
		out := &Template{kind: tMap}
		for _, en := range k.Map.GetEntries() {
			c, err := e.CompileTemplate(en.GetValue())
			if err != nil {
				return nil, err
			}
			out.keys = append(out.keys, en.GetKey())
			out.items = append(out.items, c)
			out.refs.merge(c.refs)
		}
		return out, nil
	}
	return &Template{kind: tLiteral}, nil
}

// BindTasks numbers the tasks the template's single-reference expressions
// read (see Program.BindTasks). Call it once, before sharing the template.
func (t *Template) BindTasks(lookup func(name string) (int32, bool)) {
	if t.prog != nil {
		t.prog.BindTasks(lookup)
	}
	for _, p := range t.parts {
		if p.prog != nil {
			p.prog.BindTasks(lookup)
		}
	}
	for _, it := range t.items {
		it.BindTasks(lookup)
	}
}

// TaskRef reports whether the whole template is one bound single reference
// to a task's output, tasks.<name>.output.<path…>, and if so which task (as
// numbered by BindTasks) and path. Callers with the outputs at hand can then
// evaluate it with FollowPath and no indirection, falling back to Eval on a
// miss.
func (t *Template) TaskRef() (slot int32, path []string, ok bool) {
	if t.kind != tExpr || !t.prog.fast || t.prog.root != VarTasks || t.prog.slot < 0 {
		return -1, nil, false
	}
	return t.prog.slot, t.prog.path, true
}

// Refs returns what the template's expressions read.
func (t *Template) Refs() Refs { return t.refs }

// IsConstant reports whether the template contains no expression.
func (t *Template) IsConstant() bool { return t.kind == tLiteral }

// Eval evaluates the template. Literal subtrees are shared, not copied:
// callers must not mutate the result.
func (t *Template) Eval(s Scope) (any, error) {
	switch t.kind {
	case tLiteral:
		return t.literal, nil
	case tExpr:
		return t.prog.Eval(s)
	case tInterp:
		var b strings.Builder
		for _, p := range t.parts {
			if p.prog == nil {
				b.WriteString(p.text)
				continue
			}
			v, err := p.prog.Eval(s)
			if err != nil {
				return nil, err
			}
			if b.Len() > t.maxBytes-value.Size(v, t.maxBytes) {
				return nil, fmt.Errorf("%w: ${{ %s }}: the interpolated string would be larger than %d bytes, the limit: %w",
					ErrEval, p.prog.Source(), t.maxBytes, value.ErrTooLarge)
			}
			b.WriteString(value.Render(v))
		}
		return b.String(), nil
	case tList:
		out := make([]any, len(t.items))
		for i, it := range t.items {
			v, err := it.Eval(s)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case tMap:
		out := make(map[string]any, len(t.items))
		for i, it := range t.items {
			v, err := it.Eval(s)
			if err != nil {
				return nil, err
			}
			out[t.keys[i]] = v
		}
		return out, nil
	}
	return nil, nil
}
