package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/expr"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Limits bound the work Compile does for one spec, so that a hostile or
// broken spec is rejected quickly instead of exhausting memory or time.
type Limits struct {
	// MaxSpecBytes is the largest spec accepted, in bytes.
	MaxSpecBytes int
	// MaxTasks is the largest number of tasks in one workflow.
	MaxTasks int
	// MaxDepth bounds the nesting of lists and maps inside `with`, input
	// defaults and outputs.
	MaxDepth int
	// MaxNodes bounds the YAML nodes visited while compiling. A node reached
	// through an alias (*name) counts every time it is used, so "alias bombs"
	// (aliases of aliases of large lists) fail fast.
	MaxNodes int
	// MaxExpandedBytes bounds the size of the spec once every alias is
	// expanded: the bytes of every scalar visited (keys and values), an
	// alias counting its target's size every time it is used. It stops a
	// small spec that aliases one large string many times.
	MaxExpandedBytes int
	// MaxIRBytes bounds the compiled IR, which is what is stored and loaded
	// for every instance of the version.
	MaxIRBytes int
	// MaxExpressions bounds the ${{ }} expressions in one spec: each is
	// type-checked and cost-estimated at registration, and compiled when
	// the version is first run.
	MaxExpressions int
	// MaxErrors is how many problems are collected before giving up.
	MaxErrors int
	// MaxLoop bounds the iterations of one loop: a loop's max may not
	// exceed it, and the engine fails a loop over a longer list.
	MaxLoop int
	// Expr are the limits of the expression language (length and cost).
	Expr expr.Limits
}

// DefaultLimits are used for every field of Limits that is zero.
var DefaultLimits = Limits{
	MaxSpecBytes:     1 << 20,
	MaxTasks:         1000,
	MaxDepth:         32,
	MaxNodes:         200_000,
	MaxExpandedBytes: 4 << 20,
	MaxIRBytes:       4 << 20,
	MaxExpressions:   2000,
	MaxErrors:        50,
	MaxLoop:          10_000,
	Expr:             expr.DefaultLimits,
}

// WithDefaults returns a copy of l with every zero (or negative) field set
// from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	if l.MaxSpecBytes <= 0 {
		l.MaxSpecBytes = DefaultLimits.MaxSpecBytes
	}
	if l.MaxTasks <= 0 {
		l.MaxTasks = DefaultLimits.MaxTasks
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultLimits.MaxNodes
	}
	if l.MaxExpandedBytes <= 0 {
		l.MaxExpandedBytes = DefaultLimits.MaxExpandedBytes
	}
	if l.MaxIRBytes <= 0 {
		l.MaxIRBytes = DefaultLimits.MaxIRBytes
	}
	if l.MaxExpressions <= 0 {
		l.MaxExpressions = DefaultLimits.MaxExpressions
	}
	if l.MaxErrors <= 0 {
		l.MaxErrors = DefaultLimits.MaxErrors
	}
	if l.MaxLoop <= 0 {
		l.MaxLoop = DefaultLimits.MaxLoop
	}
	l.Expr = l.Expr.WithDefaults()
	return l
}

// Options configure Compile.
type Options struct {
	Limits Limits
}

// Compile parses a workflow spec written in YAML or JSON (the same schema; JSON
// is read as YAML) and returns the validated IR.
//
// filename is used only in error messages. On failure the error is an
// ErrorList, sorted by position, holding every problem found (up to
// Limits.MaxErrors); Compile never returns a partial workflow.
func Compile(filename string, src []byte, opts Options) (*robonetv1.Workflow, error) {
	limits := opts.Limits.WithDefaults()
	env, err := expr.NewEnv(limits.Expr)
	if err != nil {
		// The environment is built from constants; this cannot happen
		// unless package expr is broken.
		return nil, fmt.Errorf("spec: %w", err)
	}
	c := newCompiler(filename, src, limits, env)
	wf := c.compile()
	if len(c.errs) > 0 {
		return nil, c.errorList()
	}
	if size := proto.Size(wf); size > limits.MaxIRBytes {
		return nil, ErrorList{{File: c.file,
			Msg:  fmt.Sprintf("the compiled workflow is %d bytes, the limit is %d", size, limits.MaxIRBytes),
			Hint: "split the workflow, or pass large constants as inputs"}}
	}
	return wf, nil
}

// Hash returns the identity of a compiled workflow: "sha256:" followed by the
// hex SHA-256 of its deterministic protobuf encoding. Two specs that mean the
// same thing compile to the same IR and therefore the same hash.
//
// Hash returns "" only if the workflow cannot be encoded, which does not
// happen for a workflow returned by Compile.
func Hash(wf *robonetv1.Workflow) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(wf)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AsErrorList returns the problems in err when it came from Compile, or nil.
func AsErrorList(err error) ErrorList {
	var list ErrorList
	if errors.As(err, &list) {
		return list
	}
	return nil
}
