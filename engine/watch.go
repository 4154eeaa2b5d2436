package engine

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// catchUpGap is the least time between two snapshots sent to a watcher
// that fell behind the event log. A wide spread emits an event per task,
// faster than a client reads; each catch-up snapshot is the whole
// instance, built on its shard. Unlimited, a watcher of a 100,000-wide
// spread cost the engine a third more CPU and the run 40% more time;
// the snapshot after the gap carries everything the watcher missed.
const catchUpGap = 250 * time.Millisecond

// WatchInstance streams the events of an instance to send, in order, with
// Seq increasing by one, until the instance is finished or ctx ends (then
// it returns ctx's error) or send fails (then it returns send's error).
//
// The stream starts with an EventSnapshot (the whole view) when afterSeq is
// 0 or no longer available; otherwise it resumes with the event after
// afterSeq. It ends after an EventState whose State is terminal — always
// the last event of a stream that ends normally, also for an instance that
// had already finished (a snapshot, then that event).
//
// Design: a held instance has an in-memory event log (the last
// EventLogSize events); watchers read it without ever slowing the runloop,
// and one that falls behind gets a fresh snapshot — at most one per
// catchUpGap, so that a slow watcher of a wide instance cannot make the
// shard build whole views back to back. An instance this engine
// does not hold (queued, finished, or owned elsewhere) is watched by
// polling the Store every WatchPollInterval (and whenever this engine
// claims instances): a snapshot, then an EventState for each status change. If the instance moves into or out of this engine
// while watched, the stream continues with a snapshot.
func (e *Engine) WatchInstance(ctx context.Context, id uuid.UUID, afterSeq uint64, send func(Event) error) error {
	cursor := afterSeq
	snapshot := afterSeq == 0
	for {
		done, err := e.watchLive(ctx, id, &cursor, snapshot, send)
		if err != nil || done {
			return err
		}
		// Not held here (or no longer): the store tells the rest.
		if done, err = e.q.watchStore(ctx, id, &cursor, send, e.Holds, e.claimSignal, e.GetInstance); err != nil || done {
			return err
		}
		snapshot = true // it came to this engine: continue with a snapshot
	}
}

// watchLive streams from the event log of the instance while this engine
// holds it; done is true once the terminal event was sent.
func (e *Engine) watchLive(ctx context.Context, id uuid.UUID, cursor *uint64, snapshot bool, send func(Event) error) (done bool, err error) {
	var (
		buf      []Event
		lastSnap time.Time // wall time: this paces work, not the engine's logic
	)
	for {
		if wait := catchUpGap - time.Since(lastSnap); snapshot && !lastSnap.IsZero() && wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		var (
			log  *eventLog
			snap *Event
		)
		at := *cursor // fn may run after onShard gave up (ctx): it reads a copy
		ok, err := e.onShard(ctx, id, func(s *shard, inst *instance) {
			log = inst.log
			if _, covered, _, _ := log.read(at, 0, nil); snapshot || !covered {
				v := inst.view(s.now())
				snap = &Event{Seq: log.last(), Time: s.now(), Kind: EventSnapshot, State: v.State, Index: -1, Instance: &v}
			}
		})
		if err != nil || !ok {
			return false, err
		}
		snapshot = false
		if snap != nil {
			lastSnap = time.Now()
			if err := send(*snap); err != nil {
				return false, err
			}
			*cursor = snap.Seq
		}
		for {
			evs, covered, wait, closed := log.read(*cursor, 256, buf)
			buf = evs
			if !covered {
				snapshot = true // fell behind the ring
				break
			}
			for _, ev := range evs {
				if err := send(ev); err != nil {
					return false, err
				}
				*cursor = ev.Seq
				if ev.Kind == EventState && ev.State.Terminal() {
					return true, nil
				}
			}
			if len(evs) > 0 {
				continue
			}
			if closed {
				return false, nil
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
	}
}

// Holds reports whether this engine, running, holds instance id: results
// of its attempts are taken now. An instance held back (admission.go) is
// not held yet: it has no attempts, and watchers read it from the Store.
func (e *Engine) Holds(id uuid.UUID) bool {
	h, ok := e.held.Load(id)
	return ok && e.running.Load() && !h.(*holder).gone.Load() && !h.(*holder).heldBack.Load()
}
