package value

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEncodeCanonical(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, `null`},
		{true, `true`},
		{int64(-7), `-7`},
		{1.0, `1.0`},
		{1.5, `1.5`},
		{1e21, `1e+21`},
		{"a\"b<", `"a\"b\u003c"`},
		{[]any{int64(1), "x", nil}, `[1,"x",null]`},
		{map[string]any{"b": int64(1), "a": map[string]any{"d": 2.5, "c": []any{}}}, `{"a":{"c":[],"d":2.5},"b":1}`},
	} {
		got, err := Encode(tc.in)
		if err != nil {
			t.Fatalf("Encode(%v): %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("Encode(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestRoundTripKeepsIntsAndFloatsApart(t *testing.T) {
	in := map[string]any{"i": int64(3), "f": 3.0, "big": int64(math.MaxInt64), "neg": -0.5, "l": []any{int64(1), 1.0}}
	enc, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(in, out) {
		t.Fatalf("round trip changed the value: %#v -> %s -> %#v", in, enc, out)
	}
	m := out.(map[string]any)
	if _, ok := m["i"].(int64); !ok {
		t.Errorf("i decoded as %T, want int64", m["i"])
	}
	if _, ok := m["f"].(float64); !ok {
		t.Errorf("f decoded as %T, want float64", m["f"])
	}
}

func TestNormalize(t *testing.T) {
	got, err := Normalize(map[string]any{"n": 3, "u": uint64(5), "f32": float32(0.5), "j": json.Number("12"), "s": []string{"a"}, "m": map[string]int{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(3), "u": int64(5), "f32": 0.5, "j": int64(12), "s": []any{"a"}, "m": map[string]any{"x": int64(1)}}
	if !Equal(got, want) {
		t.Errorf("Normalize = %#v, want %#v", got, want)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), struct{}{}, map[int]int{1: 1}, "\xff"} {
		if _, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%#v) succeeded, want an error", bad)
		}
	}
	// Canonical input is returned as is, without copying.
	in := []any{int64(1), map[string]any{"a": "b"}}
	out, err := Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	if &out.([]any)[0] != &in[0] {
		t.Error("Normalize copied an already canonical list")
	}
}

func TestDepthLimit(t *testing.T) {
	var v any = "leaf"
	for range MaxDepth + 2 {
		v = []any{v}
	}
	if _, err := Normalize(v); err == nil {
		t.Error("Normalize accepted a value deeper than MaxDepth")
	}
	if _, err := Encode(v); err == nil {
		t.Error("Encode accepted a value deeper than MaxDepth")
	}
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	if _, err := Decode([]byte(deep)); err == nil {
		t.Error("Decode accepted a value deeper than MaxDepth")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, bad := range []string{``, `{`, `1 2`, `[1e999]`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) succeeded, want an error", bad)
		}
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"x", "x"}, {int64(4), "4"}, {2.5, "2.5"}, {false, "false"}, {nil, "null"},
		{[]any{"a", int64(1)}, `["a",1]`},
	} {
		if got := Render(tc.in); got != tc.want {
			t.Errorf("Render(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEncodeLimitStopsEarly(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	list := make([]any, 10_000) // 10 GB if encoded whole
	for i := range list {
		list[i] = big
	}
	if _, err := EncodeLimit(list, 4<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EncodeLimit(10k × 1 MiB) = %v, want ErrTooLarge", err)
	}
	if got := Size(list, 4<<20); got <= 4<<20 || got > 6<<20 {
		t.Fatalf("Size stopped at %d, want just past the 4 MiB limit", got)
	}
	small := map[string]any{"a": []any{int64(1), "two", 3.5, nil, true}}
	b, err := EncodeLimit(small, 100)
	if err != nil || string(b) != `{"a":[1,"two",3.5,null,true]}` {
		t.Fatalf("EncodeLimit(small) = %s, %v", b, err)
	}
	if _, err := EncodeLimit(small, 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EncodeLimit(small, 10) = %v, want ErrTooLarge", err)
	}
	if got, want := Size(small, 0), len(b); got < want/2 || got > want*2 {
		t.Fatalf("Size(small) = %d, encoding is %d bytes", got, want)
	}
}

func TestNormalizeLimitStopsEarly(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	list := make([]any, 100_000) // 100 GB of strings to validate if walked whole
	for i := range list {
		list[i] = big
	}
	if _, err := NormalizeLimit(list, 4<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("NormalizeLimit = %v, want ErrTooLarge", err)
	}
	v, err := NormalizeLimit([]int{1, 2}, 100)
	if err != nil || !Equal(v, []any{int64(1), int64(2)}) {
		t.Fatalf("NormalizeLimit([]int{1, 2}) = %v, %v", v, err)
	}
}

// BenchmarkEncodeResult encodes a value shaped like a small task result;
// every result is encoded more than once on its way to the store.
func BenchmarkEncodeResult(b *testing.B) {
	v := map[string]any{"message": "hello from task echo-12345", "index": int64(42), "node": "w1", "items": []any{"a", "b<c>", "d"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResult decodes a small task result and a richer value:
// every input and output that crosses the mesh is decoded once on arrival.
//
//	go test -run '^$' -bench DecodeResult -count 3 ./engine/value/
func BenchmarkDecodeResult(b *testing.B) {
	for _, in := range []struct{ name, json string }{
		{"echo", `{"i":42}`},
		{"rich", `{"message":"hello from task echo-12345","index":42,"size":1234.5,"ok":true,"items":["a","b\u003cc\u003e","d"],"meta":{"k":"v\u00e9"}}`},
	} {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode([]byte(in.json)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeErrorsSayWhere: a syntax error names the offset it was found
// at and what was wanted there.
func TestDecodeErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "invalid JSON: unexpected end of input (no value)"},
		{`{"a" 1}`, `invalid JSON: invalid character '1' after an object key (want ':') at offset 5`},
		{`[1,]`, `invalid JSON: invalid character ']' looking for a value at offset 3`},
		{`[1 2]`, `invalid JSON: invalid character '2' after an array element (want ',' or ']') at offset 3`},
		{`"a` + "\n" + `"`, `invalid JSON: invalid character '\n' in a string (control characters must be escaped) at offset 2`},
		{`"\x"`, `invalid JSON: invalid character 'x' in a string escape at offset 2`},
		{`tru`, `invalid JSON: unexpected end of input in literal true at offset 3`},
		{`01`, `invalid JSON: unexpected data after the value at offset 1`},
		{`1e999`, `number "1e999" is out of range`},
		{`{"a":1}}`, `invalid JSON: unexpected data after the value at offset 7`},
	} {
		_, err := Decode([]byte(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Decode(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := Decode([]byte(strings.Repeat("[", MaxDepth+2))); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Decode of %d open brackets = %v, want ErrTooDeep", MaxDepth+2, err)
	}
}
