package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/clock"
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

// ownerLoop makes the node's engine follow what the node owns: the Raft
// leadership and, in the control state, the partitions assigned to it. It
// is the only writer of the node's active engine.
//
// What the node should run is an ownership (want): on the Raft leader, the
// engine of its term with the partitions it owns (leader placement: all of
// them, re-assigned in every term); on any other server, under balanced
// placement, an engine for the partitions it owns while it knows a
// leader; otherwise nothing. Whenever the ownership changes — a new term
// on the leader, partitions gained or lost, epochs raised, the leader lost
// for longer than ownerLease — the running engine is Abandoned (no
// writes, no cancels, no lease releases: a newer owner may have its
// instances already) and unpublished before anything else happens, and
// an engine for the new ownership is started. The loop acts on the state
// it reads, not on edges: the Leadership subscription always ends on the
// latest value and the control state is read afresh after each change,
// so a signal dropped in between cannot leave a stale engine running.
//
// The leader's engine starts after a Raft Barrier (every entry of earlier
// terms applied, its placement included). Safety never rests on this loop
// being quick: every partition's writes are fenced by its epoch in the
// store (FencePartitions), and the Waggler hosts refuse a session naming
// an older epoch, so an engine started just before a move it has not seen
// yet cannot overwrite its successor's state. A failed Barrier or engine
// start is retried with backoff while the ownership stays.
type ownerLoop struct {
	mesh  meshNode
	log   *zap.Logger
	clock clock.Clock // nil: the system's (tests)
	// newEngine builds (without starting) the engine of an ownership, with
	// the Router that is its Dispatcher.
	newEngine func(o ownership) (*termEngine, error)
	// want says what this node should own now (see ownerLoop); nil: the
	// leader owns every instance by name (one engine per term, tests).
	want func(lead mesh.Leadership, now time.Time) (ownership, bool)
	// publish makes e the engine the API goes to; nil: none (the node
	// follows).
	publish func(e *engine.Engine)

	cur *termEngine // the running engine; only the loop's goroutine touches it
	own ownership   // what cur runs
}

// ownership is what one engine life runs: its fencing term, whether it is
// the Raft leader's (which also runs the schedules and sweeps), and the
// partitions it owns with their epochs.
type ownership struct {
	term   uint64
	leader bool
	parts  partitionSet
	// none says, when the node should own nothing, why.
	none string
}

// same reports whether o and p are one engine life: an engine outlives
// terms and leadership as long as its partitions stay (leadership moving
// only promotes or demotes it: see promote). Without partitions (tests)
// every term is a new life.
func (o ownership) same(p ownership) bool {
	if o.parts.count != p.parts.count || (o.parts.count == 0 && (o.leader != p.leader || o.term != p.term)) {
		return false
	}
	return maps.Equal(o.parts.epochs, p.parts.epochs)
}

// leads is the Raft term o leads in; 0 for a follower.
func (o ownership) leads() uint64 {
	if o.leader {
		return o.term
	}
	return 0
}

func (o ownership) String() string {
	role := "follower"
	if o.leader {
		role = "leader"
	}
	return fmt.Sprintf("%s of term %d owning %d of %d partitions", role, o.term, len(o.parts.epochs), o.parts.count)
}

// recheckEvery is how often the loop looks again without a signal: the
// owner lease is measured in time, not announced.
const recheckEvery = 100 * time.Millisecond

// run follows ownership until ctx ends. It returns the engine still
// running then (nil if none), still published: the node stops it
// gracefully, or abandons it if ownership moved meanwhile.
func (l *ownerLoop) run(ctx context.Context) *termEngine {
	updates, cancel := l.mesh.Leadership()
	defer cancel()
	var (
		latest  mesh.Leadership
		retry   *time.Timer
		backoff = establishBackoffMin
		tried   ownership // what the last failed start was for
	)
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
			retry = nil
		}
	}
	defer stopRetry()
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
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
				// The mesh stopped: nothing is owned from here on.
				l.stepDown("the mesh stopped", false)
				return nil
			}
			latest = v
		case <-l.mesh.StateChanged():
		case <-recheck.C:
		case <-retryC:
			retry = nil
		}
		want, ok := l.wanted(latest)
		if l.cur != nil && (!ok || !want.same(l.own)) {
			// A move the leader made while this node hears from it is
			// handed over (written, released); a node that lost the
			// leader, or its lease, drops everything at once.
			l.stepDown(l.why(latest, want, ok), latest.Leader != "" && want.none == "")
		}
		if l.cur != nil && want.leads() != l.own.leads() {
			if err := l.promote(ctx, want); err != nil {
				if ctx.Err() != nil {
					return l.cur
				}
				l.log.Warn("taking the leader's part in the running engine failed; retrying while this node leads",
					zap.Uint64("term", want.term), zap.Error(err))
				stopRetry()
				retry = time.NewTimer(backoff)
				backoff = min(2*backoff, establishBackoffMax)
			}
			continue
		}
		if !ok || l.cur != nil || (retry != nil && want.same(tried)) {
			continue
		}
		if !want.same(tried) {
			backoff = establishBackoffMin
		}
		stopRetry()
		if err := l.stepUp(ctx, want); err != nil {
			if ctx.Err() != nil {
				return l.cur
			}
			if errors.Is(err, errLeadershipMoved) {
				l.log.Debug("leadership moved before the engine started", zap.Uint64("term", want.term))
				continue // the subscription brings the new value
			}
			l.log.Warn("starting the engine failed; retrying while this node owns the same",
				zap.Stringer("ownership", want), zap.Duration("backoff", backoff), zap.Error(err))
			tried = want
			retry = time.NewTimer(backoff)
			backoff = min(2*backoff, establishBackoffMax)
			continue
		}
		tried = ownership{}
	}
}

// now reads the node's clock.
func (l *ownerLoop) now() time.Time {
	if l.clock == nil {
		return clock.System().Now()
	}
	return l.clock.Now()
}

// wanted is the ownership this node should run now.
func (l *ownerLoop) wanted(lead mesh.Leadership) (ownership, bool) {
	if l.want != nil {
		return l.want(lead, l.now())
	}
	return ownership{term: lead.Term, leader: true}, lead.IsLeader
}

// why says why the running engine stops.
func (l *ownerLoop) why(lead mesh.Leadership, want ownership, ok bool) string {
	switch {
	case l.own.leader && !lead.IsLeader:
		return "leadership lost"
	case l.own.leader && lead.Term != l.own.term:
		return "a new term began"
	case !ok && want.none != "":
		return want.none
	case !ok:
		return "this node owns nothing now"
	}
	return "ownership changed: now " + want.String()
}

// promote gives the running engine the leader's part (after a Barrier,
// when this node now leads) or takes it away, its partitions staying: the
// engine runs on, its Router's sessions are opened again as the new
// owner's.
func (l *ownerLoop) promote(ctx context.Context, o ownership) error {
	if o.leader {
		bctx, cancel := context.WithTimeout(ctx, barrierTimeout)
		err := l.mesh.Barrier(bctx)
		cancel()
		if now := l.mesh.Leader(); !now.IsLeader || now.Term != o.term {
			return nil // the subscription brings the new value
		}
		if err != nil {
			return fmt.Errorf("raft barrier: %w", err)
		}
	}
	l.cur.SetLeader(o.leads())
	l.own = o
	msg := "following: engine keeps its partitions"
	if o.leader {
		msg = "leading: engine promoted"
	}
	l.log.Info(msg, zap.Uint64("term", o.term), zap.Ints("partitions", slices.Sorted(maps.Keys(o.parts.epochs))))
	return nil
}

// errLeadershipMoved: the term to start an engine for ended while the
// loop waited for the Barrier.
var errLeadershipMoved = errors.New("leadership moved")

// stepUp starts the engine of o, after a Barrier on the leader.
func (l *ownerLoop) stepUp(ctx context.Context, o ownership) error {
	began := l.now()
	if o.leader {
		bctx, cancel := context.WithTimeout(ctx, barrierTimeout)
		err := l.mesh.Barrier(bctx)
		cancel()
		if now := l.mesh.Leader(); !now.IsLeader || now.Term != o.term {
			return errLeadershipMoved
		}
		if err != nil {
			return fmt.Errorf("raft barrier: %w", err)
		}
	}
	e, err := l.newEngine(o)
	if err != nil {
		return fmt.Errorf("building the engine: %w", err)
	}
	if err := e.Start(ctx); err != nil {
		e.Abandon()
		return fmt.Errorf("starting the engine: %w", err)
	}
	l.cur, l.own = e, o
	l.publish(e.Engine)
	msg := "owning partitions: engine started"
	if o.leader {
		msg = "leading: engine started"
	}
	l.log.Info(msg, zap.Bool("leader", o.leader), zap.Uint64("term", o.term), zap.Duration("took", l.now().Sub(began)),
		zap.Ints("partitions", slices.Sorted(maps.Keys(o.parts.epochs))), zap.Int("partition_count", o.parts.count))
	return nil
}

// releaseTimeout bounds handing an engine's instances over (Release)
// before what is left is abandoned.
const releaseTimeout = 5 * time.Second

// stepDown stops the running engine, if any — releasing its instances
// (written, leases released, nothing cancelled) when release is set,
// abandoning them otherwise — then unpublishes it. An API call that still
// reaches the stopped engine meanwhile is answered from the store, as by
// any engine that does not run. Either way the store's epoch check refuses
// whatever the engine writes after the partitions' next owner fenced them.
func (l *ownerLoop) stepDown(why string, release bool) {
	if l.cur == nil {
		return
	}
	e := l.cur
	l.cur, l.own = nil, ownership{}
	if release {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err := e.Release(ctx)
		cancel()
		l.publish(nil)
		l.log.Info("engine released its instances", zap.Uint64("term", e.Term()), zap.String("reason", why), zap.Error(err))
		return
	}
	e.Abandon()
	l.publish(nil)
	l.log.Info("engine abandoned", zap.Uint64("term", e.Term()), zap.String("reason", why))
}

// partitionSet is what an engine owns: partition → epoch, of count.
type partitionSet struct {
	count  int
	epochs map[int]uint64
}

// ownerLease is how long a server that is not the leader keeps running
// its partitions without knowing a leader. It is shorter than the
// earliest a live server's partitions can be given to another — the
// leader moves them once memberlist declares it failed (its suspicion
// timeout: 4–6 s with robonode's memberlist settings) or the Raft
// heartbeats to it fail (their RPC timeout, 10 s) — so a server cut off
// from the leader stops dispatching before anyone else owns its
// partitions (a killed server's move sooner, but it runs nothing). It is
// longer than an election under load (about a second at a quarter of a
// CPU), which must not cost every follower its engine. Safety does not
// rest on it: the store refuses the writes of an older epoch whenever
// they come.
const ownerLease = 2 * time.Second

// owned is what this node should own under placement (the node's want):
// see ownerLoop. lastLeader is when this node last knew a leader (kept
// up to date by the caller).
func owned(lead mesh.Leadership, st mesh.ControlState, self string, placement mesh.PartitionPlacement, leaderless time.Duration) (ownership, bool) {
	if lead.Term == 0 {
		return ownership{}, false
	}
	if lead.IsLeader {
		asked := lead.Term // leader placement: this term's assignment
		if placement == mesh.PlaceBalanced {
			asked = 0
		}
		epochs, ok := st.PartitionsOwnedBy(self, asked)
		if !ok || len(epochs) == 0 {
			return ownership{}, false // the reconciler places them right after the election
		}
		return ownership{term: lead.Term, leader: true, parts: partitionSet{count: st.PartitionCount, epochs: epochs}}, true
	}
	if leaderless > ownerLease {
		return ownership{none: fmt.Sprintf("no leader known for %s (the owner lease)", leaderless.Round(time.Millisecond))}, false
	}
	epochs, ok := st.PartitionsOwnedBy(self, 0)
	if !ok || len(epochs) == 0 {
		return ownership{}, false
	}
	return ownership{term: lead.Term, parts: partitionSet{count: st.PartitionCount, epochs: epochs}}, true
}
