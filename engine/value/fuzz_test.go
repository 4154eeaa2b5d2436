package value_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/robonet/robonet/engine/value"
)

// decodeSeeds are valid values (every canonical type, the int/float edges,
// the depth limit) and near misses: truncated, trailing data, bad numbers,
// bad escapes, one level too deep.
var decodeSeeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `0.0`, `-0.0`, `1.0`, `1.5`, `1e2`, `1E-2`, `1e21`,
	`9223372036854775807`, `-9223372036854775808`, `9223372036854775808`, `-9223372036854775809`,
	`1e308`, `1e309`, `-1e400`, `1e-400`, `5e-324`, `1` + strings.Repeat("0", 400),
	`""`, `"a\"b<>&\u2028\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"\u0000"`,
	`[]`, `{}`, `[1,1.0,"1",null,true]`, `{"b":1,"a":{"d":2.5,"c":[]}}`, `{"a":1,"a":2.0}`,
	" \t\n[ 1 , {\"x\" : null} ]\r\n",
	strings.Repeat("[", value.MaxDepth) + `1` + strings.Repeat("]", value.MaxDepth),
	strings.Repeat("[", value.MaxDepth+1) + `1` + strings.Repeat("]", value.MaxDepth+1),
	strings.Repeat("[", value.MaxDepth+1) + strings.Repeat("]", value.MaxDepth+1),
	strings.Repeat("[", value.MaxDepth+2) + strings.Repeat("]", value.MaxDepth+2),
	strings.Repeat(`{"a":`, value.MaxDepth+1) + `{}` + strings.Repeat("}", value.MaxDepth+1),
	strings.Repeat("[", 10_000),
	``, ` `, `{`, `[1,]`, `{"a" 1}`, `{"a":}`, `01`, `+1`, `.5`, `1.`, `NaN`, `Infinity`, `tru`, `nul`,
	`"\x"`, `"\u12"`, "\"a\nb\"", `1 2`, `1]`, `{"a":1}}`, `[1]]`, `"x"}`, `1 x`, `[1] [2]`,
}

// FuzzDecode checks Decode against a naive reference built on encoding/json:
// Decode accepts exactly the JSON texts that hold one value nested at most
// MaxDepth deep with finite numbers, and returns the reference's value, with
// whole numbers written without a fraction or exponent as int64 and the rest
// as float64. A decoded value is canonical, and its encoding decodes to an
// equal value and re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := value.Decode(data)
		ref, refErr := naiveDecode(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Decode(%q) returned an empty error", data)
			}
			if refErr == nil {
				t.Fatalf("Decode(%q) = %v, but it is valid JSON within the limits (reference: %#v)", data, err, ref)
			}
			return
		}
		checkCanonical(t, v, 0)
		enc := checkEncodes(t, v)
		if n, err := value.Normalize(v); err != nil || !value.Equal(n, v) {
			t.Fatalf("Normalize(Decode(%q)) = %#v, %v; want the value unchanged", data, n, err)
		}
		if refErr != nil {
			t.Fatalf("Decode(%q) = %s, want an error: %v", data, enc, refErr)
		}
		if !value.Equal(v, ref) {
			t.Fatalf("Decode(%q) = %#v, reference %#v", data, v, ref)
		}
	})
}

// FuzzEncodeRoundTrip builds a value from scalars of every kind, nested wrap
// levels deep, and checks that Normalize and Encode accept it exactly when it
// is canonical and within MaxDepth, and that a canonical value survives
// Encode → Decode with ints and floats kept apart.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add(int64(0), 0.0, "", "k", uint8(0))
	f.Add(int64(math.MaxInt64), 1.0, "a\"b<>&\u2028\x00\x1f", "é", uint8(1))
	f.Add(int64(math.MinInt64), math.Copysign(0, -1), "\ufffd", "", uint8(2))
	f.Add(int64(1<<53+1), 1e21, "x", "a", uint8(value.MaxDepth-3))
	f.Add(int64(-1), 5e-324, "😀", "f", uint8(value.MaxDepth-2))
	f.Add(int64(3), math.MaxFloat64, "y", "i", uint8(value.MaxDepth-1))
	f.Add(int64(3), 3.0, "y", "s", uint8(value.MaxDepth))
	f.Add(int64(7), -1e-7, "z", "z", uint8(255))
	f.Add(int64(1), math.NaN(), "", "k", uint8(0))
	f.Add(int64(1), math.Inf(-1), "", "k", uint8(3))
	f.Add(int64(1), 1.5, "\xff", "k", uint8(0))
	f.Add(int64(1), 1.5, "ok", "\xc3", uint8(0))
	f.Fuzz(func(t *testing.T, i int64, x float64, s, key string, wrap uint8) {
		v := nest(i, x, s, key, int(wrap))
		finite := !math.IsNaN(x) && !math.IsInf(x, 0)
		validUTF8 := utf8.ValidString(s) && utf8.ValidString(key)
		shallow := int(wrap)+2 <= value.MaxDepth // nest's leaves sit at wrap+2
		canonical := finite && validUTF8 && shallow

		n, nerr := value.Normalize(v)
		if (nerr == nil) != canonical {
			t.Fatalf("Normalize: err = %v, want an error: %t (finite %t, UTF-8 %t, shallow %t)",
				nerr, !canonical, finite, validUTF8, shallow)
		}
		enc, err := value.Encode(v)
		switch {
		case canonical:
			if err != nil {
				t.Fatalf("Encode of a canonical value: %v", err)
			}
			if !value.Equal(n, v) {
				t.Fatalf("Normalize changed a canonical value: %#v -> %#v", v, n)
			}
			if got := checkEncodes(t, v); !bytes.Equal(got, enc) {
				t.Fatalf("Encode is not deterministic: %s, then %s", enc, got)
			}
			if got := string(value.MustEncode(v)); got != string(enc) {
				t.Fatalf("MustEncode = %s, Encode = %s", got, enc)
			}
			if got, err := value.AppendEncode([]byte("prefix"), v); err != nil || string(got) != "prefix"+string(enc) {
				t.Fatalf("AppendEncode = %s, %v; want prefix%s", got, err, enc)
			}
			if got := value.Render(v); got != string(enc) {
				t.Fatalf("Render = %s, Encode = %s", got, enc)
			}
		case !finite:
			if err == nil {
				t.Fatalf("Encode accepted %v: %s", x, enc)
			}
		case !shallow:
			if !errors.Is(err, value.ErrTooDeep) {
				t.Fatalf("Encode of a value deeper than MaxDepth = %v, want ErrTooDeep", err)
			}
		default: // invalid UTF-8: Encode is documented for canonical values only
			if err == nil && !json.Valid(enc) {
				t.Fatalf("Encode wrote invalid JSON: %s", enc)
			}
		}
	})
}

// TestDecodeRejectsDataAfterTheValue pins a bug the fuzzer found: Decode's
// check for trailing data (json.Decoder.More) did not see a ']' or '}', so
// `1]` and `{"a":1}}` were accepted.
func TestDecodeRejectsDataAfterTheValue(t *testing.T) {
	for _, bad := range []string{`1 2`, `1 x`, `[1] [2]`, `1]`, `{"a":1}}`, `[1]]`, `"x"}`} {
		if v, err := value.Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) = %#v, want an error", bad, v)
		}
	}
}

// nest returns a map holding every scalar kind and an empty list and map,
// wrapped alternately in lists and maps wrap times. Its deepest nodes sit
// wrap+2 levels below the root.
func nest(i int64, x float64, s, key string, wrap int) any {
	var v any = map[string]any{
		"i": i, "f": x, "s": s,
		key: []any{i, x, s, nil, true, false, []any{}, map[string]any{}},
	}
	for k := range wrap {
		if k%2 == 0 {
			v = []any{v}
		} else {
			v = map[string]any{key: v}
		}
	}
	return v
}

// checkEncodes encodes a canonical value and checks the encoding: compact
// valid JSON that decodes to an equal value (kinds included) and re-encodes
// to the same bytes.
func checkEncodes(t *testing.T, v any) []byte {
	t.Helper()
	enc, err := value.Encode(v)
	if err != nil {
		t.Fatalf("Encode(%#v): %v", v, err)
	}
	if !json.Valid(enc) {
		t.Fatalf("Encode wrote invalid JSON: %s", enc)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, enc); err != nil || !bytes.Equal(compact.Bytes(), enc) {
		t.Fatalf("encoding has insignificant whitespace: %s", enc)
	}
	back, err := value.Decode(enc)
	if err != nil {
		t.Fatalf("Decode(Encode(v)) = %v; encoding %s", err, enc)
	}
	if !value.Equal(back, v) {
		t.Fatalf("round trip changed the value: %#v -> %s -> %#v", v, enc, back)
	}
	again, err := value.Encode(back)
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("re-encoding is not stable: %s, then %s (%v)", enc, again, err)
	}
	return enc
}

// checkCanonical walks v: only canonical types, finite floats, valid UTF-8
// and no node deeper than MaxDepth.
func checkCanonical(t *testing.T, v any, depth int) {
	t.Helper()
	if depth > value.MaxDepth {
		t.Fatalf("decoded value has a node %d levels deep, limit %d", depth, value.MaxDepth)
	}
	switch x := v.(type) {
	case nil, bool, int64:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Fatalf("decoded a non-finite number %v", x)
		}
	case string:
		if !utf8.ValidString(x) {
			t.Fatalf("decoded an invalid UTF-8 string %q", x)
		}
	case []any:
		for _, e := range x {
			checkCanonical(t, e, depth+1)
		}
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) {
				t.Fatalf("decoded an invalid UTF-8 key %q", k)
			}
			checkCanonical(t, e, depth+1)
		}
	default:
		t.Fatalf("decoded a non-canonical %T", v)
	}
}

// naiveDecode is the reference for Decode: encoding/json's syntax, one value,
// numbers as written (int64 when whole and without '.', 'e' or 'E', else a
// finite float64) and every node at most MaxDepth levels deep.
func naiveDecode(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, errors.New("not one JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	return naiveConvert(raw, 0)
}

func naiveConvert(v any, depth int) (any, error) {
	if depth > value.MaxDepth {
		return nil, errors.New("too deep")
	}
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %.20s... out of range", s)
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := naiveConvert(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := naiveConvert(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return v, nil
}

// FuzzEncodeString checks the string encoder against encoding/json byte
// for byte: escapes, HTML characters, U+2028/U+2029 and invalid UTF-8,
// also as an object key.
func FuzzEncodeString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "ü日本🎉", "\xf0\x9f\x8e", "tab\there\u00e9\u2027\u202a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		got, err := value.Encode(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Encode(%q) = %s, %v; encoding/json writes %s", s, got, err, want)
		}
		wantObj, _ := json.Marshal(map[string]any{s: s})
		gotObj, err := value.Encode(map[string]any{s: s})
		if err != nil || !bytes.Equal(gotObj, wantObj) {
			t.Fatalf("Encode({%q: %q}) = %s, %v; encoding/json writes %s", s, s, gotObj, err, wantObj)
		}
	})
}
