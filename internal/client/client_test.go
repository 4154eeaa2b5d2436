package client

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestWriteDataYAML(t *testing.T) {
	v := InstanceView{
		ID: "i", Workflow: "w", Version: 1, State: "COMPLETE",
		Outputs: []byte(`{"z": 1, "a": 1.0, "list": [true, null, "s"], "nested": {"b": 2.5e3}}`),
		Tasks:   []TaskView{},
	}
	var buf bytes.Buffer
	if err := WriteData(&buf, FormatYAML, v); err != nil {
		t.Fatal(err)
	}
	want := `instance_id: i
workflow: w
version: 1
state: COMPLETE
outputs:
  z: 1
  a: 1.0
  list:
    - true
    - null
    - s
  nested:
    b: 2.5e3
progress:
  total: 0
  done: 0
  running: 0
  failed: 0
  skipped: 0
tasks: []
`
	if buf.String() != want {
		t.Errorf("yaml:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"table": FormatTable, "JSON": FormatJSON, "yaml": FormatYAML, "text": FormatTable} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) succeeded")
	}
}

func TestDescribe(t *testing.T) {
	st, _ := status.New(codes.InvalidArgument, "the workflow spec does not compile").WithDetails(
		&robonetv1.SpecErrors{Errors: []*robonetv1.SpecError{{Text: `a.yaml:3:5: task "t": needs[0]: unknown task`}}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "inputs", Description: `missing required input "x"`}}},
	)
	got := Describe(st.Err(), "127.0.0.1:7233")
	want := "the workflow spec does not compile (INVALID_ARGUMENT)\n" +
		"  a.yaml:3:5: task \"t\": needs[0]: unknown task\n" +
		"  inputs: missing required input \"x\""
	if got != want {
		t.Errorf("Describe:\n%s\nwant:\n%s", got, want)
	}
	if got := Describe(status.Error(codes.Unavailable, "connection refused"), "h:1"); !strings.HasPrefix(got, "cannot reach robonode at h:1") {
		t.Errorf("Describe(Unavailable) = %q", got)
	}
	if got := Describe(errors.New("plain"), "h:1"); got != "plain" {
		t.Errorf("Describe(plain) = %q", got)
	}
	if got := codeName(codes.FailedPrecondition); got != "FAILED_PRECONDITION" {
		t.Errorf("codeName = %q", got)
	}
}

func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf)
	in := &robonetv1.Instance{Progress: &robonetv1.InstanceProgress{Total: 3, Done: 1, Running: 2, Unexpanded: 1}}
	p.Update(in)
	p.Update(in) // unchanged: no line
	in.Progress.Done, in.Progress.Running, in.Progress.Skipped, in.Progress.Unexpanded = 3, 0, 1, 0
	p.Update(in)
	p.Finish()
	want := "progress: 1/3+ done, 2 running, 0 failed\nprogress: 3/3 done, 0 running, 0 failed, 1 skipped\n"
	if buf.String() != want {
		t.Errorf("progress lines:\n%s\nwant:\n%s", buf.String(), want)
	}
}
