package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// claimLoop claims due instances while there is room in memory: at once
// when woken (a submission, a cancel request, an instance leaving memory),
// and every ClaimInterval otherwise.
func (e *Engine) claimLoop(ctx context.Context) {
	timer := e.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-timer.C():
		}
		e.parkWakes.due(e.cfg.Clock.Now())
		for e.claimOnce(ctx) {
		}
		next := e.cfg.ClaimInterval
		if at, ok := e.parkWakes.next(); ok {
			next = min(next, max(at.Sub(e.cfg.Clock.Now()), 0))
		}
		timer.Reset(next)
	}
}

// claimOnce claims one batch and hands each instance to its shard. It
// reports whether a full batch came back (more may be due).
func (e *Engine) claimOnce(ctx context.Context) bool {
	room := int64(e.cfg.MaxInstances) - e.heldCount.Load()
	if room <= 0 || ctx.Err() != nil {
		return false
	}
	limit := int(min(room, int64(e.cfg.ClaimBatch)))
	claimed, err := e.cfg.Store.ClaimInstances(ctx, port.ClaimRequest{
		Owner: e.cfg.Owner, Term: e.cfg.Term, Lease: e.cfg.Lease, Limit: limit, Partitions: e.owned,
	})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("claiming instances failed", zap.Error(err))
		}
		return false
	}
	e.heldCount.Add(int64(len(claimed)))
	var unloaded []uuid.UUID
	for _, c := range claimed {
		pe, perr := e.planOf(ctx, c.WorkflowVersionID)
		if errors.Is(perr, port.ErrStoreUnavailable) {
			// Not the instance's fault: it is not failed for it, but given
			// back (or left to its lease) for a later claim.
			unloaded = append(unloaded, c.ID)
			continue
		}
		e.take(c, pe, perr)
	}
	if len(unloaded) > 0 {
		e.heldCount.Add(-int64(len(unloaded)))
		err := e.cfg.Store.ReleaseLeases(ctx, e.cfg.Owner, unloaded)
		e.log.Warn("claimed instances whose workflow could not be read from the store were given back",
			zap.Int("instances", len(unloaded)), zap.NamedError("release_error", err))
		return false
	}
	if len(claimed) > 0 {
		e.signalClaimed()
		e.log.Debug("claimed instances", zap.Int("count", len(claimed)))
	}
	full := len(claimed) == limit
	e.dueLeft.Store(full)
	return full
}

// planWait bounds how long a claim waits for a workflow version that the
// store cannot read right now (it is failing over, say).
const planWait = 10 * time.Second

// planOf returns the plan of a claimed instance's workflow version. While
// the store is unavailable it tries again for up to planWait: an instance
// claimed just before a database failover must not fail for it. An error
// that is the store's (unavailable) or ctx's is returned wrapping
// ErrStoreUnavailable: the caller gives the instance back rather than
// failing it.
func (e *Engine) planOf(ctx context.Context, version int64) (*planEntry, error) {
	clk := e.cfg.Clock
	deadline := clk.Now().Add(planWait)
	backoff := 10 * time.Millisecond
	for {
		pe, err := e.q.plans.get(ctx, version)
		switch {
		case err == nil:
			return pe, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %w", port.ErrStoreUnavailable, err)
		case !errors.Is(err, port.ErrStoreUnavailable) || !clk.Now().Add(backoff).Before(deadline):
			return nil, err
		}
		t := clk.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
		backoff = min(2*backoff, time.Second)
	}
}

// take hands a claimed instance to its shard, which hydrates it. Its place
// in heldCount is already counted.
func (e *Engine) take(c port.ClaimedInstance, pe *planEntry, perr error) {
	s := e.shardFor(c.ID)
	h := &holder{id: c.ID, shard: s}
	h.state.Store(port.StateRunning)
	e.held.Store(c.ID, h)
	if e.holdBack(c, pe, perr, h) {
		return
	}
	s.send(func(s *shard) { s.hydrate(c, pe, perr, h) })
}

// reserve takes up to n places in memory for submissions the store is
// to store claimed by this engine (NewInstance.Claim), and returns how
// many it took: none unless the runloop runs with room to spare, and none
// while instances queued earlier may wait to be claimed (dueLeft), so
// that new submissions do not overtake them. adopt gives back the places
// it does not fill.
//
// Claiming at submission saves the claim transaction that would follow
// each submission's (claims were the store's most frequent write), and
// the instance's first tasks are dispatched as Submit returns rather
// than a claim later.
func (e *Engine) reserve(n int) int {
	if n <= 0 || !e.running.Load() || e.dueLeft.Load() {
		return 0
	}
	for {
		held := e.heldCount.Load()
		room := int64(e.cfg.MaxInstances) - held
		if room <= 0 {
			// Submissions queue unclaimed from now on: the claimer takes
			// them in their turn.
			e.dueLeft.Store(true)
			return 0
		}
		k := min(room, int64(n))
		if e.heldCount.CompareAndSwap(held, held+k) {
			return int(k)
		}
	}
}

// submitClaim is the claim reserve's places are stored under.
func (e *Engine) submitClaim() *port.SubmitClaim {
	return &port.SubmitClaim{Owner: e.cfg.Owner, Term: e.cfg.Term, Lease: e.cfg.Lease}
}

// adopt takes into memory the instances of ins that the store stored
// claimed (qs[i].Claimed; qs is nil when queueing failed) and gives back
// the places of the reserved ones it did not take. An engine that stopped
// meanwhile takes none and releases their leases, so the next engine
// claims them at once; if that fails they wait for their lease to lapse.
// Under e.mu, so that Stop finds every instance taken before it began
// (and releases its lease) and none after.
func (e *Engine) adopt(pe *planEntry, ins []port.NewInstance, qs []port.Queued, reserved int) {
	var (
		taken   int
		orphans []uuid.UUID
	)
	e.mu.Lock()
	running := e.life.Running()
	for i, q := range qs {
		switch {
		case !q.Claimed:
		case !running:
			orphans = append(orphans, q.ID)
		default:
			e.take(port.ClaimedInstance{ID: q.ID, WorkflowVersionID: ins[i].WorkflowVersionID, Inputs: ins[i].Inputs,
				State: ins[i].State, CreatedAt: q.CreatedAt, Parent: ins[i].Parent}, pe, nil)
			taken++
		}
	}
	e.mu.Unlock()
	if unused := reserved - taken; unused != 0 {
		e.heldCount.Add(-int64(unused))
	}
	if taken > 0 {
		e.signalClaimed()
	}
	if len(orphans) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), submitBatchTimeout)
		defer cancel()
		if err := e.cfg.Store.ReleaseLeases(ctx, e.cfg.Owner, orphans); err != nil {
			e.log.Warn("the engine stopped while instances were being submitted to it; their leases could not be released, so they start when the leases lapse",
				zap.Int("instances", len(orphans)), zap.Duration("lease", e.cfg.Lease), zap.Error(err))
		}
	}
}

// leaseLoop refreshes the leases of held instances every LeaseRefresh.
// Lost leases evict their instances; cancel requests are applied. When
// refreshes keep failing for so long that the leases may have lapsed, every
// instance is evicted: another owner may have taken them, and this engine
// must stop acting on them before that can happen.
func (e *Engine) leaseLoop(ctx context.Context) {
	timer := e.cfg.Clock.NewTimer(e.cfg.LeaseRefresh)
	defer timer.Stop()
	lastOK := e.cfg.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		if e.refreshOnce(ctx) {
			lastOK = e.cfg.Clock.Now()
		} else if ctx.Err() == nil && e.cfg.Clock.Now().Sub(lastOK) >= e.cfg.Lease-e.cfg.LeaseRefresh {
			e.log.Error("leases could not be refreshed in time; evicting every instance", zap.Duration("lease", e.cfg.Lease))
			e.held.Range(func(_, v any) bool {
				e.evictHolder(v.(*holder), "lease refresh failing")
				return true
			})
		}
		timer.Reset(e.cfg.LeaseRefresh)
	}
}

// refreshBatch bounds the ids of one RefreshLeases call.
const refreshBatch = 5000

// refreshOnce refreshes every held lease; false means a call failed.
func (e *Engine) refreshOnce(ctx context.Context) bool {
	var ids []uuid.UUID
	e.held.Range(func(k, _ any) bool {
		ids = append(ids, k.(uuid.UUID))
		return true
	})
	ok := true
	for len(ids) > 0 {
		batch := ids[:min(len(ids), refreshBatch)]
		ids = ids[len(batch):]
		st, err := e.cfg.Store.RefreshLeases(ctx, port.LeaseRefresh{Owner: e.cfg.Owner, Term: e.cfg.Term, Lease: e.cfg.Lease, IDs: batch})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("refreshing leases failed", zap.Int("instances", len(batch)), zap.Error(err))
			}
			ok = false
			continue
		}
		for _, id := range st.Lost {
			if h, found := e.held.Load(id); found {
				e.evictHolder(h.(*holder), "lease lost")
			}
		}
		for _, id := range st.CancelRequested {
			e.cancelHeld(id, "cancelled by request")
		}
	}
	return ok
}

// cancelHeld applies a cancellation, durable already, to an instance this
// engine holds: at once to one held back, on its shard otherwise; nothing
// to one it does not hold.
func (e *Engine) cancelHeld(id uuid.UUID, reason string) {
	if e.cancelHeldBack(id) {
		return
	}
	if h, found := e.held.Load(id); found {
		h := h.(*holder)
		h.shard.send(func(s *shard) {
			if inst := s.insts[h.id]; inst != nil && inst.h == h {
				s.cancel(inst, reason, s.now())
			}
		})
	}
}

// evictHolder evicts the instance h names, if it is still held.
func (e *Engine) evictHolder(h *holder, reason string) {
	if e.dropHeldBack(h.id, reason) {
		return
	}
	h.shard.send(func(s *shard) {
		if inst := s.insts[h.id]; inst != nil && inst.h == h {
			s.evict(inst, reason)
		}
	})
}

// sweepBatch bounds one Sweep or ReclaimExpired call.
const sweepBatch = 1000

// sweepLoop deletes finished instances older than Retention and clears
// lapsed leases, every SweepInterval.
func (e *Engine) sweepLoop(ctx context.Context) {
	timer := e.cfg.Clock.NewTimer(e.cfg.SweepInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		before := e.cfg.Clock.Now().Add(-e.cfg.Retention)
		total := 0
		for ctx.Err() == nil {
			n, err := e.cfg.Store.Sweep(ctx, port.SweepRequest{Before: before, Limit: sweepBatch})
			if err != nil {
				if ctx.Err() == nil {
					e.log.Warn("retention sweep failed", zap.Error(err))
				}
				break
			}
			total += n
			if n < sweepBatch {
				break
			}
		}
		if total > 0 {
			e.log.Info("retention sweep", zap.Int("deleted", total), zap.Time("finished_before", before))
		}
		if n, err := e.cfg.Store.ReclaimExpired(ctx, sweepBatch); err != nil {
			if ctx.Err() == nil {
				e.log.Warn("reclaiming expired leases failed", zap.Error(err))
			}
		} else if n > 0 {
			e.log.Info("reclaimed expired leases", zap.Int("count", n))
			e.wakeClaimer()
		}
		timer.Reset(e.cfg.SweepInterval)
	}
}
