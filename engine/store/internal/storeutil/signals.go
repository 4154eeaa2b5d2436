package storeutil

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// SignalBatch is the decision of RecordSignals, free of I/O, so that both
// adapters refuse, deduplicate and count a batch alike. An adapter, inside
// its transaction:
//
//  1. reads, for the batch's instances (IDs: sorted, the lock order), the
//     wake counter of each live one (it has a queue row), then the status
//     of the others, the signals that hold the keys of live ones (Keys) and
//     the number of unconsumed signals of live ones with a cap (Capped);
//  2. gives them to Plan, which returns the signals to insert, in order,
//     and how far each instance's wake counter goes up;
//  3. inserts those signals in that order, bumps the counters, and hands
//     the Seqs and creation times to Recorded, which returns the outcomes.
//
// Plan walks the batch in order as RecordSignal would one call after the
// other: a key held before or taken by an earlier signal of the batch is
// Existing; the cap counts the signals the batch inserted before; each
// signal inserted adds one to its instance's wake counter.
type SignalBatch struct {
	sigs   []port.NewSignal // prepared (PrepareSignal); invalid ones have out[i].Err
	out    []port.SignalOutcome
	insert []int // indexes of the signals Plan inserts, in order
	dupOf  []int // for an Existing outcome whose record is inserted by this batch: the index of that signal; else -1
}

// SignalState is what an adapter read for Plan.
type SignalState struct {
	Wake    map[uuid.UUID]int64             // the live instances' wake counters
	Status  map[uuid.UUID]string            // the status of instances not live (absent: unknown)
	Keyed   map[SignalKey]port.SignalRecord // the signals that hold one of Keys
	Pending map[uuid.UUID]int               // unconsumed signals of the Capped instances
}

// SignalKey is an idempotency key of an instance's signal.
type SignalKey struct {
	InstanceID uuid.UUID
	Key        string
}

// WakeBump raises an instance's wake counter by N.
type WakeBump struct {
	InstanceID uuid.UUID
	N          int64
}

// NewSignalBatch validates sigs (PrepareSignal): an invalid one gets its
// error as its outcome and takes no further part.
func NewSignalBatch(sigs []port.NewSignal) *SignalBatch {
	b := &SignalBatch{
		sigs:  make([]port.NewSignal, len(sigs)),
		out:   make([]port.SignalOutcome, len(sigs)),
		dupOf: make([]int, len(sigs)),
	}
	for i, s := range sigs {
		b.sigs[i], b.out[i].Err = PrepareSignal(s)
		b.dupOf[i] = -1
	}
	return b
}

// valid says whether signal i passed validation.
func (b *SignalBatch) valid(i int) bool { return b.out[i].Err == nil }

// Empty says the batch has no valid signal: there is nothing to read or
// write, and Outcomes is the answer.
func (b *SignalBatch) Empty() bool {
	for i := range b.sigs {
		if b.valid(i) {
			return false
		}
	}
	return true
}

// IDs returns the distinct instances of the valid signals, sorted by their
// bytes (the order of uuid in Postgres), the order to lock them in.
func (b *SignalBatch) IDs() []uuid.UUID {
	var ids []uuid.UUID
	for i, s := range b.sigs {
		if b.valid(i) {
			ids = append(ids, s.InstanceID)
		}
	}
	slices.SortFunc(ids, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
	return slices.Compact(ids)
}

// Keys returns the distinct idempotency keys of the valid signals of live
// instances (those in wake: SignalState.Wake).
func (b *SignalBatch) Keys(wake map[uuid.UUID]int64) []SignalKey {
	var keys []SignalKey
	seen := make(map[SignalKey]bool)
	for i, s := range b.sigs {
		k := SignalKey{s.InstanceID, s.IdempotencyKey}
		if _, live := wake[k.InstanceID]; live && b.valid(i) && k.Key != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// Capped returns the distinct live instances (those in wake) of the valid
// signals with a MaxPending, whose unconsumed signals Plan counts.
func (b *SignalBatch) Capped(wake map[uuid.UUID]int64) []uuid.UUID {
	var ids []uuid.UUID
	seen := make(map[uuid.UUID]bool)
	for i, s := range b.sigs {
		if _, live := wake[s.InstanceID]; live && b.valid(i) && s.MaxPending > 0 && !seen[s.InstanceID] {
			seen[s.InstanceID] = true
			ids = append(ids, s.InstanceID)
		}
	}
	return ids
}

// Plan decides every valid signal on st and returns the signals to insert,
// in order, and the wake bumps, one per instance that gets a signal, in
// the order of IDs.
func (b *SignalBatch) Plan(st SignalState) (inserts []port.NewSignal, bumps []WakeBump) {
	wake := make(map[uuid.UUID]int64, len(st.Wake))
	pending := make(map[uuid.UUID]int, len(st.Pending))
	added := make(map[SignalKey]int) // keys the batch inserts: the index of the signal
	for i, s := range b.sigs {
		if !b.valid(i) {
			continue
		}
		id := s.InstanceID
		w, live := st.Wake[id]
		if !live {
			b.out[i].Err = NotLive(signalOp(s), id, st.Status[id])
			continue
		}
		if n, ok := wake[id]; ok {
			w = n
		}
		if s.IdempotencyKey != "" {
			k := SignalKey{id, s.IdempotencyKey}
			if rec, ok := st.Keyed[k]; ok {
				b.out[i] = port.SignalOutcome{Record: rec, Wake: w, Existing: true}
				continue
			}
			if j, ok := added[k]; ok {
				b.out[i] = port.SignalOutcome{Wake: w, Existing: true}
				b.dupOf[i] = j
				continue
			}
			added[k] = i
		}
		n, ok := pending[id]
		if !ok {
			n = st.Pending[id]
		}
		if s.MaxPending > 0 && n >= s.MaxPending {
			b.out[i].Err = fmt.Errorf("%s instance %s: %d unconsumed signals, the limit: %w", signalOp(s), id, n, port.ErrTooManySignals)
			if s.IdempotencyKey != "" {
				delete(added, SignalKey{id, s.IdempotencyKey})
			}
			continue
		}
		pending[id] = n + 1
		wake[id] = w + 1
		b.out[i] = port.SignalOutcome{Record: port.SignalRecord{InstanceID: id, Name: s.Name, Payload: s.Payload,
			IdempotencyKey: s.IdempotencyKey}, Wake: w + 1}
		b.insert = append(b.insert, i)
		inserts = append(inserts, s)
	}
	for _, id := range b.IDs() {
		if w, ok := wake[id]; ok {
			bumps = append(bumps, WakeBump{InstanceID: id, N: w - st.Wake[id]})
		}
	}
	return inserts, bumps
}

// Recorded takes the Seq and creation time of every signal Plan inserted,
// in its order, and returns the outcomes, one per signal of the batch.
func (b *SignalBatch) Recorded(seqs []int64, created []time.Time) ([]port.SignalOutcome, error) {
	if len(seqs) != len(b.insert) || len(created) != len(b.insert) {
		return nil, fmt.Errorf("recorded %d signals (%d times) of %d inserted", len(seqs), len(created), len(b.insert))
	}
	for k, i := range b.insert {
		b.out[i].Record.Seq, b.out[i].Record.CreatedAt = seqs[k], created[k]
	}
	for i, j := range b.dupOf {
		if j >= 0 {
			b.out[i].Record = b.out[j].Record
		}
	}
	return b.out, nil
}

// Outcomes returns the outcomes as they stand: the answer for an Empty
// batch.
func (b *SignalBatch) Outcomes() []port.SignalOutcome { return b.out }

// Fail wraps an error of the whole call with what the batch was.
func (b *SignalBatch) Fail(err error) error {
	if len(b.sigs) == 1 {
		s := b.sigs[0]
		return fmt.Errorf("%s instance %s: %w", signalOp(s), s.InstanceID, err)
	}
	return fmt.Errorf("record %d signals: %w", len(b.sigs), err)
}

// signalOp names the recording of s in errors.
func signalOp(s port.NewSignal) string { return fmt.Sprintf("record signal %q for", s.Name) }

// OneSignal answers RecordSignal from RecordSignals of one signal.
func OneSignal(out []port.SignalOutcome, err error) (port.SignalRecord, int64, bool, error) {
	switch {
	case err != nil:
		return port.SignalRecord{}, 0, false, err
	case len(out) != 1:
		return port.SignalRecord{}, 0, false, fmt.Errorf("record signal: %d outcomes for one signal", len(out))
	case out[0].Err != nil:
		return port.SignalRecord{}, 0, false, out[0].Err
	}
	return out[0].Record, out[0].Wake, out[0].Existing, nil
}
