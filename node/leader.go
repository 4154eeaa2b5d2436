package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/mesh"
)

// meshNode is what the node needs from the mesh; *mesh.Mesh implements it.
// Declared here, with its consumer, so that the leader loop and the
// forwarding can be tested against a fake.
type meshNode interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	GossipAddr() string
	Members() []mesh.Member
	// Leadership delivers this node's view of the leadership: the current
	// value first, then changes; values may be coalesced but the latest is
	// never lost.
	Leadership() (<-chan mesh.Leadership, func())
	Leader() mesh.Leadership
	// Barrier returns once every Raft entry committed before it is applied
	// on this node (the leader).
	Barrier(ctx context.Context) error
	UpdateMeta(meta mesh.NodeMeta) error
	// Halt stops without leaving, as a crash would.
	Halt() error
	// Subscribe delivers membership events until the returned function is
	// called.
	Subscribe() (<-chan mesh.Event, func())
	// State is the replicated control state (on servers); StateChanged is
	// closed at its next change.
	State() mesh.ControlState
	StateChanged() <-chan struct{}
	// CheckPartitions says why this server's --partitions does not match
	// the mesh's count (nil: it matches, or was not given, or the count
	// is not known yet).
	CheckPartitions() error
	// Apply commits cmd through Raft; only the leader can.
	Apply(ctx context.Context, cmd mesh.Command) error
	// GossipKeys and ChangeKeyring read and change the gossip keyring.
	GossipKeys() [][]byte
	ChangeKeyring(op mesh.KeyringOp, key []byte) error
}

var _ meshNode = (*mesh.Mesh)(nil)

// Timings of the leader loop.
const (
	// barrierTimeout bounds one Barrier before the engine starts.
	barrierTimeout = 10 * time.Second
	// establishBackoffMin and establishBackoffMax bound the wait before
	// trying again to start the engine of a term whose Barrier or engine
	// start failed while this node still leads.
	establishBackoffMin = 50 * time.Millisecond
	establishBackoffMax = 2 * time.Second
)

// leaderLoop makes the engine follow leadership: one Engine per Raft term,
// running only on the leader. It is the only writer of the node's active
// engine.
//
// It consumes the mesh's Leadership subscription, which always ends on the
// latest value, so a signal dropped in between cannot leave two runloops:
// the loop acts on the state it is told about, not on edges. For every
// value it
//
//  1. steps down first: if an engine runs and the value is not "leader in
//     that engine's term", the engine is Abandoned at once (no writes, no
//     cancels, no lease releases: a newer term may already own the
//     instances) and unpublished — before anything else happens;
//  2. steps up: if the value says this node leads and no engine runs, it
//     waits for a Raft Barrier (every entry of earlier terms applied),
//     checks that it still leads in that term, and starts a new Engine
//     with the Raft term as its fencing token. The store refuses the
//     writes of an older term once a newer one claimed, so even an engine
//     started just before a step-down it has not seen yet cannot
//     overwrite its successor's state.
//
// A failed Barrier or engine start is retried with backoff while the node
// still leads in that term.
type leaderLoop struct {
	mesh meshNode
	log  *zap.Logger
	// newEngine builds (without starting) the engine of a term, with the
	// Router that is its Dispatcher.
	newEngine func(term uint64, parts partitionSet) (*termEngine, error)
	// partitions waits for the partitions this node owns in term (see
	// awaitPartitions). nil: the engine owns none by name (tests).
	partitions func(ctx context.Context, term uint64) (partitionSet, error)
	// publish makes e the engine the API goes to; nil: none (the node
	// follows).
	publish func(e *engine.Engine)

	cur *termEngine // the running engine; only the loop's goroutine touches it
}

// run follows leadership until ctx ends. It returns the engine still
// running then (nil if none), still published: the node stops it
// gracefully, or abandons it if leadership moved meanwhile.
func (l *leaderLoop) run(ctx context.Context) *termEngine {
	updates, cancel := l.mesh.Leadership()
	defer cancel()
	var (
		latest  mesh.Leadership
		retry   *time.Timer
		backoff = establishBackoffMin
	)
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
			retry = nil
		}
	}
	defer stopRetry()
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return l.cur
		case v, ok := <-updates:
			if !ok {
				// The mesh stopped: nothing leads from here on.
				l.stepDown("the mesh stopped")
				return nil
			}
			if v.IsLeader != latest.IsLeader || v.Term != latest.Term {
				backoff = establishBackoffMin
			}
			latest = v
		case <-retryC:
			retry = nil
		}
		stopRetry()

		if l.cur != nil && (!latest.IsLeader || latest.Term != l.cur.Term()) {
			why := "leadership lost"
			if latest.IsLeader {
				why = "a new term began"
			}
			l.stepDown(why)
		}
		if !latest.IsLeader || l.cur != nil {
			continue
		}
		if err := l.stepUp(ctx, latest.Term); err != nil {
			if ctx.Err() != nil {
				return l.cur
			}
			if errors.Is(err, errLeadershipMoved) {
				l.log.Debug("leadership moved before the engine started", zap.Uint64("term", latest.Term))
				continue // the subscription brings the new value
			}
			l.log.Warn("starting the engine of this term failed; retrying while this node leads",
				zap.Uint64("term", latest.Term), zap.Duration("backoff", backoff), zap.Error(err))
			retry = time.NewTimer(backoff)
			backoff = min(2*backoff, establishBackoffMax)
		}
	}
}

// errLeadershipMoved: the term to start an engine for ended while the
// loop waited for the Barrier.
var errLeadershipMoved = errors.New("leadership moved")

// stepUp starts the engine of term after a Barrier.
func (l *leaderLoop) stepUp(ctx context.Context, term uint64) error {
	began := time.Now()
	bctx, cancel := context.WithTimeout(ctx, barrierTimeout)
	err := l.mesh.Barrier(bctx)
	cancel()
	if err != nil {
		if now := l.mesh.Leader(); !now.IsLeader || now.Term != term {
			return errLeadershipMoved
		}
		return fmt.Errorf("raft barrier: %w", err)
	}
	if now := l.mesh.Leader(); !now.IsLeader || now.Term != term {
		return errLeadershipMoved
	}
	var parts partitionSet
	if l.partitions != nil {
		if parts, err = l.partitions(ctx, term); err != nil {
			if now := l.mesh.Leader(); !now.IsLeader || now.Term != term {
				return errLeadershipMoved
			}
			return fmt.Errorf("waiting for this term's partitions: %w", err)
		}
	}
	e, err := l.newEngine(term, parts)
	if err != nil {
		return fmt.Errorf("building the engine: %w", err)
	}
	if err := e.Start(ctx); err != nil {
		e.Abandon()
		return fmt.Errorf("starting the engine: %w", err)
	}
	l.cur = e
	l.publish(e.Engine)
	l.log.Info("leading: engine started", zap.Uint64("term", term), zap.Duration("took", time.Since(began)),
		zap.Int("partitions", len(parts.epochs)), zap.Int("partition_count", parts.count))
	return nil
}

// stepDown abandons the running engine, if any, then unpublishes it. An
// API call that still reaches the abandoned engine meanwhile is answered
// from the store, as by any engine that does not run.
func (l *leaderLoop) stepDown(why string) {
	if l.cur == nil {
		return
	}
	e := l.cur
	l.cur = nil
	e.Abandon()
	l.publish(nil)
	l.log.Info("following: engine abandoned", zap.Uint64("term", e.Term()), zap.String("reason", why))
}

// partitionSet is what an engine owns: partition → epoch, of count.
type partitionSet struct {
	count  int
	epochs map[int]uint64
}

// awaitPartitions waits until the control state gives this node every
// partition in term (the leader's reconciler assigns them right after the
// election), or ctx ends, or barrierTimeout passes.
func awaitPartitions(ctx context.Context, m meshNode, self string, term uint64) (partitionSet, error) {
	ctx, cancel := context.WithTimeout(ctx, barrierTimeout)
	defer cancel()
	for {
		changed := m.StateChanged()
		st := m.State()
		if epochs, ok := st.PartitionsOwnedBy(self, term); ok {
			return partitionSet{count: st.PartitionCount, epochs: epochs}, nil
		}
		select {
		case <-ctx.Done():
			return partitionSet{}, fmt.Errorf("the control state gave this node no partitions in term %d: %w", term, ctx.Err())
		case <-changed:
		}
	}
}
