package wag

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/robonet/robonet/sentinel"
)

// Misbehaviour is what a worker program did that no honest program does.
// The node it connects through sees it (package wag/remote) and tells the
// pool's Waggler (Target.Misbehaved), which counts it against the
// program's trust subject.
type Misbehaviour uint8

// Misbehaviours.
const (
	// Unsolicited: it answered an attempt it was never given, or one that
	// had finished.
	Unsolicited Misbehaviour = iota + 1
	// TooFast: it answered sooner than the node's floor, faster than any
	// real work could.
	TooFast
	// misbehaviourKinds bounds the kinds, for arrays indexed by them.
	misbehaviourKinds
)

// MisbehaviourKinds is one more than the largest Misbehaviour: the length
// of an array indexed by them.
const MisbehaviourKinds = int(misbehaviourKinds)

func (m Misbehaviour) String() string {
	switch m {
	case Unsolicited:
		return "unsolicited"
	case TooFast:
		return "too_fast"
	}
	return fmt.Sprintf("misbehaviour(%d)", uint8(m))
}

// Misbehaviours are every kind, for metrics.
var Misbehaviours = []Misbehaviour{Unsolicited, TooFast}

// Misbehaved implements Target: the worker program behind workerID did m.
// It counts against the program's subject (sentinel.Misbehaved): its
// trust falls, and the Sentinel quarantines a program that keeps at it.
// A node's own slots run no program; a report about one is ignored.
func (w *Waggler) Misbehaved(workerID string, m Misbehaviour) {
	subject := WorkerSubject(workerID)
	if subject == WorkerNode(workerID) {
		return
	}
	w.log.Warn("a worker program misbehaved", zap.String("program", subject), zap.String("worker", workerID), zap.Stringer("misbehaviour", m))
	if w.trust != nil {
		w.trust.Observe(sentinel.Observation{Node: subject, Capability: w.capability, Kind: sentinel.Misbehaved, At: w.clock.Now()})
	}
}

// Misbehaved tells the Waggler of capability that the program behind the
// pool called name (AddPool) did m. Without a Waggler now it is dropped:
// such a pool runs nothing.
func (h *WorkerHost) Misbehaved(capability, name string, m Misbehaviour) {
	h.mu.Lock()
	var p *pool
	for _, q := range h.pools[capability] {
		if q.poolName == name {
			p = q
			break
		}
	}
	h.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	t := p.target
	p.mu.Unlock()
	if t == nil {
		h.log.Debug("a worker program misbehaved while its pool has no waggler: not counted", zap.String("capability", capability), zap.String("pool", name))
		return
	}
	t.Misbehaved(p.slots[0].id, m)
}
