package engine

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/metrics"
)

// Config configures an Engine. Zero fields take the defaults listed; see
// WithDefaults.
type Config struct {
	// Store holds the durable state. Required.
	Store port.Store
	// Query is the read side to share with other terms' engines (a
	// server keeps one for its whole life; see Query). nil: New builds
	// one from this Config. It must read the same Store.
	Query *Query
	// Dispatcher hands attempts to the Waggler layer. Required.
	Dispatcher port.Dispatcher
	// Admission, when set, holds back new instances whose first tasks
	// need only saturated capabilities, until those drain (see
	// Admission; the Waggler layer calls CapacityFreed). nil: every
	// instance claimed starts at once.
	Admission port.Admission
	// Logger is named "engine" by New. nil: no logging.
	Logger *zap.Logger
	// Clock is the source of time. nil: the wall clock.
	Clock clock.Clock
	// NodeName is logged with every line (key "node").
	NodeName string
	// Metrics are the series the engine records into; a node passes the
	// same set to the engine of every term. nil: series registered
	// nowhere.
	Metrics *metrics.Engine

	// Owner is the lock id of this runloop in the Store. uuid.Nil: a random
	// one, chosen by New.
	Owner uuid.UUID
	// Term is the fencing token (at least 1): the Raft term in a mesh, a
	// persisted per-start counter on a single node. A claim under a newer
	// term takes over this engine's leases at once, and this engine's
	// writes are refused from then on. Required.
	Term uint64

	// PartitionCount is the mesh's partition count (see PartitionOf); 0
	// or 1: one partition. Partitions are the ones this engine owns,
	// partition → epoch: Start fences them in the Store (FencePartitions)
	// before its first claim, so from then on no other runloop writes
	// their instances; the engine claims only their instances and mints
	// the ids of new ones in them. nil: the engine fences nothing and
	// claims every partition (a single server's store, tests).
	PartitionCount int
	Partitions     map[int]uint64
	// Follower: the engine is not the Raft leader's. It runs its
	// partitions' instances only: no schedules, no retention sweep, no
	// reclaim of lapsed leases — the leader's engine does those for the
	// whole mesh.
	Follower bool

	// Shards is the number of goroutines that own the in-memory instances,
	// spread by instance id. Default: GOMAXPROCS.
	Shards int
	// MaxInstances caps the instances held in memory; the rest stay queued
	// in the Store. Default: 10,000.
	MaxInstances int
	// ClaimBatch bounds one claim. Default: 100.
	ClaimBatch int
	// ClaimInterval is how often the claimer polls for due instances that it
	// was not woken for (submissions through other nodes, expired leases,
	// cancel requests). Default: 1 s.
	ClaimInterval time.Duration
	// Lease is the length of an instance lease. Default: 30 s.
	Lease time.Duration
	// LeaseRefresh is the heartbeat period. Default: Lease/3.
	LeaseRefresh time.Duration

	// FlushInterval bounds how long a row waits for others to join its group
	// commit: the flusher writes when FlushInterval has passed since the
	// first pending row, or FlushMaxRows rows are pending, whichever comes
	// first (rows arriving during a write join the next one). Negative: no
	// lingering, write as soon as the flusher is free. Default: 5 ms.
	FlushInterval time.Duration
	// FlushMaxRows bounds the rows (results, snapshots, completions) of one
	// Store call. Default: 500.
	FlushMaxRows int
	// DispatchBatch bounds the attempts of one Dispatcher.Dispatch call.
	// Default: 1,000.
	DispatchBatch int

	// Retention is how long finished instances are kept. Default: 7 days.
	Retention time.Duration
	// SweepInterval is the period of the retention sweep and of the expired
	// lease reclaimer. Default: 10 min.
	SweepInterval time.Duration
	// ScheduleInterval is how often the scheduler looks for due schedule
	// slots (it also wakes for a slot it knows is coming, and when a
	// schedule changes through this engine). Default: 1 s.
	ScheduleInterval time.Duration

	// SpreadLimit bounds the width of one spread. Default:
	// graph.DefaultMaxSpreadWidth (100,000).
	SpreadLimit int
	// StepCost bounds the CEL cost units one event of an instance may
	// spend on expressions (see graph.Options.MaxStepCost), so that one
	// instance cannot hold a shard, and every other instance on it, for
	// long. Default: graph.DefaultMaxStepCost (5,000,000).
	StepCost uint64
	// ChildDepth bounds how deep child workflows nest: a task of an
	// instance this deep starts no child (its attempt fails without
	// retry). Default: graph.DefaultMaxChildDepth (8).
	ChildDepth int
	// ChildrenPerInstance bounds the child instances one instance starts
	// in its life, retries included. Default: graph.DefaultMaxChildren
	// (1,000).
	ChildrenPerInstance int
	// Spec bounds compiled specs and expressions (its Expr field bounds
	// every expression evaluated by the runloop too). Zero fields:
	// spec.DefaultLimits.
	Spec spec.Limits

	// EventLogSize bounds the events kept in memory per held instance for
	// WatchInstance; a watcher that falls further behind gets a snapshot.
	// Default: 1,024.
	EventLogSize int
	// WatchPollInterval is how often a watcher of an instance this engine
	// does not hold polls the Store. Default: 1 s.
	WatchPollInterval time.Duration
	// ParkAfter is how long an instance whose only attempts in flight are
	// waits (wait:) stays in memory before it is parked: written, released
	// and claimed again when its next wait ends or a signal, cancel or
	// resume wakes it (waits.go). A wait that ends sooner than that keeps
	// its instance held. Negative: never park. Default: 5 s.
	ParkAfter time.Duration
	// MaxPendingSignals bounds the signals an instance keeps that no wait
	// took yet; SignalInstance refuses more (ErrTooManySignals). Default:
	// 100.
	MaxPendingSignals int
}

// Default values of Config.
const (
	DefaultMaxInstances      = 10_000
	DefaultClaimBatch        = 100
	DefaultClaimInterval     = time.Second
	DefaultLease             = 30 * time.Second
	DefaultFlushInterval     = 5 * time.Millisecond
	DefaultFlushMaxRows      = 500
	DefaultDispatchBatch     = 1000
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultSweepInterval     = 10 * time.Minute
	DefaultEventLogSize      = 1024
	DefaultWatchPollInterval = time.Second
	DefaultParkAfter         = 5 * time.Second
	DefaultMaxPendingSignals = 100
)

// WithDefaults returns a copy of c with zero fields set to their defaults.
// Owner stays as it is (New picks a random one).
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewEngine(nil)
	}
	if c.Shards == 0 {
		c.Shards = runtime.GOMAXPROCS(0)
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.ClaimInterval == 0 {
		c.ClaimInterval = DefaultClaimInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.LeaseRefresh == 0 {
		c.LeaseRefresh = c.Lease / 3
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushMaxRows == 0 {
		c.FlushMaxRows = DefaultFlushMaxRows
	}
	if c.DispatchBatch == 0 {
		c.DispatchBatch = DefaultDispatchBatch
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.ScheduleInterval == 0 {
		c.ScheduleInterval = DefaultScheduleInterval
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.EventLogSize == 0 {
		c.EventLogSize = DefaultEventLogSize
	}
	if c.WatchPollInterval == 0 {
		c.WatchPollInterval = DefaultWatchPollInterval
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = DefaultParkAfter
	}
	if c.MaxPendingSignals == 0 {
		c.MaxPendingSignals = DefaultMaxPendingSignals
	}
	c.Spec = c.Spec.WithDefaults()
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Store == nil {
		bad("Store is required")
	}
	if c.Dispatcher == nil {
		bad("Dispatcher is required")
	}
	if c.Term == 0 {
		bad("Term is required (at least 1): pass the Raft term, or a counter persisted and incremented at every start")
	}
	if c.PartitionCount < 0 || c.PartitionCount > port.MaxPartitions {
		bad("PartitionCount must be 0 to %d, got %d", port.MaxPartitions, c.PartitionCount)
	}
	for p, epoch := range c.Partitions {
		if p < 0 || p >= max(c.PartitionCount, 1) {
			bad("partition %d is not one of the mesh's %d", p, max(c.PartitionCount, 1))
		}
		if epoch == 0 {
			bad("partition %d has epoch 0: an owner's epoch is at least 1", p)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Shards", c.Shards}, {"MaxInstances", c.MaxInstances}, {"ClaimBatch", c.ClaimBatch},
		{"FlushMaxRows", c.FlushMaxRows}, {"DispatchBatch", c.DispatchBatch}, {"EventLogSize", c.EventLogSize}} {
		if f.v <= 0 {
			bad("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.SpreadLimit < 0 {
		bad("SpreadLimit must not be negative, got %d", c.SpreadLimit)
	}
	if c.ChildDepth < 0 || c.ChildrenPerInstance < 0 || c.ChildrenPerInstance > math.MaxInt32 {
		bad("ChildDepth (%d) and ChildrenPerInstance (%d) must not be negative", c.ChildDepth, c.ChildrenPerInstance)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"ClaimInterval", c.ClaimInterval}, {"Lease", c.Lease}, {"LeaseRefresh", c.LeaseRefresh},
		{"Retention", c.Retention}, {"SweepInterval", c.SweepInterval}, {"WatchPollInterval", c.WatchPollInterval}} {
		if f.v <= 0 {
			bad("%s must be positive, got %s", f.name, f.v)
		}
	}
	if c.LeaseRefresh >= c.Lease {
		bad("LeaseRefresh (%s) must be shorter than Lease (%s), or leases lapse between refreshes", c.LeaseRefresh, c.Lease)
	}
	if len(errs) > 0 {
		return fmt.Errorf("engine config: %w", errors.Join(errs...))
	}
	return nil
}
