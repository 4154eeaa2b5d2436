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
func Normalize(v any) (any, error) { return normalize(v, 0) }

func normalize(v any, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	switch x := v.(type) {
	case nil, bool, int64:
		return x, nil
	case string:
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
		return normalize(float64(x), depth)
	case json.Number:
		return numberFromString(string(x))
	case []any:
		out := x
		for i, e := range x {
			n, err := normalize(e, depth+1)
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
			n, err := normalize(e, depth+1)
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
	return normalizeReflect(v, depth)
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

func normalizeReflect(v any, depth int) (any, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return normalize(rv.Uint(), depth)
	case reflect.Float32, reflect.Float64:
		return normalize(rv.Float(), depth)
	case reflect.String:
		return normalize(rv.String(), depth)
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalize(rv.Index(i).Interface(), depth+1)
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
			n, err := normalize(it.Value().Interface(), depth+1)
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
		return normalize(rv.Elem().Interface(), depth)
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
	if err != nil {
		return nil, fmt.Errorf("invalid number %q", s)
	}
	if math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of range", s)
	}
	return f, nil
}

// Decode parses JSON into a canonical value.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: unexpected data after the value")
	}
	return Normalize(v)
}

// Encode returns the canonical JSON encoding of a canonical value.
func Encode(v any) ([]byte, error) { return AppendEncode(nil, v) }

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
func AppendEncode(buf []byte, v any) ([]byte, error) { return appendEncode(buf, v, 0) }

func appendEncode(buf []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return buf, ErrTooDeep
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
		return appendString(buf, x), nil
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendEncode(buf, e, depth+1); err != nil {
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
			if buf, err = appendEncode(buf, x[k], depth+1); err != nil {
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

func appendString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // never fails for a string
	return append(buf, b...)
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
