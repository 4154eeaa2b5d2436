package expr

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// The runtime cost limit is charged after a function returns, so it cannot
// stop a single call that runs far longer than its arguments suggest. These
// bindings replace the few extension functions that can: the strings
// extension's indexOf and lastIndexOf compare at every position (O(n·m)),
// lists' distinct compares every pair (O(n²)), and replace can turn a small
// string into a huge one ("x".replace("", big)). The replacements keep the
// extensions' results (a differential test checks them) and run in linear
// time, or refuse up front.

// maxQuadraticDistinct bounds distinct() over lists of lists or maps, which
// have no cheap hash key and fall back to pairwise comparison.
const maxQuadraticDistinct = 2000

// maxRange is the most elements lists.range builds: the default width
// limit of a spread, which is what ranges are mostly for. The cost model
// below relies on it.
const maxRange = 100_000

// rangeCostModel estimates lists.range(n) of a non-constant n as the
// largest range it can build, instead of an unbounded cost: an expression
// such as lists.range(inputs.n) passes the compile-time screen, and is
// charged its actual size when it runs (n never exceeds maxRange there).
func rangeCostModel() cel.EnvOption {
	return cel.CostModel(cost.Overload("lists_range",
		cost.EvalCost(cost.AllocList(cost.Length(cost.Result()))),
		cost.ResultSize(cost.List(cost.Min(cost.IntArg(0, 0), cost.Const(maxRange)), cost.Const(1))),
	))
}

// boundedBuiltins returns the overriding declarations. maxBytes bounds the
// strings replace() may build.
func boundedBuiltins(maxBytes int) []cel.EnvOption {
	listT := cel.ListType(cel.TypeParamType("T"))
	str := cel.StringType
	return []cel.EnvOption{
		cel.Function("indexOf",
			cel.MemberOverload("string_index_of_string", []*cel.Type{str, str}, cel.IntType,
				cel.BinaryBinding(func(s, sub ref.Val) ref.Val {
					return intOrErr(indexOf(string(s.(types.String)), string(sub.(types.String)), 0))
				})),
			cel.MemberOverload("string_index_of_string_int", []*cel.Type{str, str, cel.IntType}, cel.IntType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return intOrErr(indexOf(string(args[0].(types.String)), string(args[1].(types.String)), int64(args[2].(types.Int))))
				}))),
		cel.Function("lastIndexOf",
			cel.MemberOverload("string_last_index_of_string", []*cel.Type{str, str}, cel.IntType,
				cel.BinaryBinding(func(s, sub ref.Val) ref.Val {
					return intOrErr(lastIndexOf(string(s.(types.String)), string(sub.(types.String))))
				})),
			cel.MemberOverload("string_last_index_of_string_int", []*cel.Type{str, str, cel.IntType}, cel.IntType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return intOrErr(lastIndexOfOffset(string(args[0].(types.String)), string(args[1].(types.String)), int64(args[2].(types.Int))))
				}))),
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{str, str, str}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), -1, maxBytes)
				})),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{str, str, str, cel.IntType}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), int64(args[3].(types.Int)), maxBytes)
				}))),
		cel.Function("distinct",
			cel.MemberOverload("list_distinct", []*cel.Type{listT}, listT,
				cel.UnaryBinding(func(l ref.Val) ref.Val { return distinct(l.(traits.Lister)) }))),
	}
}

func intOrErr(i int64, err error) ref.Val {
	if err != nil {
		return types.WrapErr(err)
	}
	return types.Int(i)
}

// byteOffset returns the byte offset of rune index r in s, or -1 when s has
// fewer than r runes.
func byteOffset(s string, r int) int {
	if r == 0 {
		return 0
	}
	n := 0
	for i := range s {
		if n == r {
			return i
		}
		n++
	}
	if n == r {
		return len(s)
	}
	return -1
}

// indexOf is the rune index of the first sub in s at or after rune offset
// off, or -1.
func indexOf(s, sub string, off int64) (int64, error) {
	if off < 0 {
		return -1, fmt.Errorf("index out of range: %d", off)
	}
	runes := utf8.RuneCountInString(s)
	if sub == "" {
		return min(off, int64(runes)), nil
	}
	if off >= int64(runes) {
		return -1, nil
	}
	start := byteOffset(s, int(off))
	i := strings.Index(s[start:], sub)
	if i < 0 {
		return -1, nil
	}
	return off + int64(utf8.RuneCountInString(s[start:start+i])), nil
}

// lastIndexOf is the rune index of the last sub in s, or -1.
func lastIndexOf(s, sub string) (int64, error) {
	runes := utf8.RuneCountInString(s)
	if sub == "" {
		return int64(runes), nil
	}
	if len(s) < len(sub) {
		return -1, nil
	}
	return lastIndexOfOffset(s, sub, int64(runes-1))
}

// lastIndexOfOffset is the rune index of the last sub in s that starts at or
// before rune offset off, or -1.
func lastIndexOfOffset(s, sub string, off int64) (int64, error) {
	if off < 0 {
		return -1, fmt.Errorf("index out of range: %d", off)
	}
	runes := int64(utf8.RuneCountInString(s))
	if sub == "" {
		return min(off, runes), nil
	}
	if off >= runes {
		return -1, nil
	}
	subRunes := int64(utf8.RuneCountInString(sub))
	if off > runes-subRunes {
		off = runes - subRunes
	}
	if off < 0 {
		return -1, nil
	}
	// A match starting at or before off ends at or before off+len(sub).
	end := byteOffset(s, int(off+subRunes))
	i := strings.LastIndex(s[:end], sub)
	if i < 0 {
		return -1, nil
	}
	return int64(utf8.RuneCountInString(s[:i])), nil
}

// replace is strings.Replace, refused when the result would be longer than
// maxBytes.
func replace(s, old, repl string, n int64, maxBytes int) ref.Val {
	count := int64(strings.Count(s, old)) // runes+1 when old is ""
	if n >= 0 && n < count {
		count = n
	}
	size := int64(len(s)) + count*(int64(len(repl))-int64(len(old)))
	if size > int64(maxBytes) {
		return types.NewErr("replace() would build a string of %d bytes, the limit is %d", size, maxBytes)
	}
	if n > math.MaxInt32 {
		n = -1
	}
	return types.String(strings.Replace(s, old, repl, int(n)))
}

// distinct keeps the first of each group of equal elements, in order. Lists
// of scalars are deduplicated through a hash set in linear time; lists that
// hold lists or maps are compared pairwise, up to maxQuadraticDistinct
// elements.
func distinct(l traits.Lister) ref.Val {
	n := int(l.Size().(types.Int))
	out := make([]ref.Val, 0, n)
	seen := make(map[scalarKey]struct{}, n)
	var nested []ref.Val // elements without a scalar key, compared pairwise
	for i := range n {
		v := l.Get(types.Int(i))
		if k, ok := keyOf(v); ok {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
			out = append(out, v)
			continue
		}
		if len(nested) >= maxQuadraticDistinct {
			return types.NewErr("distinct() of a list holding more than %d lists or maps is not supported", maxQuadraticDistinct)
		}
		dup := false
		for _, o := range nested {
			if v.Equal(o) == types.True {
				dup = true
				break
			}
		}
		if !dup {
			nested = append(nested, v)
			out = append(out, v)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// scalarKey identifies a scalar up to CEL equality: numbers of any type with
// the same value are equal (1 == 1u == 1.0), so whole numbers share one
// kind.
type scalarKey struct {
	kind byte // 'n' whole number, 'f' other double, 's' string, 'b' bytes, 't' bool, 'z' null
	i    int64
	f    float64
	s    string
}

func keyOf(v ref.Val) (scalarKey, bool) {
	switch x := v.(type) {
	case types.Int:
		return scalarKey{kind: 'n', i: int64(x)}, true
	case types.Uint:
		if uint64(x) <= math.MaxInt64 {
			return scalarKey{kind: 'n', i: int64(x)}, true
		}
		return scalarKey{kind: 'f', f: float64(x)}, true
	case types.Double:
		f := float64(x)
		if f != f { // NaN equals nothing, not even itself
			return scalarKey{}, false
		}
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return scalarKey{kind: 'n', i: int64(f)}, true
		}
		return scalarKey{kind: 'f', f: f}, true
	case types.String:
		return scalarKey{kind: 's', s: string(x)}, true
	case types.Bytes:
		return scalarKey{kind: 'b', s: string(x)}, true
	case types.Bool:
		if x {
			return scalarKey{kind: 't', i: 1}, true
		}
		return scalarKey{kind: 't'}, true
	case types.Null:
		return scalarKey{kind: 'z'}, true
	}
	return scalarKey{}, false
}
