package node

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine/value"
)

// maxRequestErrorBytes bounds the message of a request error, however long
// the request: a client may send megabytes, and the status (and every log
// line that carries it) must not echo them back.
const maxRequestErrorBytes = 1 << 10

// FuzzDecodeInputs checks the decoder of SubmitWorkflowRequest.inputs_json:
// empty means no inputs; a JSON object decodes to what value.Decode makes of
// it; anything else is an InvalidArgument status naming inputs_json, never a
// panic.
func FuzzDecodeInputs(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"targets":["a","b"],"port":8080,"ratio":2.5,"on":true,"cfg":{"a":null}}`,
		`{"a":1,"a":2}`, " \n{\"a\" : [ ]}\t",
		`[]`, `null`, `"x"`, `1`, `true`, ` `, `{`, `{"a":}`, `{"a":1} x`, `{"a":1}}`, `{"a":NaN}`,
		`{"a":1e400}`, `{"a":` + strings.Repeat("9", 2000) + `}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}",
		`{"a":` + strings.Repeat("[", value.MaxDepth+2) + strings.Repeat("]", value.MaxDepth+2) + `}`,
		strings.Repeat("[", 100_000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, err := decodeInputs("", text)
		if text == "" {
			if got != nil || err != nil {
				t.Fatalf("decodeInputs(\"\") = %v, %v; want no inputs", got, err)
			}
			return
		}
		want, werr := value.Decode([]byte(text))
		m, isMap := want.(map[string]any)
		if err != nil {
			if werr == nil && isMap {
				t.Fatalf("decodeInputs rejected a JSON object: %v", err)
			}
			checkBadRequest(t, err, "inputs_json")
			checkBounded(t, err)
			return
		}
		if werr != nil || !isMap {
			t.Fatalf("decodeInputs accepted what value.Decode makes %#v, %v of", want, werr)
		}
		if got == nil || !value.Equal(any(got), any(m)) {
			t.Fatalf("decodeInputs = %#v, want %#v", got, m)
		}
	})
}

// FuzzParseInstanceID checks the parser of every request's instance_id: it
// accepts what uuid.Parse accepts, and a parsed id prints as a string that
// parses back to it; anything else is an InvalidArgument status naming
// instance_id, never a panic.
func FuzzParseInstanceID(f *testing.F) {
	id := "0190f5a4-7b1e-7c3d-9a2b-1c2d3e4f5a6b"
	for _, s := range []string{
		id, strings.ToUpper(id), uuid.Nil.String(), uuid.Max.String(),
		"{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", ""),
		"", id[:35], id + "0", " " + id, id[:8] + "_" + id[9:], "g" + id[1:], "\xff" + id[1:],
		strings.Repeat("a", 36), strings.Repeat("x", 10_000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseInstanceID(s)
		want, werr := uuid.Parse(s)
		if err != nil {
			if werr == nil {
				t.Fatalf("parseInstanceID(%q) rejected what uuid.Parse accepts: %v", s, err)
			}
			if got != uuid.Nil {
				t.Fatalf("parseInstanceID(%q) failed but returned %s", s, got)
			}
			checkBadRequest(t, err, "instance_id")
			checkBounded(t, err)
			return
		}
		if werr != nil || got != want {
			t.Fatalf("parseInstanceID(%q) = %s, uuid.Parse = %s, %v", s, got, want, werr)
		}
		if back, err := parseInstanceID(got.String()); err != nil || back != got {
			t.Fatalf("parseInstanceID(%q) = %s, %v; want %s", got.String(), back, err, got)
		}
	})
}

// TestRequestErrorsAreBounded pins the size bound of request errors for
// inputs far longer than any valid one. The fuzz targets check the bound on
// every input they try.
func TestRequestErrorsAreBounded(t *testing.T) {
	long := strings.Repeat("9", 64<<10)
	t.Run("instance_id", func(t *testing.T) {
		_, err := parseInstanceID(long)
		checkBadRequest(t, err, "instance_id")
		checkBounded(t, err)
	})
	for name, text := range map[string]string{
		"inputs_json/number":        `{"a":` + long + `}`,
		"inputs_json/exponent":      `{"a":1e` + long + `}`,
		"inputs_json/syntax":        `{"` + long + `":1,}`,
		"inputs_json/not_an_object": `["` + long + `"]`,
		"inputs_json/deep":          strings.Repeat("[", 64<<10),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeInputs("", text)
			checkBadRequest(t, err, "inputs_json")
			checkBounded(t, err)
		})
	}
}

// checkBadRequest checks that err is an InvalidArgument status whose message
// and single BadRequest field violation name field.
func checkBadRequest(t *testing.T, err error, field string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("error %v (%T) is not an InvalidArgument status", err, err)
	}
	if !strings.HasPrefix(st.Message(), field+": ") {
		t.Fatalf("message %.200q does not name the field %s", st.Message(), field)
	}
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		if b, ok := d.(*errdetails.BadRequest); ok {
			br = b
		}
	}
	if br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != field ||
		br.GetFieldViolations()[0].GetDescription() == "" {
		t.Fatalf("details %v: want one BadRequest violation of %s", st.Details(), field)
	}
}

// checkBounded checks that the message and details of a request error stay
// within maxRequestErrorBytes. While a known echo is being fixed elsewhere
// (pending names it), an input that breaks the bound is skipped, not failed,
// so that the fuzzer goes on checking the other properties.
func checkBounded(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	size := len(st.Message())
	for _, d := range st.Details() {
		if b, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range b.GetFieldViolations() {
				size = max(size, len(v.GetDescription()))
			}
		}
	}
	if size > maxRequestErrorBytes {
		t.Fatalf("a %d-byte request error (limit %d): %.120q...", size, maxRequestErrorBytes, st.Message())
	}
}
