package port

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Errors returned by every Store. Adapters wrap them with context; callers
// test with errors.Is.
var (
	// ErrNotFound: no such workflow version or instance.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: (name, version) is already registered with a
	// different IR hash. Versions are immutable; register a new version.
	ErrVersionConflict = errors.New("workflow version already registered with a different definition")
	// ErrOwnershipLost: the caller's lease on an instance is gone (expired,
	// or taken over by an owner with a newer term). The caller must drop the
	// instance from memory and stop writing it.
	ErrOwnershipLost = errors.New("instance ownership lost")
	// ErrIdempotencyConflict: an idempotency key was reused for a different
	// workflow version.
	ErrIdempotencyConflict = errors.New("idempotency key already used for a different workflow")
	// ErrInvalidPageToken: ListInstances was given a page token that no
	// earlier page of this store produced (a client's mistake, not the
	// store's).
	ErrInvalidPageToken = errors.New("invalid page token")
	// ErrStoreUnavailable: the store could not do the call now, for a
	// reason that passes — the database cannot be reached, is failing over
	// or is read-only, or a transient conflict (a deadlock, a serialization
	// failure). The same call may be retried. Unless the error also matches
	// ErrOutcomeUnknown, nothing of the call was applied.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrOutcomeUnknown comes with ErrStoreUnavailable when the connection
	// was lost after a write was sent: it may have been applied (a commit
	// whose acknowledgement was lost). Every write of the runloop is
	// idempotent and is simply retried; a submission is safe to retry with
	// its idempotency key, which answers the instance it started, if any.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrStaleEpoch: FencePartitions was asked for an epoch of a partition
	// that is not above the epoch stored for it by another owner: a newer
	// owner fenced the partition already. The caller does not own it.
	ErrStaleEpoch = errors.New("stale partition epoch")
)

// Store is the durable state of the engine: workflow versions, the instance
// queue with its leases, per-instance state snapshots and the append-only log
// of action results. It is declared here, by its consumer; the adapters live
// in engine/store/postgres (a real mesh) and engine/store/sqlite (a single
// server). One conformance suite (engine/store/storetest) runs against both.
//
// Ownership: an instance is written only by the holder of its lease. Every
// state write is gated on (lock, unexpired lease); a refused write returns
// ErrOwnershipLost for that instance. A claim may take over a live lease held
// under an older term (the Raft term is the fencing token), not only an
// expired one.
//
// Partitions: every instance belongs to one partition for life
// (NewInstance.Partition, PartitionOf its id). A partition is *fenced* once
// an owner called FencePartitions for it; from then on the store holds its
// owner (a runloop's lock id) and epoch, and refuses every write of another
// runloop on an instance of that partition — claims, progress, completions,
// lease refreshes, submissions stored claimed — even one whose row lease is
// still live: Temporal's range_id check, in the same statement as the lease
// check. The owner's claims take the partition's rows whatever lease they
// hold (a lease of an earlier owner is void). A partition never fenced is
// gated by leases and terms alone, as before partitions existed.
//
// All methods are safe for concurrent use and batch-oriented: the runloop
// group-commits many instances' progress in one call.
type Store interface {
	// Ping checks that the store answers (readiness probes).
	Ping(ctx context.Context) error

	// RegisterWorkflow stores an immutable workflow version. Registering the
	// same (name, version, IR hash) again is a no-op that returns the stored
	// row; the same (name, version) with a different hash fails with
	// ErrVersionConflict.
	RegisterWorkflow(ctx context.Context, wf WorkflowVersion) (WorkflowVersion, error)
	// GetWorkflow returns one version, or ErrNotFound.
	GetWorkflow(ctx context.Context, name string, version uint32) (WorkflowVersion, error)
	// GetWorkflowByID returns one version by its store id, or ErrNotFound.
	GetWorkflowByID(ctx context.Context, id int64) (WorkflowVersion, error)
	// ListWorkflows lists versions, newest first within a name, names sorted.
	ListWorkflows(ctx context.Context, f WorkflowFilter) ([]WorkflowVersion, error)

	// QueueInstances writes each instance's queue row and runner row in one
	// transaction and returns only after commit. An instance whose
	// idempotency key already exists is not queued again: the existing
	// instance's id is returned with Existing set. A key already used for a
	// different workflow version fails the whole call with
	// ErrIdempotencyConflict, and nothing of the batch is queued. A new
	// instance due at once with a Claim is stored claimed (Claimed set).
	QueueInstances(ctx context.Context, in []NewInstance) ([]Queued, error)
	// ClaimInstances leases up to Limit due instances to Owner under Term:
	// rows that are unlocked, whose lease expired, or whose lease is held
	// under an older term. It returns each with its snapshot and the latest
	// action result per execution, in one round trip where possible.
	ClaimInstances(ctx context.Context, req ClaimRequest) ([]ClaimedInstance, error)
	// PersistProgress writes a batch of progress, per instance in this order:
	// action results (append-only, a duplicate (execution, attempt) is
	// ignored), then the state snapshot if given, then the next scheduled
	// time if given — all gated on the caller's lease. The returned slice has
	// one entry per input: nil, or ErrOwnershipLost (nothing of that
	// instance was written).
	PersistProgress(ctx context.Context, batch []Progress) ([]error, error)
	// CompleteInstances records terminal instances (result or error, final
	// snapshot) and removes them from the queue, gated on the lease like
	// PersistProgress.
	CompleteInstances(ctx context.Context, batch []Completion) ([]error, error)
	// FencePartitions makes req.Owner the owner of each partition at its
	// epoch, in one transaction: a partition stored at a lower epoch (or
	// not at all) is taken; one stored at the same epoch by the same owner
	// is kept (a retry); any other — a higher epoch, or the same epoch of
	// another owner — fails the whole call with ErrStaleEpoch and changes
	// nothing. From its commit on, writes of any other runloop on those
	// partitions' instances are refused (see the Store doc).
	FencePartitions(ctx context.Context, req FenceRequest) error
	// Partitions returns every fenced partition's owner and epoch, by
	// partition.
	Partitions(ctx context.Context) ([]PartitionOwner, error)
	// RefreshLeases extends the leases Owner holds on ids. It returns the ids
	// whose lease was lost, and the ids (still owned) on which a
	// cancellation was requested.
	RefreshLeases(ctx context.Context, req LeaseRefresh) (LeaseStatus, error)
	// ReleaseLeases gives up Owner's leases on ids (clean shutdown) so another
	// owner can claim them at once.
	ReleaseLeases(ctx context.Context, owner uuid.UUID, ids []uuid.UUID) error
	// ReclaimExpired clears up to limit lapsed leases and returns how many.
	ReclaimExpired(ctx context.Context, limit int) (int, error)
	// RequestCancel marks an instance for cancellation, bumps its wake
	// counter and makes it due now; its owner (or the next one) sees the
	// request on refresh or claim. A finished instance returns ErrNotFound
	// wrapped with its state.
	RequestCancel(ctx context.Context, id uuid.UUID) error
	// Sweep deletes up to Limit finished instances (and their action
	// results and signals) that finished before Before, returning how many.
	Sweep(ctx context.Context, req SweepRequest) (int, error)

	// RecordSignal records a signal for a live instance (one that has a
	// queue row; any other is ErrNotFound wrapped with its state, as
	// RequestCancel says it). A signal with an IdempotencyKey the instance
	// already holds changes nothing: the first record comes back with
	// existing set. Otherwise the store refuses with ErrTooManySignals
	// when the instance holds MaxPending unconsumed signals, or inserts
	// the signal, bumps the instance's wake counter and makes it due now
	// (a parked, unleased instance is claimed at once). wake is the
	// counter after the call.
	RecordSignal(ctx context.Context, s NewSignal) (rec SignalRecord, wake int64, existing bool, err error)
	// RecordSignals records signals in one transaction, each as RecordSignal
	// would and in order (two signals of one instance in a batch are recorded
	// one after the other), and returns one outcome per signal. A signal
	// refused on its own — its instance not live (ErrNotFound wrapped with the
	// state, as RecordSignal), ErrTooManySignals, an invalid signal — has its
	// Err set and changes nothing; the others are recorded. An error of the
	// call as a whole (ErrStoreUnavailable, ...) records none of them.
	RecordSignals(ctx context.Context, sigs []NewSignal) ([]SignalOutcome, error)
	// ListSignals returns every signal of an instance, consumed or not, by
	// Seq; ErrNotFound for an unknown instance.
	ListSignals(ctx context.Context, id uuid.UUID) ([]SignalRecord, error)
	// SetPaused sets a live instance's paused flag and bumps its wake
	// counter (any other instance is refused as by RequestCancel);
	// resuming (paused false) also makes it due now. It returns the wake
	// counter after the call.
	SetPaused(ctx context.Context, id uuid.UUID, paused bool) (wake int64, err error)
	// ReopenInstance runs a FAILED or CANCELLED instance again, in one
	// transaction: running, with req.State as its snapshot, its output,
	// error, finish time, GATHERING mark, cancel request and pause
	// cleared, its run count one up, and a queue row due now, unleased,
	// in req.Partition. The result log and the signals stay. A queued or
	// running instance is refused with ErrInstanceLive, a complete one
	// with ErrNotRetryable, an unknown one with ErrNotFound.
	ReopenInstance(ctx context.Context, req ReopenRequest) (Reopened, error)

	// GetInstance returns one instance (queued, running or finished).
	GetInstance(ctx context.Context, id uuid.UUID) (InstanceRecord, error)
	// ListInstances lists instances, newest first, with keyset paging.
	// The records leave Inputs, State and Output nil: a listing shows
	// none of them, and a large instance's snapshot is megabytes.
	ListInstances(ctx context.Context, f InstanceFilter) (InstancePage, error)
	// TaskHistory returns every recorded action result of an instance, in
	// the order they were recorded.
	TaskHistory(ctx context.Context, id uuid.UUID) ([]ActionResult, error)

	// CreateSchedule stores a new schedule, or fails with
	// ErrScheduleExists.
	CreateSchedule(ctx context.Context, s ScheduleRecord) error
	// GetSchedule returns one schedule, or ErrNotFound.
	GetSchedule(ctx context.Context, name string) (ScheduleRecord, error)
	// ListSchedules returns every schedule, by name.
	ListSchedules(ctx context.Context) ([]ScheduleRecord, error)
	// SetSchedulePaused pauses a schedule (next is ignored, NextRunAt
	// becomes zero) or resumes it at next; ErrNotFound if there is none.
	SetSchedulePaused(ctx context.Context, name string, paused bool, next time.Time) (ScheduleRecord, error)
	// DeleteSchedule removes a schedule, or fails with ErrNotFound.
	DeleteSchedule(ctx context.Context, name string) error
	// DueSchedules returns up to limit active schedules whose NextRunAt is
	// at or before now, earliest first.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]ScheduleRecord, error)
	// RecordScheduleRun advances a schedule past run.Slot, only while its
	// NextRunAt is still run.Slot (a no-op otherwise: another engine
	// recorded that slot, or the schedule was paused or deleted).
	RecordScheduleRun(ctx context.Context, run ScheduleRun) error

	// RecordPoolStats stores each pool's latest statistics, replacing the
	// pool's previous row.
	RecordPoolStats(ctx context.Context, pools []PoolStatus) error
	// ListPoolStats returns every pool's latest statistics, by node,
	// capability and pool.
	ListPoolStats(ctx context.Context) ([]PoolStatus, error)

	// Close releases connections. It is idempotent.
	Close() error
}

// WorkflowVersion is an immutable, registered workflow.
type WorkflowVersion struct {
	ID        int64
	Name      string
	Version   uint32
	IRHash    string // "sha256:…", see spec.Hash
	IR        []byte // deterministic protobuf encoding of robonetv1.Workflow
	CreatedAt time.Time
}

// WorkflowFilter selects workflow versions.
type WorkflowFilter struct {
	Name  string // empty: all
	Limit int    // 0: a default of 100
}

// NewInstance is an instance to queue.
type NewInstance struct {
	ID                uuid.UUID // uuid.Nil: the store assigns a random one
	WorkflowVersionID int64
	Inputs            []byte    // canonical JSON of the bound inputs
	State             []byte    // initial snapshot; may be empty
	ScheduledAt       time.Time // zero: due at once
	IdempotencyKey    string    // optional
	// Partition is the instance's partition for life, PartitionOf(ID) for
	// the mesh's partition count (0 in a mesh of one partition). The store
	// keeps it beside the queue row; claims and the fence read it there.
	Partition int
	// Parent, when set, is the task attempt of another instance that
	// starts this one as a child workflow (see ParentRef).
	Parent *ParentRef
	// Claim, when set, stores the instance already claimed by the
	// runloop it names if the instance is new and due at once: running,
	// leased to Claim.Owner under Claim.Term until the commit's time plus
	// Claim.Lease, as ClaimInstances would leave it (Queued.Claimed). The
	// running engine claims its own submissions so, instead of a claim
	// transaction after each submission's. An instance scheduled later,
	// or one an existing idempotency key answers, is queued as without it.
	Claim *SubmitClaim
}

// ParentRef names the task attempt that started a child instance: a
// task whose body is a workflow starts one child per attempt. The store
// keeps it on the child's row for life.
type ParentRef struct {
	InstanceID  uuid.UUID
	ExecutionID string // the parent's execution, e.g. "scan[2]"
	Attempt     uint32
}

// AttemptKey is the parent's attempt the child runs for.
func (p ParentRef) AttemptKey() AttemptKey {
	return AttemptKey(p)
}

// SubmitClaim is the runloop a new instance is stored claimed by (see
// NewInstance.Claim): the fields of ClaimRequest but the limit.
type SubmitClaim struct {
	Owner uuid.UUID     // lock id of the runloop
	Term  uint64        // its fencing token
	Lease time.Duration // lease length
}

// Queued reports the outcome of queueing one instance.
type Queued struct {
	ID       uuid.UUID // the instance that exists now (the earlier one if Existing)
	Existing bool      // the idempotency key matched an existing instance
	// Claimed says the instance was stored claimed as NewInstance.Claim
	// asked; CreatedAt is then its stored creation time (for hydrating
	// it without reading it back).
	Claimed   bool
	CreatedAt time.Time
}

// ClaimRequest asks for due instances.
type ClaimRequest struct {
	Owner uuid.UUID     // lock id of the claiming runloop
	Term  uint64        // fencing token: the Raft term of the claimer
	Lease time.Duration // lease length
	Limit int
	// Partitions limits the claim to instances of these partitions; nil:
	// every partition. In a fenced partition only its owner claims, and it
	// takes rows whatever lease they hold.
	Partitions []int
}

// FenceRequest asks for the ownership of partitions (FencePartitions).
type FenceRequest struct {
	Owner  uuid.UUID      // lock id of the runloop that will own them
	Epochs map[int]uint64 // partition → its epoch, above every earlier one
}

// PartitionOwner is a fenced partition as the store holds it.
type PartitionOwner struct {
	Partition int
	Owner     uuid.UUID
	Epoch     uint64
	FencedAt  time.Time
}

// ClaimedInstance is a leased instance with what is needed to hydrate it.
type ClaimedInstance struct {
	ID                uuid.UUID
	WorkflowVersionID int64
	Inputs            []byte
	State             []byte
	// Results holds the latest recorded result per execution (highest
	// attempt), ordered by execution id.
	Results         []ActionResult
	LeaseExpiresAt  time.Time
	CancelRequested bool
	CreatedAt       time.Time
	// Gathering: an owner recorded that the instance reached GATHERING
	// (Progress.Gathering).
	Gathering bool
	// HeldBefore says an engine claimed the instance before this claim (a
	// deposed leader, or one that stopped): it may have dispatched tasks
	// of it, even when nothing of it was recorded.
	HeldBefore bool
	// Parent is the task attempt that started the instance, when it is a
	// child instance (NewInstance.Parent).
	Parent *ParentRef
	// Signals are the instance's unconsumed signals, by Seq. Every signal
	// counted in Wake is among them or consumed.
	Signals []SignalRecord
	// Wake is the instance's wake counter: RecordSignal, SetPaused and
	// RequestCancel each bump it. A Park gives it back as WakeSeen.
	Wake int64
	// Paused: the instance was paused (SetPaused) and not resumed.
	Paused bool
	// Run counts the instance's runs: 1, then one more per
	// ReopenInstance.
	Run int
}

// NewSignal is a signal to record for an instance (Store.RecordSignal,
// Store.RecordSignals).
type NewSignal struct {
	InstanceID     uuid.UUID
	Name           string
	Payload        []byte // canonical JSON
	IdempotencyKey string // "": none
	// MaxPending refuses the signal (ErrTooManySignals) when the instance
	// already holds this many unconsumed signals; 0 or less: no limit.
	MaxPending int
}

// SignalRecord is a recorded signal.
type SignalRecord struct {
	// Seq is assigned by the store, increasing in recording order across
	// the whole store.
	Seq            int64
	InstanceID     uuid.UUID
	Name           string
	Payload        []byte
	IdempotencyKey string
	CreatedAt      time.Time
	Consumed       bool
	ConsumedBy     string // the attempt that took it ("execution#attempt"); "" while unconsumed
}

// SignalOutcome is one signal's outcome in RecordSignals.
type SignalOutcome struct {
	Record   SignalRecord
	Wake     int64 // the instance's wake counter after the signal
	Existing bool  // the idempotency key was recorded before: Record is that signal
	Err      error // the signal was refused on its own
}

// SignalUse marks a signal consumed (Progress.ConsumedSignals): signal
// Seq of the instance, taken by By ("execution#attempt").
type SignalUse struct {
	Seq int64
	By  string
}

// Park releases an instance's lease with its progress
// (Progress.Park) until something wakes it or Until comes.
type Park struct {
	// Until is when the instance is due again without a wake; zero: no
	// deadline (only a wake makes it due).
	Until time.Time
	// WakeSeen is the wake counter the owner has acted on
	// (ClaimedInstance.Wake, or a RecordSignal or SetPaused it saw): when
	// the stored counter is above it, or a cancellation was requested,
	// the instance is due now instead.
	WakeSeen int64
}

// ReopenRequest asks to run a finished instance again
// (Store.ReopenInstance).
type ReopenRequest struct {
	ID        uuid.UUID
	State     []byte // the new snapshot
	Partition int    // PartitionOf(ID) for the mesh's partition count
}

// Reopened is the outcome of ReopenInstance.
type Reopened struct {
	Run    int           // the instance's run now: 2 after the first reopen
	Status InstanceState // the status it had (Failed or Cancelled)
}

// ActionResult is one finished attempt of one execution (a task or a spread
// instance of a task).
type ActionResult struct {
	InstanceID  uuid.UUID
	ExecutionID string // stable within the instance, e.g. "probe[3]"
	Attempt     uint32
	OK          bool
	Output      []byte // canonical JSON when OK
	Error       string // when !OK
	// WorkerID is the worker that ran the attempt ("node/capability/slot");
	// for an attempt of a task whose body is a child workflow, the child
	// instance's id (empty when none was started).
	WorkerID   string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Progress is one instance's share of a group commit.
type Progress struct {
	InstanceID  uuid.UUID
	Owner       uuid.UUID
	Results     []ActionResult
	State       []byte     // nil: leave the snapshot as it is
	ScheduledAt *time.Time // nil: leave it as it is
	// Gathering records that the instance reached GATHERING (no task
	// waits for its predecessors any more). The store keeps the first
	// time; false leaves it as it is. Reads on every node show GATHERING
	// from then on (InstanceRecord.Gathering), so an instance's state
	// never goes back across owners.
	Gathering bool
	// ConsumedSignals marks signals of the instance consumed, in the same
	// gated write as the results. A signal already consumed keeps its
	// first consumer; a Seq of another instance is ignored.
	ConsumedSignals []SignalUse
	// Park, when set, releases the caller's lease after everything else
	// of the entry is written (it overrides ScheduledAt): the instance is
	// due at Park.Until (never, if zero), or now if its wake counter moved
	// past Park.WakeSeen or a cancellation was requested — as the store
	// holds them when the write commits, so a wake that commits first is
	// never lost.
	Park *Park
}

// Completion records a terminal instance.
type Completion struct {
	InstanceID uuid.UUID
	Owner      uuid.UUID
	Status     InstanceState  // Complete, Failed or Cancelled
	Results    []ActionResult // final results not yet persisted
	Output     []byte         // canonical JSON of the outputs when Complete
	Error      string         // why, when Failed or Cancelled
	State      []byte         // final snapshot; nil leaves it
	// ConsumedSignals marks signals consumed, as Progress.ConsumedSignals.
	ConsumedSignals []SignalUse
}

// LeaseRefresh extends leases.
type LeaseRefresh struct {
	Owner uuid.UUID
	Term  uint64 // the owner's term; a lease stamped with a newer one is lost
	Lease time.Duration
	IDs   []uuid.UUID
}

// LeaseStatus is the answer to a refresh.
type LeaseStatus struct {
	Lost            []uuid.UUID
	CancelRequested []uuid.UUID
}

// SweepRequest bounds a retention sweep.
type SweepRequest struct {
	Before time.Time
	Limit  int
}

// InstanceRecord is an instance as the API shows it.
type InstanceRecord struct {
	ID                uuid.UUID
	WorkflowVersionID int64
	WorkflowName      string
	WorkflowVersion   uint32
	Status            InstanceState
	Inputs            []byte
	State             []byte
	Output            []byte
	Error             string
	IdempotencyKey    string
	CreatedAt         time.Time
	StartedAt         *time.Time
	FinishedAt        *time.Time
	CancelRequested   bool
	// Gathering: running, and its owner recorded that it reached
	// GATHERING (Progress.Gathering).
	Gathering bool
	// Parent is the task attempt that started the instance, when it is a
	// child instance (NewInstance.Parent); ListInstances returns it too.
	Parent *ParentRef
	// Paused: live and paused (SetPaused); ListInstances returns it too.
	Paused bool
	// Run counts the instance's runs: 1, then one more per
	// ReopenInstance.
	Run int
}

// InstanceFilter selects instances for ListInstances.
type InstanceFilter struct {
	WorkflowName string          // empty: all
	Statuses     []InstanceState // empty: all
	// IDPrefix keeps the instances whose id starts with it (hex digits,
	// dashes ignored); empty: all. The store answers ErrInvalidArgument
	// for anything but 1 to 32 hex digits.
	IDPrefix string
	// CreatedAfter keeps the instances created at or after it; zero: all.
	CreatedAfter time.Time
	Limit        int    // 0: DefaultInstanceLimit
	PageToken    string // from a previous InstancePage
}

// DefaultInstanceLimit is the page size of an InstanceFilter (and a
// ListRequest) whose Limit is 0.
const DefaultInstanceLimit = 50

// InstancePage is one page of instances.
type InstancePage struct {
	Instances     []InstanceRecord
	NextPageToken string // empty on the last page
}

// PoolStatus is one worker pool's statistics as the leader last collected
// them from its node.
type PoolStatus struct {
	Node, Capability, Pool string
	Slots, Busy            int
	Completed, Failed      uint64
	PerMinute              int
	LatencyP50, LatencyP99 time.Duration
	UpdatedAt              time.Time
}
