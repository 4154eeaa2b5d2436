package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/lifecycle"
)

// The runloop, in one page.
//
//	Submit ──QueueInstances──▶ Store ◀──ClaimInstances── claimer ──hydrate──▶ shard[id % Shards]
//	   └──── stored claimed, when there is room (reserve) ─────────hydrate──▶ │  graph.Start / Restore+Resume
//	Waggler ◀──Dispatch/Cancel── outbox ◀──────── effects ────────────────────┤  (recorded attempts replayed)
//	Waggler ──TaskResult──▶ shard: graph.Complete (O(d)) ──rows──▶ flusher ──PersistProgress / CompleteInstances──▶ Store
//	heartbeat ──RefreshLeases──▶ Store: lost → evict, cancel requested → graph.Cancel
//
// Shards own their graphs exclusively and never block: they talk to the
// world through mailboxes. Persistence is ordered per instance (results,
// then the snapshot, then the completion, which carries any result not yet
// written), group-committed, and gated on the lease; a refused write evicts
// the instance. Snapshots are amortised (see shard.settle) because results
// alone are enough to hydrate: Restore + Resume re-emit the attempts in
// flight and drive answers those already recorded (see replay.go).

// Engine is the workflow engine of one leadership term: the runloop that
// claims instances from the Store and runs them, and the client-facing
// service (RegisterWorkflow, Submit, GetInstance, WatchInstance,
// CancelInstance, ListInstances, ListWorkflows). It implements ResultSink
// for the Waggler layer.
//
// Lifecycle: New, Start, then Stop (graceful) or Abandon (leadership lost).
// An Engine runs once; a new term gets a new Engine. An Engine that is not
// running still serves every client call from the Store: submissions are
// queued for whichever engine runs, reads come from the Store.
//
// Goroutines, all owned and waited for: one per shard, the claimer, the
// lease heartbeat, the retention sweeper, the flusher (group commit), the
// outbox (dispatches) and the children loop (child workflow instances).
type Engine struct {
	cfg Config
	log *zap.Logger
	// q is the read side, shared with the node's other terms: versions,
	// plans, and everything read from the Store.
	q *Query

	shards   []*shard
	flusher  *flusher
	outbox   *outbox
	children *children     // starts and cancels child instances (children.go)
	submits  submitBatcher // group-commits concurrent submissions
	signals  signalBatcher // group-commits concurrent signals

	latestVersions latestVersions // newest version per workflow name, for submissions by name
	scheduleWake   chan struct{}  // wakes the scheduler

	held      sync.Map // uuid.UUID → *holder: instances in memory
	heldCount atomic.Int64
	wake      chan struct{} // wakes the claimer
	running   atomic.Bool
	// dueLeft says the Store may hold due instances this engine has not
	// claimed: the last claim took a full batch, or a submission found
	// no room in memory. While it is set, submissions are queued for the
	// claimer instead of claimed at once (see reserve).
	dueLeft atomic.Bool
	// admit holds back claimed instances whose capabilities are
	// saturated (admission.go).
	admit admission
	// owned are the partitions this engine owns, sorted (nil: every
	// partition, unfenced); next picks the one of the next submission.
	owned []int
	next  atomic.Uint32
	// parts counts, per partition of the mesh, what PartitionStats reports.
	parts []partitionCounters

	ignored   atomic.Uint64
	evictions atomic.Uint64
	// triggers caches the workflows events start (lifecycle.go).
	triggers triggers
	// parkWakes are the times instances parked here are due again.
	parkWakes parkWakes
	// parks counts parks written; parked those that left memory.
	parks, parked atomic.Uint64

	// claimed is closed (and replaced) whenever instances are claimed, so
	// that watchers polling the Store switch to the live log at once.
	claimedMu sync.Mutex
	claimed   chan struct{}

	// life runs Stop and Abandon once; its group holds every goroutine.
	life lifecycle.Base

	mu          sync.Mutex
	cancelRun   context.CancelFunc // ends every goroutine
	cancelLoops context.CancelFunc // ends the claimer, heartbeat and sweeper
	// loopsCtx is the loops' context; leaderCancel ends the leader's
	// loops (schedules, sweeps) while they run (nil otherwise). Both
	// guarded by mu.
	loopsCtx     context.Context
	leaderCancel context.CancelFunc
	// leads: the engine runs the leader's loops (Config.Follower off, or
	// SetLeader since).
	leads atomic.Bool
	loops sync.WaitGroup
}

var _ port.ResultSink = (*Engine)(nil)

// New validates cfg and builds an Engine. Nothing runs until Start.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Owner == uuid.Nil {
		cfg.Owner = uuid.New()
	}
	q := cfg.Query
	if q == nil {
		var err error
		if q, err = NewQuery(cfg); err != nil {
			return nil, err
		}
	}
	e := &Engine{
		cfg:          cfg,
		log:          cfg.Logger.Named("engine").With(zap.String("node", cfg.NodeName), zap.Uint64("term", cfg.Term)),
		q:            q,
		wake:         make(chan struct{}, 1),
		scheduleWake: make(chan struct{}, 1),
		claimed:      make(chan struct{}),
		admit:        newAdmission(),
	}
	e.dueLeft.Store(true) // until the first claim looks
	e.owned = slices.Sorted(maps.Keys(cfg.Partitions))
	e.leads.Store(!cfg.Follower)
	e.parts = make([]partitionCounters, max(cfg.PartitionCount, 1))
	e.flusher = newFlusher(e)
	e.outbox = newOutbox(e)
	e.children = newChildren(e)
	e.shards = make([]*shard, cfg.Shards)
	for i := range e.shards {
		e.shards[i] = newShard(e, i)
	}
	return e, nil
}

// Owner returns the lock id this engine claims instances with.
func (e *Engine) Owner() uuid.UUID { return e.cfg.Owner }

// Owns reports whether the instance id is of a partition this engine owns
// (every instance, for an engine given no partitions).
func (e *Engine) Owns(id uuid.UUID) bool {
	if len(e.cfg.Partitions) == 0 {
		return true
	}
	_, ok := e.cfg.Partitions[port.PartitionOf(id, e.cfg.PartitionCount)]
	return ok
}

// Follower reports whether the engine runs only its partitions, the
// leader's engine running the schedules and sweeps (Config.Follower).
func (e *Engine) Follower() bool { return !e.leads.Load() }

// Term returns the fencing token this engine claims instances under.
func (e *Engine) Term() uint64 { return e.cfg.Term }

// Start starts the runloop and returns once its goroutines run. The first
// claim happens at once. ctx only bounds starting (its values are kept);
// the runloop lives until Stop or Abandon.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("engine: starting: %w", err)
	}
	if len(e.cfg.Partitions) > 0 && e.life.State() == lifecycle.New {
		// Before the first claim: from the fence's commit on, the
		// partitions' previous owner writes nothing more of them.
		if err := e.cfg.Store.FencePartitions(ctx, port.FenceRequest{Owner: e.cfg.Owner, Epochs: e.cfg.Partitions}); err != nil {
			return fmt.Errorf("engine: fencing partitions %v: %w", e.owned, err)
		}
	}
	if err := e.life.Start("engine"); err != nil {
		if errors.Is(err, lifecycle.ErrStopped) {
			return fmt.Errorf("engine: Start after Stop: %w", ErrStopped)
		}
		return err
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	loopsCtx, cancelLoops := context.WithCancel(runCtx)
	e.cancelRun, e.cancelLoops = cancelRun, cancelLoops
	e.running.Store(true)

	e.goAll(func() { e.flusher.run(runCtx) })
	e.outbox.start(runCtx)
	e.goAll(func() { e.children.run(runCtx) })
	for _, s := range e.shards {
		e.goAll(func() { s.run(runCtx) })
	}
	e.loopsCtx = loopsCtx
	for _, loop := range []func(context.Context){e.claimLoop, e.admitLoop, e.leaseLoop} {
		e.goLoop(loopsCtx, loop)
	}
	if !e.cfg.Follower {
		e.startLeaderLoops()
	}
	e.log.Info("engine started", zap.Stringer("owner", e.cfg.Owner), zap.Int("shards", len(e.shards)),
		zap.Int("max_instances", e.cfg.MaxInstances), zap.Ints("partitions", e.owned))
	return nil
}

func (e *Engine) goAll(f func()) { e.life.Go(f) }

// goLoop runs loop on ctx as one of the loops a graceful Stop ends first.
func (e *Engine) goLoop(ctx context.Context, loop func(context.Context)) {
	e.loops.Add(1)
	e.goAll(func() {
		defer e.loops.Done()
		loop(ctx)
	})
}

// startLeaderLoops starts what the Raft leader's engine runs for the whole
// mesh: the schedules, the retention sweep and the reclaim of lapsed
// leases. Called with e.mu held, while running.
func (e *Engine) startLeaderLoops() {
	if e.leaderCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.loopsCtx)
	e.leaderCancel = cancel
	e.leads.Store(true)
	e.goLoop(ctx, e.sweepLoop)
	e.goLoop(ctx, e.scheduleLoop)
}

// SetLeader makes a running engine run the leader's loops (schedules,
// sweeps) or stop them, when the Raft leadership moves while the engine's
// partitions stay: the engine itself goes on. A follower's schedules stop
// at once (another leader may fire the same slots meanwhile: firing is
// at-least-once, each slot starting one instance by its idempotency key).
func (e *Engine) SetLeader(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running.Load() {
		if e.life.State() == lifecycle.New {
			e.cfg.Follower = !on
			e.leads.Store(on)
		}
		return
	}
	if on {
		e.startLeaderLoops()
		e.log.Info("engine runs the leader's schedules and sweeps")
		return
	}
	if e.leaderCancel != nil {
		e.leaderCancel()
		e.leaderCancel = nil
		e.leads.Store(false)
		e.log.Info("engine left the leader's schedules and sweeps to the new leader")
	}
}

// Stop shuts the runloop down gracefully: it stops claiming and
// dispatching, cancels the attempts in flight, writes every pending result
// and a last snapshot of every held instance, releases their leases so the
// next engine claims them at once, and waits for every goroutine. ctx
// bounds the graceful part; when it ends, Stop abandons what is left. Stop
// is idempotent: later calls wait for the first and return its result.
//
// Use Stop on shutdown while this engine still holds its term. When
// leadership is lost, use Abandon: a newer term may already have
// re-dispatched the same attempts, which a cancel must not reach.
func (e *Engine) Stop(ctx context.Context) error {
	return e.life.Stop(ctx, func(was lifecycle.State) error { return e.stop(ctx, was, stopCancelling) })
}

// Release hands the engine's instances over to their next owner: like
// Stop it stops claiming and dispatching, writes every pending result and
// a last snapshot and releases the leases, but it cancels nothing — the
// attempts in flight run on and are adopted by whoever owns their
// partitions next (a partition moved to rebalance, or the engine
// restarted with another set of partitions). A write the store refuses
// because a new owner fenced the partition first is dropped, as always.
// ctx bounds it; when it ends, Release abandons what is left.
func (e *Engine) Release(ctx context.Context) error {
	return e.life.Stop(ctx, func(was lifecycle.State) error { return e.stop(ctx, was, stopReleasing) })
}

// stopMode is how the runloop stops.
type stopMode int

const (
	stopAbandoning stopMode = iota // nothing written, cancelled or released
	stopCancelling                 // in-flight attempts cancelled, the rest written, leases released
	stopReleasing                  // written and released, nothing cancelled
)

// Abandon stops the runloop at once without writing, cancelling or
// releasing anything: the in-memory state is dropped and the next owner
// (a newer term) takes the instances over from the Store, replaying the
// recorded results. It waits for every goroutine. Stop and Abandon share
// one outcome: whichever runs first decides.
func (e *Engine) Abandon() {
	_ = e.life.Stop(context.Background(), func(was lifecycle.State) error {
		return e.stop(context.Background(), was, stopAbandoning)
	})
}

func (e *Engine) stop(ctx context.Context, was lifecycle.State, mode stopMode) error {
	if was != lifecycle.Running {
		return nil
	}
	e.mu.Lock() // SetLeader starts loops only while running
	e.running.Store(false)
	e.mu.Unlock()
	if mode == stopAbandoning {
		e.cancelRun()
		e.life.Wait()
		e.clearHeldBack()
		e.log.Info("engine abandoned its instances", zap.Int64("held", e.heldCount.Load()))
		return nil
	}

	var errs []error
	e.cancelLoops()
	e.loops.Wait()
	e.clearHeldBack() // their leases are released below, with the others'

	e.outbox.stopDispatch.Store(true)
	for _, s := range e.shards {
		s.send(func(s *shard) { s.shutdown(mode == stopCancelling) })
	}
	for _, s := range e.shards {
		select {
		case <-s.done:
		case <-ctx.Done():
		}
	}
	if err := e.flusher.close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.outbox.close(ctx); err != nil {
		errs = append(errs, err)
	}
	var ids []uuid.UUID
	e.held.Range(func(k, _ any) bool {
		ids = append(ids, k.(uuid.UUID))
		return true
	})
	if len(ids) > 0 && ctx.Err() == nil {
		if err := e.cfg.Store.ReleaseLeases(ctx, e.cfg.Owner, ids); err != nil {
			errs = append(errs, fmt.Errorf("releasing %d leases: %w", len(ids), err))
		}
	}
	e.cancelRun()
	e.life.Wait()
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("engine stopped with errors", zap.Int("released", len(ids)), zap.Error(err))
		return fmt.Errorf("engine: stop: %w", err)
	}
	e.log.Info("engine stopped", zap.Int("released", len(ids)))
	return nil
}

// shardFor returns the shard that owns an instance.
func (e *Engine) shardFor(id uuid.UUID) *shard {
	return e.shards[binary.BigEndian.Uint64(id[8:])%uint64(len(e.shards))]
}

// wakeClaimer asks the claimer to look for due instances now.
func (e *Engine) wakeClaimer() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// claimSignal returns a channel closed at the next claim.
func (e *Engine) claimSignal() <-chan struct{} {
	e.claimedMu.Lock()
	defer e.claimedMu.Unlock()
	return e.claimed
}

func (e *Engine) signalClaimed() {
	e.claimedMu.Lock()
	defer e.claimedMu.Unlock()
	close(e.claimed)
	e.claimed = make(chan struct{})
}

// TaskResult implements ResultSink: the result is routed to the shard that
// owns the instance. Results for instances not held, and attempts not in
// flight, are ignored (counted in Stats, logged at debug).
func (e *Engine) TaskResult(_ context.Context, r port.TaskResult) {
	if !e.running.Load() {
		e.ignoreResult(&r, "engine not running")
		return
	}
	e.shardFor(r.InstanceID).inbox.push(shardMsg{result: &r})
}

// TaskProgress implements ResultSink: the latest heartbeat of a running
// attempt shows in GetInstance and WatchInstance.
func (e *Engine) TaskProgress(_ context.Context, p port.TaskProgress) {
	if !e.running.Load() {
		return
	}
	e.shardFor(p.InstanceID).inbox.push(shardMsg{progress: &p})
}

func (e *Engine) ignoreResult(r *port.TaskResult, why string) {
	e.ignored.Add(1)
	e.log.Debug("result ignored", zap.String("reason", why), zap.Stringer("instance", r.InstanceID),
		zap.String("task", r.ExecutionID), zap.Uint32("attempt", r.Attempt))
}

// Stats are counters of the runloop, for metrics and tests.
type Stats struct {
	// Held is the number of instances in memory, HeldBack included.
	Held int
	// HeldBack is the number of instances claimed and not started yet:
	// their capabilities are saturated (see Admission).
	HeldBack int
	// ResultsIgnored counts results for instances not held here or
	// attempts no longer in flight.
	ResultsIgnored uint64
	// Evictions counts instances dropped because their ownership was lost.
	Evictions uint64
	// Parked counts instances that left memory to wait (waits.go).
	Parked uint64
}

// Stats returns the current counters.
func (e *Engine) Stats() Stats {
	return Stats{Held: int(e.heldCount.Load()), HeldBack: e.heldBackCount(), ResultsIgnored: e.ignored.Load(), Evictions: e.evictions.Load(),
		Parked: e.parked.Load()}
}

// partitionCounters are one partition's counters.
type partitionCounters struct {
	tasks, evictions atomic.Uint64
}

// partitionOf is the partition of an instance of this engine's mesh.
func (e *Engine) partitionOf(id uuid.UUID) *partitionCounters {
	return &e.parts[port.PartitionOf(id, e.cfg.PartitionCount)]
}

// PartitionStat is what an engine counts of one partition it owns.
type PartitionStat struct {
	Partition int
	Epoch     uint64 // 0: the engine fenced none (it serves every partition)
	Held      int    // instances of the partition in memory now
	Tasks     uint64 // attempts' results recorded since the engine started
	Evictions uint64 // instances dropped because the store refused a write
}

// PartitionStats reports the partitions this engine owns (every partition
// of the mesh when it fenced none), by partition. It walks the instances
// in memory: a call for an operator's view, not for a hot path.
func (e *Engine) PartitionStats() []PartitionStat {
	held := make([]int, len(e.parts))
	e.held.Range(func(k, _ any) bool {
		held[port.PartitionOf(k.(uuid.UUID), e.cfg.PartitionCount)]++
		return true
	})
	ps := e.owned
	if len(ps) == 0 {
		ps = make([]int, len(e.parts))
		for i := range ps {
			ps[i] = i
		}
	}
	out := make([]PartitionStat, 0, len(ps))
	for _, p := range ps {
		c := &e.parts[p]
		out = append(out, PartitionStat{Partition: p, Epoch: e.cfg.Partitions[p], Held: held[p],
			Tasks: c.tasks.Load(), Evictions: c.evictions.Load()})
	}
	return out
}
