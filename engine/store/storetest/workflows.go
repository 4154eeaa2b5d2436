package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/robonet/robonet/engine/port"
)

// testRegisterWorkflow: a new version is stored and readable by key and by
// id; registering the same definition again is a no-op returning the row.
func testRegisterWorkflow(t *testing.T, s port.Store) {
	ir := []byte("the IR")
	in := port.WorkflowVersion{Name: "scan", Version: 3, IRHash: hashOf(ir), IR: ir}
	wf, err := s.RegisterWorkflow(ctx(t), in)
	if err != nil {
		t.Fatalf("RegisterWorkflow: %v", err)
	}
	if wf.ID <= 0 || wf.Name != "scan" || wf.Version != 3 || wf.IRHash != in.IRHash || !bytes.Equal(wf.IR, ir) || wf.CreatedAt.IsZero() {
		t.Fatalf("RegisterWorkflow returned %+v", wf)
	}

	again, err := s.RegisterWorkflow(ctx(t), in)
	if err != nil {
		t.Fatalf("registering the same definition again: %v", err)
	}
	if again.ID != wf.ID || !again.CreatedAt.Equal(wf.CreatedAt) {
		t.Fatalf("re-registration returned %+v, want the stored row %+v", again, wf)
	}

	byKey, err := s.GetWorkflow(ctx(t), "scan", 3)
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	byID, err := s.GetWorkflowByID(ctx(t), wf.ID)
	if err != nil {
		t.Fatalf("GetWorkflowByID: %v", err)
	}
	for _, got := range []port.WorkflowVersion{byKey, byID} {
		if got.ID != wf.ID || got.Name != wf.Name || got.Version != wf.Version || got.IRHash != wf.IRHash ||
			!bytes.Equal(got.IR, ir) || !got.CreatedAt.Equal(wf.CreatedAt) {
			t.Fatalf("read back %+v, want %+v", got, wf)
		}
	}

	// Another version of the same name is a separate row.
	v4 := register(t, s, "scan", 4)
	if v4.ID == wf.ID {
		t.Fatalf("version 4 got the id of version 3")
	}
}

// testRegisterWorkflowConflict: versions are immutable.
func testRegisterWorkflowConflict(t *testing.T, s port.Store) {
	wf := register(t, s, "scan", 1)
	changed := []byte("a changed IR")
	_, err := s.RegisterWorkflow(ctx(t), port.WorkflowVersion{Name: "scan", Version: 1, IRHash: hashOf(changed), IR: changed})
	wantErr(t, "registering a changed definition", err, port.ErrVersionConflict)

	got, err := s.GetWorkflow(ctx(t), "scan", 1)
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	if got.IRHash != wf.IRHash || !bytes.Equal(got.IR, wf.IR) {
		t.Fatalf("the conflicting registration changed the stored version: %+v", got)
	}
}

// testGetWorkflowNotFound: unknown versions are ErrNotFound.
func testGetWorkflowNotFound(t *testing.T, s port.Store) {
	wf := register(t, s, "scan", 1)
	_, err := s.GetWorkflow(ctx(t), "scan", 2)
	wantErr(t, "GetWorkflow of an unknown version", err, port.ErrNotFound)
	_, err = s.GetWorkflow(ctx(t), "nope", 1)
	wantErr(t, "GetWorkflow of an unknown name", err, port.ErrNotFound)
	_, err = s.GetWorkflowByID(ctx(t), wf.ID+1000)
	wantErr(t, "GetWorkflowByID of an unknown id", err, port.ErrNotFound)
}

// testListWorkflows: names sorted (byte order), newest version first within
// a name; filter by name; limit.
func testListWorkflows(t *testing.T, s port.Store) {
	for _, r := range []struct {
		name    string
		version uint32
	}{{"b", 1}, {"a", 1}, {"b", 3}, {"B", 1}, {"a", 2}, {"b", 2}} {
		register(t, s, r.name, r.version)
	}
	list := func(f port.WorkflowFilter) string {
		t.Helper()
		got, err := s.ListWorkflows(ctx(t), f)
		if err != nil {
			t.Fatalf("ListWorkflows(%+v): %v", f, err)
		}
		var out string
		for _, wf := range got {
			out += fmt.Sprintf("%s%d ", wf.Name, wf.Version)
		}
		return out
	}
	if got, want := list(port.WorkflowFilter{}), "B1 a2 a1 b3 b2 b1 "; got != want {
		t.Errorf("ListWorkflows() = %q, want %q", got, want)
	}
	if got, want := list(port.WorkflowFilter{Name: "b"}), "b3 b2 b1 "; got != want {
		t.Errorf("ListWorkflows(b) = %q, want %q", got, want)
	}
	if got, want := list(port.WorkflowFilter{Limit: 2}), "B1 a2 "; got != want {
		t.Errorf("ListWorkflows(limit 2) = %q, want %q", got, want)
	}
	if got, want := list(port.WorkflowFilter{Name: "zzz"}), ""; got != want {
		t.Errorf("ListWorkflows(zzz) = %q, want nothing", got)
	}
}
