package postgres

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// What becomes of each instance of a batch, once queueSQL has inserted
// some: an inserted one is as the statement says; one whose key an earlier
// one of the batch has stands for it; one whose key an instance stored
// before holds stands for that one, when it is of the same version.
func TestQueuedOutcomes(t *testing.T) {
	a, b, c, d, held := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	insts := []port.NewInstance{
		{ID: a, WorkflowVersionID: 1},
		{ID: b, WorkflowVersionID: 1, IdempotencyKey: "k1"},
		{ID: c, WorkflowVersionID: 1, IdempotencyKey: "k1"}, // an earlier one of the batch has it
		{ID: d, WorkflowVersionID: 1, IdempotencyKey: "k2"}, // stored before
	}
	dup := []int{-1, -1, 1, -1}
	fresh := map[uuid.UUID]port.Queued{a: {ID: a}, b: {ID: b, Claimed: true}}
	if got := takenKeys(insts, dup, fresh); len(got) != 1 || got[0] != "k2" {
		t.Fatalf("taken keys %q, want [k2]", got)
	}
	holders := map[string]keyHolder{"k2": {id: held, version: 1}}
	out, err := queuedOutcomes(insts, dup, fresh, holders)
	if err != nil {
		t.Fatal(err)
	}
	want := []port.Queued{{ID: a}, {ID: b, Claimed: true}, {ID: b, Existing: true}, {ID: held, Existing: true}}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("instance %d: %+v, want %+v", i, out[i], want[i])
		}
	}

	holders["k2"] = keyHolder{id: held, version: 2}
	if _, err := queuedOutcomes(insts, dup, fresh, holders); !errors.Is(err, port.ErrIdempotencyConflict) {
		t.Errorf("a key held for another version: %v, want ErrIdempotencyConflict", err)
	}
	delete(holders, "k2")
	if _, err := queuedOutcomes(insts, dup, fresh, holders); err == nil || errors.Is(err, port.ErrIdempotencyConflict) {
		t.Errorf("a key nobody inserted nor holds: %v, want an error to retry", err)
	}
}
