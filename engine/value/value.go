// Package value defines the values that flow through a workflow: inputs, task
// inputs and outputs, and workflow outputs.
//
// A value is a JSON-like Go value in canonical form: nil, bool, int64, float64,
// string, []any or map[string]any. Whole numbers are int64 and fractional ones
// float64, and the distinction survives encoding, so a value restored from a
// snapshot behaves exactly like the one that was saved (CEL treats 1 and 1.0 as
// different types). Encode writes canonical JSON: map keys sorted, no
// insignificant whitespace, floats always carrying a '.' or an exponent.
package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of lists and maps in a value; deeper values are
// rejected so that a hostile input cannot exhaust the stack.
const MaxDepth = 64

// ErrTooDeep is returned for values nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("value nested deeper than %d levels", MaxDepth)

// Normalize converts v into canonical form. It accepts the canonical types plus
// the other Go integer and float types, json.Number, []T and map[string]T. It
// rejects NaN and infinities, invalid UTF-8 strings and anything else.
func Normalize(v any) (any, error) { return normalize(v, 0, nil) }

// NormalizeLimit is Normalize for values that may be large: it fails with
// an error wrapping ErrTooLarge once what it has seen would encode to more
// than limit bytes of JSON, so a value that repeats one large string many
// times costs O(limit) to refuse, not O(its expanded size).
func NormalizeLimit(v any, limit int) (any, error) {
	b := &budget{limit: limit, left: limit}
	return normalize(v, 0, b)
}

// budget counts (a lower bound of) the JSON bytes of what normalize saw.
type budget struct{ limit, left int }

func (b *budget) charge(n int) error {
	if b == nil {
		return nil
	}
	if b.left -= n; b.left < 0 {
		return fmt.Errorf("%w: its JSON encoding is more than %d bytes", ErrTooLarge, b.limit)
	}
	return nil
}

func normalize(v any, depth int, b *budget) (any, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	if err := b.charge(1); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil, bool, int64:
		return x, nil
	case string:
		if err := b.charge(len(x) + 1); err != nil {
			return nil, err
		}
		if !utf8.ValidString(x) {
			return nil, errors.New("string is not valid UTF-8")
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("number %v cannot be represented in JSON", x)
		}
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case float32:
		return normalize(float64(x), depth, b)
	case json.Number:
		return numberFromString(string(x))
	case []any:
		out := x
		for i, e := range x {
			n, err := normalize(e, depth+1, b)
			if err != nil {
				return nil, err
			}
			if !same(n, e) {
				if sameSlice(out, x) {
					out = slices.Clone(x)
				}
				out[i] = n
			}
		}
		return out, nil
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, errors.New("map key is not valid UTF-8")
			}
			if err := b.charge(len(k) + 3); err != nil {
				return nil, err
			}
			n, err := normalize(e, depth+1, b)
			if err != nil {
				return nil, err
			}
			if !same(n, e) {
				if out == nil {
					out = make(map[string]any, len(x))
					for k2, e2 := range x {
						out[k2] = e2
					}
				}
				out[k] = n
			}
		}
		if out != nil {
			return out, nil
		}
		return x, nil
	}
	return normalizeReflect(v, depth, b)
}

// same reports whether a normalized element is the very value it came from, so
// Normalize can return its argument unchanged (no copy) in the common case.
func same(a, b any) bool {
	switch x := a.(type) {
	case nil, bool, int64, float64, string:
		return a == b
	case []any:
		y, ok := b.([]any)
		return ok && sameSlice(x, y)
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	return false
}

func sameSlice(a, b []any) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func normalizeReflect(v any, depth int, b *budget) (any, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return normalize(rv.Uint(), depth, b)
	case reflect.Float32, reflect.Float64:
		return normalize(rv.Float(), depth, b)
	case reflect.String:
		return normalize(rv.String(), depth, b)
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalize(rv.Index(i).Interface(), depth+1, b)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map keys must be strings, not %s", rv.Type().Key())
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			n, err := normalize(it.Value().Interface(), depth+1, b)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = n
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalize(rv.Elem().Interface(), depth, b)
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// numberFromString parses a JSON number: whole numbers that fit become int64,
// everything else float64.
func numberFromString(s string) (any, error) {
	if !bytes.ContainsAny([]byte(s), ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case math.IsInf(f, 0): // ParseFloat's ErrRange for an overflow
		return nil, fmt.Errorf("number %s is out of range", QuoteClipped(s, 32))
	case err != nil:
		return nil, fmt.Errorf("invalid number %s", QuoteClipped(s, 32))
	}
	return f, nil
}

// Clip shortens s to at most n bytes, cut on a rune boundary and marked
// with "...". Errors quote what clients sent through it, so that no error
// grows with the request.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len("..."), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// QuoteClipped quotes s for an error message, shortened to n bytes and then
// followed by its full length.
func QuoteClipped(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(Clip(s, n)) + fmt.Sprintf(" (%d bytes)", len(s))
}

// Encode returns the canonical JSON encoding of a canonical value.
func Encode(v any) ([]byte, error) { return AppendEncode(nil, v) }

// ErrTooLarge is returned (wrapped, with the sizes) by EncodeLimit for a
// value whose encoding exceeds the limit.
var ErrTooLarge = errors.New("value too large")

// EncodeLimit is Encode for values that may be large: it stops as soon as
// the encoding passes limit bytes and returns an error wrapping ErrTooLarge,
// so a value that holds one large string many times (lists built by
// reference cost nothing until encoded) cannot exhaust memory.
func EncodeLimit(v any, limit int) ([]byte, error) {
	buf, err := appendEncodeLimit(nil, v, 0, limit)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// MustEncode is Encode for values known to be canonical (it panics otherwise);
// for use on values that came out of Normalize or Decode.
func MustEncode(v any) []byte {
	b, err := Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}

// AppendEncode appends the canonical JSON encoding of v to buf.
func AppendEncode(buf []byte, v any) ([]byte, error) { return appendEncodeLimit(buf, v, 0, 0) }

// appendEncodeLimit encodes v; limit > 0 bounds the length of buf.
func appendEncodeLimit(buf []byte, v any, depth, limit int) ([]byte, error) {
	if depth > MaxDepth {
		return buf, ErrTooDeep
	}
	if limit > 0 && len(buf) > limit {
		return buf, fmt.Errorf("%w: its JSON encoding is more than %d bytes", ErrTooLarge, limit)
	}
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case float64:
		return appendFloat(buf, x)
	case string:
		if limit > 0 && len(buf)+len(x) > limit {
			return buf, fmt.Errorf("%w: its JSON encoding is more than %d bytes", ErrTooLarge, limit)
		}
		return appendString(buf, x), nil
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendEncodeLimit(buf, e, depth+1, limit); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			var err error
			if buf, err = appendEncodeLimit(buf, x[k], depth+1, limit); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	}
	return buf, fmt.Errorf("value of type %T is not canonical; call value.Normalize first", v)
}

func appendFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return buf, fmt.Errorf("number %v cannot be represented in JSON", f)
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, 'g', -1, 64)
	if !bytes.ContainsAny(buf[start:], ".eEn") { // keep it a float when decoded
		buf = append(buf, ".0"...)
	}
	return buf, nil
}

// appendString appends s as a JSON string, byte for byte as
// encoding/json writes it (HTML characters and U+2028/U+2029 escaped,
// invalid UTF-8 as U+FFFD), without its reflection and allocation: every
// task's result passes through here more than once.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0 // s[start:i] is pending, needing no escape
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default: // other control bytes and <, >, &
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// jsonSafe holds the ASCII bytes a JSON string carries unescaped: all but
// control bytes, '"', '\\' and (as encoding/json does) <, > and &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\\<>&` {
		t[b] = false
	}
	return t
}()

// Size returns the length of the canonical JSON encoding of a canonical
// value, approximately (strings are counted without escapes), without
// encoding it. It stops counting once the size passes limit (limit > 0) and
// then returns a number above limit, so it costs at most O(limit) however
// often the value repeats a large part.
func Size(v any, limit int) int {
	n := 0
	sizeOf(v, limit, &n)
	return n
}

func sizeOf(v any, limit int, n *int) {
	if limit > 0 && *n > limit {
		return
	}
	switch x := v.(type) {
	case nil:
		*n += 4
	case bool:
		*n += 5
	case int64, float64:
		*n += 8
	case string:
		*n += len(x) + 2
	case []any:
		*n += 2 + len(x)
		for _, e := range x {
			if sizeOf(e, limit, n); limit > 0 && *n > limit {
				return
			}
		}
	case map[string]any:
		*n += 2 + len(x)
		for k, e := range x {
			*n += len(k) + 3
			if sizeOf(e, limit, n); limit > 0 && *n > limit {
				return
			}
		}
	default:
		*n += 8
	}
}

// Render formats a value for string interpolation: strings as they are, other
// scalars in their JSON form, lists and maps as canonical JSON.
func Render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := Encode(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Equal reports whether two canonical values are equal.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !Equal(e, f) {
				return false
			}
		}
		return true
	}
	return a == b
}

// TypeName names the JSON type of a canonical value for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}
