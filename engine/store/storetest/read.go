package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// testGetInstance: every field of the record, through the life of an
// instance; unknown ids are ErrNotFound.
func testGetInstance(t *testing.T, s port.Store) {
	wf := register(t, s, "scan", 7)
	in := newInstance(wf)
	in.IdempotencyKey = "key-1"
	before := time.Now().Add(-time.Minute) // tolerate clock skew with the database
	queue(t, s, in)

	rec := get(t, s, in.ID)
	if rec.ID != in.ID || rec.WorkflowVersionID != wf.ID || rec.WorkflowName != "scan" || rec.WorkflowVersion != 7 ||
		rec.Status != port.StatePending || !bytes.Equal(rec.Inputs, in.Inputs) || !bytes.Equal(rec.State, in.State) ||
		rec.Output != nil || rec.Error != "" || rec.IdempotencyKey != "key-1" || rec.CreatedAt.Before(before) ||
		rec.StartedAt != nil || rec.FinishedAt != nil || rec.CancelRequested {
		t.Fatalf("queued record: %+v", rec)
	}

	a := newOwner(1)
	a.mustClaim(t, s, longLease, in.ID)
	rec = get(t, s, in.ID)
	if rec.Status != port.StateRunning || rec.StartedAt == nil || rec.StartedAt.Before(rec.CreatedAt) {
		t.Fatalf("running record: %+v", rec)
	}
	if err := a.complete(t, s, port.Completion{InstanceID: in.ID, Status: port.StateComplete, Output: []byte(`{"ok":true}`)}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	done := get(t, s, in.ID)
	if done.Status != port.StateComplete || string(done.Output) != `{"ok":true}` || done.FinishedAt == nil ||
		done.FinishedAt.Before(*rec.StartedAt) || !done.StartedAt.Equal(*rec.StartedAt) || !done.CreatedAt.Equal(rec.CreatedAt) {
		t.Fatalf("finished record: %+v", done)
	}

	_, err := s.GetInstance(ctx(t), uuid.New())
	wantErr(t, "GetInstance of an unknown id", err, port.ErrNotFound)
}

// testListInstancesFilters: by workflow name and by status; records match
// GetInstance.
func testListInstancesFilters(t *testing.T, s port.Store) {
	scan1, scan2, other := register(t, s, "scan", 1), register(t, s, "scan", 2), register(t, s, "other", 1)
	released := queue(t, s, newInstance(scan1))[0] // claimed, then released: running
	running := queue(t, s, newInstance(scan2))[0]
	failed := queue(t, s, newInstance(other))[0]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, released, running, failed)
	if err := a.complete(t, s, port.Completion{InstanceID: failed, Status: port.StateFailed, Error: "boom"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := s.ReleaseLeases(ctx(t), a.id, []uuid.UUID{released}); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	fresh := queue(t, s, newInstance(scan1))[0] // status queued

	list := func(f port.InstanceFilter) []uuid.UUID {
		t.Helper()
		page, err := s.ListInstances(ctx(t), f)
		if err != nil {
			t.Fatalf("ListInstances(%+v): %v", f, err)
		}
		if page.NextPageToken != "" {
			t.Fatalf("ListInstances(%+v) has a next page", f)
		}
		ids := make([]uuid.UUID, len(page.Instances))
		for i, rec := range page.Instances {
			ids[i] = rec.ID
			if rec.Inputs != nil || rec.State != nil || rec.Output != nil {
				t.Fatalf("listed record of %s carries its inputs, snapshot or output (%d, %d, %d bytes); a listing reads none",
					rec.ID, len(rec.Inputs), len(rec.State), len(rec.Output))
			}
			want := get(t, s, rec.ID)
			want.Inputs, want.State, want.Output = nil, nil, nil
			if !sameRecord(rec, want) {
				t.Fatalf("listed record %+v differs from GetInstance %+v (but for inputs, snapshot and output)", rec, want)
			}
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		f    port.InstanceFilter
		want []uuid.UUID
	}{
		{"all", port.InstanceFilter{}, []uuid.UUID{released, running, failed, fresh}},
		{"by name", port.InstanceFilter{WorkflowName: "scan"}, []uuid.UUID{released, running, fresh}},
		{"by status", port.InstanceFilter{Statuses: []port.InstanceState{port.StatePending}}, []uuid.UUID{fresh}},
		{"by statuses", port.InstanceFilter{Statuses: []port.InstanceState{port.StateRunning, port.StateFailed}}, []uuid.UUID{released, running, failed}},
		{"by name and status", port.InstanceFilter{WorkflowName: "other", Statuses: []port.InstanceState{port.StateRunning}}, nil},
		{"unknown name", port.InstanceFilter{WorkflowName: "nope"}, nil},
	} {
		if got := list(tc.f); !sameIDs(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}

	if _, err := s.ListInstances(ctx(t), port.InstanceFilter{Statuses: []port.InstanceState{"bogus"}}); err == nil {
		t.Errorf("an unknown status filter was accepted")
	}
	if _, err := s.ListInstances(ctx(t), port.InstanceFilter{PageToken: "not a token"}); !errors.Is(err, port.ErrInvalidPageToken) {
		t.Errorf("a bad page token: %v, want an error wrapping port.ErrInvalidPageToken", err)
	}
}

// testListInstancesPaging: pages cover every instance once, newest first
// by (created, id), with ties inside one batch.
func testListInstancesPaging(t *testing.T, s port.Store) {
	wf := register(t, s, "wf", 1)
	var all []uuid.UUID
	for range 3 { // three batches of three: equal creation times within a batch
		all = append(all, queue(t, s, newInstance(wf), newInstance(wf), newInstance(wf))...)
	}
	var (
		seen  []port.InstanceRecord
		token string
		pages int
	)
	for {
		page, err := s.ListInstances(ctx(t), port.InstanceFilter{Limit: 2, PageToken: token})
		if err != nil {
			t.Fatalf("ListInstances page %d: %v", pages, err)
		}
		pages++
		if len(page.Instances) > 2 {
			t.Fatalf("page %d has %d instances, limit 2", pages, len(page.Instances))
		}
		seen = append(seen, page.Instances...)
		if page.NextPageToken == "" {
			break
		}
		if pages > 10 {
			t.Fatalf("paging does not end")
		}
		token = page.NextPageToken
	}
	ids := make([]uuid.UUID, len(seen))
	for i, rec := range seen {
		ids[i] = rec.ID
		if i == 0 {
			continue
		}
		prev := seen[i-1]
		if rec.CreatedAt.After(prev.CreatedAt) ||
			(rec.CreatedAt.Equal(prev.CreatedAt) && bytes.Compare(rec.ID[:], prev.ID[:]) >= 0) {
			t.Fatalf("instance %d (%s, %s) is not older than instance %d (%s, %s)", i, rec.CreatedAt, rec.ID, i-1, prev.CreatedAt, prev.ID)
		}
	}
	if !sameIDs(ids, all) {
		t.Fatalf("pages listed %v, want each of %v once", ids, all)
	}
	// The last batch comes first (unless two batches got the same
	// creation time, which the order above already allows).
	if !sameIDs(ids[:3], all[6:]) && !seen[2].CreatedAt.Equal(seen[3].CreatedAt) {
		t.Fatalf("the newest batch is not listed first")
	}
}

// testTaskHistory: every attempt in recording order, final results of a
// completion last; an unknown instance is ErrNotFound, a fresh one empty.
func testTaskHistory(t *testing.T, s port.Store) {
	ids := queueN(t, s, 2)
	id, idle := ids[0], ids[1]
	a := newOwner(1)
	a.mustClaim(t, s, longLease, ids...)
	want := []port.ActionResult{result(id, "b", 1, false), result(id, "a", 1, true)}
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: want})
	want = append(want, result(id, "b", 2, true))
	a.mustPersist(t, s, port.Progress{InstanceID: id, Results: want[2:]})
	final := result(id, "c", 1, true)
	if err := a.complete(t, s, port.Completion{InstanceID: id, Status: port.StateComplete, Output: []byte("1"),
		Results: []port.ActionResult{final}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	want = append(want, final)
	checkResults(t, "history", history(t, s, id), want)

	if h := history(t, s, idle); len(h) != 0 {
		t.Fatalf("history of an instance without results: %v", keys(h))
	}
	_, err := s.TaskHistory(ctx(t), uuid.New())
	wantErr(t, "TaskHistory of an unknown instance", err, port.ErrNotFound)
}

// sameRecord compares two records field by field.
func sameRecord(a, b port.InstanceRecord) bool {
	eqTime := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.ID == b.ID && a.WorkflowVersionID == b.WorkflowVersionID && a.WorkflowName == b.WorkflowName &&
		a.WorkflowVersion == b.WorkflowVersion && a.Status == b.Status && bytes.Equal(a.Inputs, b.Inputs) &&
		bytes.Equal(a.State, b.State) && bytes.Equal(a.Output, b.Output) && a.Error == b.Error &&
		a.IdempotencyKey == b.IdempotencyKey && a.CreatedAt.Equal(b.CreatedAt) && eqTime(a.StartedAt, b.StartedAt) &&
		eqTime(a.FinishedAt, b.FinishedAt) && a.CancelRequested == b.CancelRequested
}
