// Package storeutil holds the small pieces of logic that every adapter of
// port.Store shares, so that the Postgres and SQLite adapters cannot drift
// apart on them: input validation, merging a group commit that names one
// instance twice, and the keyset page token of ListInstances.
package storeutil

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// Defaults for the limits the port leaves open.
const (
	DefaultWorkflowLimit = 100 // WorkflowFilter.Limit of 0
	DefaultInstanceLimit = port.DefaultInstanceLimit
	DefaultSweepLimit    = 1000 // SweepRequest.Limit of 0
	MaxListLimit         = 1000 // upper bound on any list limit
)

// ErrInvalidPageToken is returned (wrapped) by DecodePageToken for a token
// that this store did not produce; it is the port's port.ErrInvalidPageToken.
var ErrInvalidPageToken = port.ErrInvalidPageToken

// NonNil returns b, or an empty slice when b is nil, for NOT NULL columns
// (drivers encode a nil []byte as NULL).
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Term converts a Raft term to the signed 64-bit integer both databases
// store.
func Term(term uint64) (int64, error) {
	if term > math.MaxInt64 {
		return 0, fmt.Errorf("term %d does not fit in a signed 64-bit integer", term)
	}
	return int64(term), nil
}

// CheckClaim validates a ClaimRequest.
func CheckClaim(req port.ClaimRequest) error {
	switch {
	case req.Owner == uuid.Nil:
		return errors.New("claim: owner is required")
	case req.Lease <= 0:
		return fmt.Errorf("claim: lease must be positive, got %s", req.Lease)
	case req.Limit <= 0:
		return fmt.Errorf("claim: limit must be positive, got %d", req.Limit)
	}
	for _, p := range req.Partitions {
		if err := CheckPartition(p); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
	}
	_, err := Term(req.Term)
	return err
}

// CheckPartition rejects a partition number outside [0, MaxPartitions).
func CheckPartition(p int) error {
	if p < 0 || p >= port.MaxPartitions {
		return fmt.Errorf("partition %d is outside [0, %d)", p, port.MaxPartitions)
	}
	return nil
}

// Epoch converts a partition epoch to the signed 64-bit integer both
// databases store.
func Epoch(epoch uint64) (int64, error) {
	if epoch > math.MaxInt64 {
		return 0, fmt.Errorf("epoch %d does not fit in a signed 64-bit integer", epoch)
	}
	return int64(epoch), nil
}

// CheckFence validates a FenceRequest and returns its partitions in
// ascending order, the order in which adapters lock and write them (two
// fences of overlapping sets then cannot deadlock).
func CheckFence(req port.FenceRequest) ([]int, error) {
	if req.Owner == uuid.Nil {
		return nil, errors.New("fence partitions: owner is required")
	}
	parts := make([]int, 0, len(req.Epochs))
	for p, epoch := range req.Epochs {
		if err := CheckPartition(p); err != nil {
			return nil, fmt.Errorf("fence partitions: %w", err)
		}
		if _, err := Epoch(epoch); err != nil {
			return nil, fmt.Errorf("fence partitions: partition %d: %w", p, err)
		}
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return parts, nil
}

// FenceAction is what FencePartitions does with one partition.
type FenceAction int

// The outcomes of JudgeFence.
const (
	FenceTake  FenceAction = iota // no row, or a lower epoch: write owner and epoch
	FenceKeep                     // the same epoch of the same owner: a retry, leave the row
	FenceStale                    // a higher epoch, or the same of another owner: refuse the call
)

// JudgeFence decides what fencing a partition at epoch for owner does,
// given its stored row (stored nil: none).
func JudgeFence(stored *port.PartitionOwner, owner uuid.UUID, epoch uint64) FenceAction {
	switch {
	case stored == nil || stored.Epoch < epoch:
		return FenceTake
	case stored.Epoch == epoch && stored.Owner == owner:
		return FenceKeep
	default:
		return FenceStale
	}
}

// ErrStaleEpoch wraps port.ErrStaleEpoch with the partition, its stored
// owner and epoch, and the epoch asked for.
func ErrStaleEpoch(stored port.PartitionOwner, epoch uint64) error {
	return fmt.Errorf("partition %d is at epoch %d of owner %s, asked for %d: %w",
		stored.Partition, stored.Epoch, stored.Owner, epoch, port.ErrStaleEpoch)
}

// CheckRefresh validates a LeaseRefresh.
func CheckRefresh(req port.LeaseRefresh) error {
	switch {
	case req.Owner == uuid.Nil:
		return errors.New("refresh leases: owner is required")
	case req.Lease <= 0:
		return fmt.Errorf("refresh leases: lease must be positive, got %s", req.Lease)
	}
	_, err := Term(req.Term)
	return err
}

// PrepareInstances validates a QueueInstances batch, gives an ID to every
// instance that has none and fills a zero ScheduledAt with now (due at
// once). It returns a copy; the caller's slice is not modified.
func PrepareInstances(in []port.NewInstance, now time.Time) ([]port.NewInstance, error) {
	out := make([]port.NewInstance, len(in))
	seen := make(map[uuid.UUID]bool, len(in))
	for i, inst := range in {
		if inst.ID == uuid.Nil {
			inst.ID = uuid.New()
		}
		if seen[inst.ID] {
			return nil, fmt.Errorf("queue instances: instance %s appears twice in the batch", inst.ID)
		}
		seen[inst.ID] = true
		if inst.WorkflowVersionID <= 0 {
			return nil, fmt.Errorf("queue instances: instance %s: workflow version id is required", inst.ID)
		}
		if err := CheckPartition(inst.Partition); err != nil {
			return nil, fmt.Errorf("queue instances: instance %s: %w", inst.ID, err)
		}
		if inst.ScheduledAt.IsZero() {
			inst.ScheduledAt = now
		}
		if c := inst.Claim; c != nil {
			if err := CheckClaim(port.ClaimRequest{Owner: c.Owner, Term: c.Term, Lease: c.Lease, Limit: 1}); err != nil {
				return nil, fmt.Errorf("queue instances: instance %s: %w", inst.ID, err)
			}
		}
		inst.Inputs = NonNil(inst.Inputs)
		inst.State = NonNil(inst.State)
		out[i] = inst
	}
	return out, nil
}

// Merged is a group commit with at most one entry per instance.
type Merged struct {
	// Items has one entry per distinct instance, in order of first
	// appearance. Results and consumed signals are concatenated in input
	// order; State, ScheduledAt and Park are the last non-nil values
	// given.
	Items []port.Progress
	// Index maps every input position to its position in Items.
	Index []int
}

// MergeProgress collapses a PersistProgress batch that names an instance
// more than once into one entry per instance. Applying the merged entry is
// equivalent to applying the originals in order (results append, the last
// snapshot and schedule win), and it lets an adapter write each instance
// with one row per table. Entries for one instance must name the same
// owner; results must belong to the instance they are filed under.
func MergeProgress(batch []port.Progress) (Merged, error) {
	m := Merged{Index: make([]int, len(batch))}
	pos := make(map[uuid.UUID]int, len(batch))
	for i, p := range batch {
		if p.InstanceID == uuid.Nil || p.Owner == uuid.Nil {
			return Merged{}, fmt.Errorf("progress %d: instance id and owner are required", i)
		}
		for _, r := range p.Results {
			if err := checkResult(p.InstanceID, r); err != nil {
				return Merged{}, fmt.Errorf("progress %d: %w", i, err)
			}
		}
		j, ok := pos[p.InstanceID]
		if !ok {
			pos[p.InstanceID] = len(m.Items)
			m.Index[i] = len(m.Items)
			p.Results = append([]port.ActionResult(nil), p.Results...)
			p.ConsumedSignals = append([]port.SignalUse(nil), p.ConsumedSignals...)
			m.Items = append(m.Items, p)
			continue
		}
		m.Index[i] = j
		cur := &m.Items[j]
		if cur.Owner != p.Owner {
			return Merged{}, fmt.Errorf("progress %d: instance %s appears with two owners in one batch", i, p.InstanceID)
		}
		cur.Results = append(cur.Results, p.Results...)
		if p.State != nil {
			cur.State = p.State
		}
		if p.ScheduledAt != nil {
			cur.ScheduledAt = p.ScheduledAt
		}
		cur.Gathering = cur.Gathering || p.Gathering
		cur.ConsumedSignals = append(cur.ConsumedSignals, p.ConsumedSignals...)
		if p.Park != nil {
			cur.Park = p.Park
		}
	}
	return m, nil
}

// Expand maps per-item outcomes back to one outcome per input entry.
func (m Merged) Expand(outcomes []error) []error {
	out := make([]error, len(m.Index))
	for i, j := range m.Index {
		out[i] = outcomes[j]
	}
	return out
}

// CheckCompletions validates a CompleteInstances batch: terminal statuses,
// and each instance at most once (an instance completes once).
func CheckCompletions(batch []port.Completion) error {
	seen := make(map[uuid.UUID]bool, len(batch))
	for i, c := range batch {
		if c.InstanceID == uuid.Nil || c.Owner == uuid.Nil {
			return fmt.Errorf("completion %d: instance id and owner are required", i)
		}
		if !c.Status.Terminal() {
			return fmt.Errorf("completion %d: instance %s: status %q is not terminal", i, c.InstanceID, c.Status)
		}
		if seen[c.InstanceID] {
			return fmt.Errorf("completion %d: instance %s appears twice in the batch", i, c.InstanceID)
		}
		seen[c.InstanceID] = true
		for _, r := range c.Results {
			if err := checkResult(c.InstanceID, r); err != nil {
				return fmt.Errorf("completion %d: %w", i, err)
			}
		}
	}
	return nil
}

func checkResult(instance uuid.UUID, r port.ActionResult) error {
	if r.InstanceID != uuid.Nil && r.InstanceID != instance {
		return fmt.Errorf("result %s#%d belongs to instance %s, filed under %s", r.ExecutionID, r.Attempt, r.InstanceID, instance)
	}
	if r.ExecutionID == "" {
		return fmt.Errorf("result for instance %s has no execution id", instance)
	}
	return nil
}

// Far is the due time of a parked instance without a deadline
// (Park.Until zero) where the database has no infinity (SQLite): the
// first of January 9999, UTC.
var Far = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// PrepareSignal validates a signal to record and returns it with a nil
// payload as JSON null (the column is NOT NULL).
func PrepareSignal(s port.NewSignal) (port.NewSignal, error) {
	switch {
	case s.InstanceID == uuid.Nil:
		return s, errors.New("signal: instance id is required")
	case s.Name == "":
		return s, fmt.Errorf("signal for instance %s: name is required", s.InstanceID)
	}
	if s.Payload == nil {
		s.Payload = []byte("null")
	}
	return s, nil
}

// NotLive is the error of a client write (RecordSignal, SetPaused) on an
// instance that has no queue row: ErrNotFound, with the status it has
// ("" for an unknown instance), as RequestCancel words it.
func NotLive(op string, id uuid.UUID, status string) error {
	if status == "" {
		return fmt.Errorf("%s instance %s: %w", op, id, port.ErrNotFound)
	}
	return fmt.Errorf("%s instance %s: already %s: %w", op, id, status, port.ErrNotFound)
}

// CheckReopen validates a ReopenRequest.
func CheckReopen(req port.ReopenRequest) error {
	if req.ID == uuid.Nil {
		return errors.New("reopen: instance id is required")
	}
	return CheckPartition(req.Partition)
}

// ReopenRefused is the error of ReopenInstance for an instance in status
// (the status it has; "" for an unknown instance).
func ReopenRefused(id uuid.UUID, status port.InstanceState) error {
	switch status {
	case "":
		return fmt.Errorf("reopen instance %s: %w", id, port.ErrNotFound)
	case port.StateComplete:
		return fmt.Errorf("reopen instance %s: %w", id, port.ErrNotRetryable)
	default:
		return fmt.Errorf("reopen instance %s: it is %s: %w", id, status, port.ErrInstanceLive)
	}
}

// ErrOwnershipLost wraps port.ErrOwnershipLost with the instance id.
func ErrOwnershipLost(id uuid.UUID) error {
	return fmt.Errorf("instance %s: %w", id, port.ErrOwnershipLost)
}

// ListLimit applies a default and an upper bound to a list limit.
func ListLimit(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, MaxListLimit)
}

// CheckStatuses rejects statuses the port does not define.
func CheckStatuses(statuses []port.InstanceState) error {
	for _, s := range statuses {
		switch s {
		case port.StatePending, port.StateRunning, port.StateComplete, port.StateFailed, port.StateCancelled:
		default:
			return fmt.Errorf("unknown instance status %q", s)
		}
	}
	return nil
}

// PageKey is the position after which the next page of ListInstances
// starts: instances are listed by (created_at, id), both descending.
type PageKey struct {
	CreatedAt time.Time // microsecond precision, as both databases store it
	ID        uuid.UUID
}

// EncodePageToken makes an opaque token from the last instance of a page.
func EncodePageToken(k PageKey) string {
	raw := strconv.FormatInt(k.CreatedAt.UnixMicro(), 10) + "/" + k.ID.String()
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodePageToken reverses EncodePageToken. The empty token is the first
// page (ok false).
func DecodePageToken(token string) (k PageKey, ok bool, err error) {
	if token == "" {
		return PageKey{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return PageKey{}, false, fmt.Errorf("%w: %w", ErrInvalidPageToken, err)
	}
	micros, id, found := strings.Cut(string(raw), "/")
	if !found {
		return PageKey{}, false, ErrInvalidPageToken
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return PageKey{}, false, fmt.Errorf("%w: %w", ErrInvalidPageToken, err)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return PageKey{}, false, fmt.Errorf("%w: %w", ErrInvalidPageToken, err)
	}
	return PageKey{CreatedAt: time.UnixMicro(us).UTC(), ID: u}, true, nil
}

// DuplicateKeys finds instances of a QueueInstances batch that reuse the
// idempotency key of an earlier instance of the same batch. dup[i] is the
// index of that earlier instance, or -1. Reusing a key for another workflow
// version fails with port.ErrIdempotencyConflict.
func DuplicateKeys(in []port.NewInstance) (dup []int, err error) {
	dup = make([]int, len(in))
	first := make(map[string]int)
	for i, inst := range in {
		dup[i] = -1
		if inst.IdempotencyKey == "" {
			continue
		}
		j, ok := first[inst.IdempotencyKey]
		if !ok {
			first[inst.IdempotencyKey] = i
			continue
		}
		if in[j].WorkflowVersionID != inst.WorkflowVersionID {
			return nil, fmt.Errorf("queue instances: idempotency key %q used for workflow versions %d and %d in one batch: %w",
				inst.IdempotencyKey, in[j].WorkflowVersionID, inst.WorkflowVersionID, port.ErrIdempotencyConflict)
		}
		dup[i] = j
	}
	return dup, nil
}

// Millis is d in (fractional) milliseconds, as the stores keep latencies.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// FromMillis is the inverse of Millis.
func FromMillis(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// IDPrefixRange turns the start of an instance id (hex digits, dashes
// anywhere, any case) into the range of ids that start with it: from the
// prefix padded with 0s to the prefix padded with fs. ok is false for
// anything that is not 1 to 32 hex digits.
func IDPrefixRange(prefix string) (lo, hi uuid.UUID, ok bool) {
	hex := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if hex == "" || len(hex) > 32 || strings.Trim(hex, "0123456789abcdef") != "" {
		return uuid.Nil, uuid.Nil, false
	}
	lo, err1 := uuid.Parse(hex + strings.Repeat("0", 32-len(hex)))
	hi, err2 := uuid.Parse(hex + strings.Repeat("f", 32-len(hex)))
	return lo, hi, err1 == nil && err2 == nil
}
