package wag

import (
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// The Router counts, per capability, the attempts it accepted and has no
// result for: those running on workers and those queued behind them. When
// that backlog is far larger than the capability's slots can start soon,
// a new instance needing the capability would only add attempts to the
// queue while the engine holds it in memory, writes its progress and
// scans its heap. The engine asks Saturated before it starts a new
// instance, keeps those whose first tasks all need a saturated capability
// waiting (port.Admission), and starts them when the Router reports the
// backlog drained (RouterConfig.OnDrain).

// Defaults of the backlog at which a capability is saturated.
const (
	// DefaultBacklogPerSlot is attempts in flight per slot serving the
	// capability.
	DefaultBacklogPerSlot = 32
	// DefaultMinBacklog is the least backlog that saturates a capability,
	// whatever its slots: enough for a chain-like load to keep every slot
	// busy across a round trip, and for slots the Router does not know of
	// (external workers).
	DefaultMinBacklog = 1024
	// DefaultBacklogStall: a capability with no result for this long is
	// never saturated — its tasks are long, or a count went wrong — so that
	// holding instances back can only delay them while results flow.
	DefaultBacklogStall = 10 * time.Second
)

// slotsTTL is how long the Router keeps a capability's slot count.
const slotsTTL = time.Second

// backlog is the Router's per-capability account; guarded by Router.mu.
// The result path only counts (done); Saturated reads the clock, and
// dates the last progress it saw (seen), so that no result pays for a
// clock read.
type backlog struct {
	inflight map[string]int       // attempts in r.atts
	done     map[string]uint64    // results since the backlog began
	seen     map[string]progress  // the progress Saturated last saw
	gated    map[string]int       // saturated capabilities → the limit they reached
	slots    map[string]slotCount // cached RouterConfig.Slots answers
	drained  []string             // to report through OnDrain once r.mu is released (unlock)
}

// progress is a capability's result count and when it was first seen at
// that count (or when its backlog began).
type progress struct {
	done uint64
	at   time.Time
}

type slotCount struct {
	n  int
	at time.Time
}

func newBacklog() backlog {
	return backlog{inflight: map[string]int{}, done: map[string]uint64{}, seen: map[string]progress{}, gated: map[string]int{}, slots: map[string]slotCount{}}
}

// share is this Router's part of a mesh-wide backlog limit: its engine's
// share of the partitions (every engine dispatches to the same Wagglers
// and workers, so the engines' backlogs add up to the mesh's).
func (r *Router) share(limit int) int {
	if r.cfg.PartitionCount <= 1 || len(r.cfg.Partitions) == 0 {
		return limit
	}
	return max(1, limit*len(r.cfg.Partitions)/r.cfg.PartitionCount)
}

// Saturated reports whether capability has so many attempts in flight —
// at least BacklogPerSlot per slot serving it, and MinBacklog, or this
// engine's share of that (share) — that a
// new instance needing it would only queue behind them, while results
// still arrive (a capability silent for BacklogStall is not saturated;
// a result is dated when Saturated first sees it counted).
// Once it answered true, OnDrain is called when the backlog falls to
// half of that limit. It implements port.Admission.
func (r *Router) Saturated(capability string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.bl.inflight[capability]
	if n < r.share(r.cfg.MinBacklog) {
		return false
	}
	now := r.cfg.Clock.Now()
	limit := r.cfg.MinBacklog
	if r.cfg.Slots != nil {
		sc, ok := r.bl.slots[capability]
		if !ok || now.Sub(sc.at) >= slotsTTL {
			sc = slotCount{n: r.cfg.Slots(capability), at: now}
			r.bl.slots[capability] = sc
		}
		limit = max(limit, sc.n*r.cfg.BacklogPerSlot)
	}
	limit = r.share(limit)
	if n < limit {
		return false
	}
	if p := r.bl.seen[capability]; p.done != r.bl.done[capability] {
		r.bl.seen[capability] = progress{done: r.bl.done[capability], at: now}
	} else if now.Sub(p.at) >= r.cfg.BacklogStall {
		return false
	}
	if _, was := r.bl.gated[capability]; !was {
		r.log.Debug("capability saturated: new instances needing it wait for its backlog to drain",
			zap.String("capability", capability), zap.Int("in_flight", n), zap.Int("limit", limit))
	}
	r.bl.gated[capability] = limit
	return true
}

var _ port.Admission = (*Router)(nil)
